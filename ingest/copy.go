package ingest

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/ledgerd/ledgerd/internal/rollup"
)

// The fast path COPYs a batch in PostgreSQL's binary COPY format, encoded straight from the
// batch's typed columns. pgx's CopyFrom encodes the same rows value by value through its type map,
// boxing each value in an interface: that cost a fifth of the writer's CPU at 1,000 records a
// request, and this encoder a tenth of it. The twin test (paths_test.go) checks that rows stored
// this way equal those the exact path stores through pgx.

// The fast path's COPY statements: attempts in attemptCols order, then the pending rollup rows and
// cache groups summed in Go (see sums.go), in the column order of rollup.PendingCols and
// rollup.PendingCacheCols.
var (
	copySQL              = copyStmt("attempts", colList(attemptCols))
	pendingRollupCopySQL = copyStmt("pending_rollup_hourly", rollup.PendingCols)
	pendingCacheCopySQL  = copyStmt("pending_cache", rollup.PendingCacheCols)
)

func copyStmt(table string, cols []string) string {
	return "COPY " + table + " (" + strings.Join(cols, ", ") + ") FROM STDIN (FORMAT binary)"
}

// pgEpochMicros is 2000-01-01 UTC, PostgreSQL's timestamp epoch, in Unix microseconds.
const pgEpochMicros = 946_684_800_000_000

// copyBuf appends one COPY's data to a commit's protocol messages (see copyCommit), in binary COPY
// format: a header, one tuple per row (a field count, then each field as its length and bytes, -1
// for NULL), and a trailer. Enums go as their labels and jsonb as version 1 followed by the JSON
// text, as PostgreSQL's binary receive functions read them. The data is written straight into its
// CopyData message, whose length end fills in, so that it is never copied again before it is sent.
type copyBuf struct {
	b     []byte
	start int // offset of the CopyData message's length
}

var bigEndian = binary.BigEndian

// startCopy appends a CopyData message's type, room for its length, and the COPY header to b.
func startCopy(b []byte) *copyBuf {
	c := &copyBuf{b: append(b, 'd'), start: len(b) + 1}
	c.b = bigEndian.AppendUint32(c.b, 0) // the message length, set by end
	c.b = append(c.b, "PGCOPY\n\xff\r\n\x00"...)
	c.b = bigEndian.AppendUint32(c.b, 0) // flags
	c.b = bigEndian.AppendUint32(c.b, 0) // header extension length
	return c
}

func (c *copyBuf) row(fields int) { c.b = bigEndian.AppendUint16(c.b, uint16(fields)) }
func (c *copyBuf) i8(v int64) {
	c.b = bigEndian.AppendUint64(bigEndian.AppendUint32(c.b, 8), uint64(v))
}
func (c *copyBuf) i4(v int32) {
	c.b = bigEndian.AppendUint32(bigEndian.AppendUint32(c.b, 4), uint32(v))
}
func (c *copyBuf) i2(v int16) {
	c.b = bigEndian.AppendUint16(bigEndian.AppendUint32(c.b, 2), uint16(v))
}
func (c *copyBuf) null()         { c.b = bigEndian.AppendUint32(c.b, 0xffffffff) }
func (c *copyBuf) text(s string) { c.b = append(bigEndian.AppendUint32(c.b, uint32(len(s))), s...) }

func (c *copyBuf) boolean(v bool) {
	c.b = bigEndian.AppendUint32(c.b, 1)
	if v {
		c.b = append(c.b, 1)
	} else {
		c.b = append(c.b, 0)
	}
}

// timestamp writes a timestamptz from Unix microseconds; date, a date from the Unix second of its
// UTC midnight.
func (c *copyBuf) timestamp(unixMicros int64) { c.i8(unixMicros - pgEpochMicros) }
func (c *copyBuf) date(unix int64)            { c.i4(int32((unix - pgEpochMicros/1e6) / 86400)) }

// hist writes a latency histogram as a one-dimensional int8[] whose lower bound is its first
// bucket.
func (c *copyBuf) hist(h *hist) {
	const int8OID = 20
	c.b = bigEndian.AppendUint32(c.b, uint32(20+12*len(h.counts)))
	c.b = bigEndian.AppendUint32(c.b, 1) // dimensions
	c.b = bigEndian.AppendUint32(c.b, 0) // no NULLs
	c.b = bigEndian.AppendUint32(c.b, int8OID)
	c.b = bigEndian.AppendUint32(c.b, uint32(len(h.counts)))
	c.b = bigEndian.AppendUint32(c.b, uint32(int32(h.lo)))
	for _, n := range h.counts {
		c.i8(n)
	}
}

// end appends the trailer, sets the CopyData message's length, and appends CopyDone, returning
// the messages so far.
func (c *copyBuf) end() []byte {
	c.b = bigEndian.AppendUint16(c.b, 0xffff)
	bigEndian.PutUint32(c.b[c.start:], uint32(len(c.b)-c.start))
	return append(c.b, 'c', 0, 0, 0, 4)
}

// appendCopy appends the batch to msg as the data of copySQL (CopyData and CopyDone messages).
func (b *batch) appendCopy(msg []byte) []byte {
	c := startCopy(msg)
	for i := range b.n {
		c.row(len(attemptCols))
		c.i8(b.project[i])
		c.timestamp(b.started[i].UnixMicro())
		c.i8(b.series[i])
		c.i4(b.attemptNo[i])
		c.i4(b.latency[i])
		c.text(b.status[i])
		c.text(b.class[i])
		c.boolean(b.fallback[i])
		c.boolean(b.batch[i])
		if v := b.httpStatus[i]; v != nil {
			c.i2(*v)
		} else {
			c.null()
		}
		for _, v := range []*int32{b.retryAfter[i], b.priceID[i]} {
			if v != nil {
				c.i4(*v)
			} else {
				c.null()
			}
		}
		for _, v := range []int64{b.input[i], b.output[i], b.cw[i], b.cw1h[i], b.cr[i], b.reasoning[i]} {
			c.i8(v)
		}
		for _, v := range []*int64{b.cost[i], b.nocache[i], b.clientCost[i]} {
			if v != nil {
				c.i8(*v)
			} else {
				c.null()
			}
		}
		c.text(b.attemptID[i])
		c.text(b.requestID[i])
		for _, v := range []*string{b.promptHash[i], b.providerReq[i]} {
			if v != nil {
				c.text(*v)
			} else {
				c.null()
			}
		}
		if v := b.metadata[i]; v != nil {
			c.b = append(bigEndian.AppendUint32(c.b, uint32(len(*v)+1)), 1)
			c.b = append(c.b, *v...)
		} else {
			c.null()
		}
		b.appendLimits(c, i)
		c.boolean(b.usageUnknown[i])
	}
	return c.end()
}

// appendCopy appends the groups to msg as the data of pendingRollupCopySQL (hist: the hourly rows)
// or pendingCacheCopySQL.
func (g *groups) appendCopy(msg []byte, hist bool) []byte {
	c := startCopy(msg)
	for i, k := range g.keys {
		if hist {
			c.row(len(rollup.PendingCols))
		} else {
			c.row(len(rollup.PendingCacheCols))
		}
		c.i8(k.project)
		c.timestamp(k.bucket * 1e6)
		c.i8(k.series)
		c.boolean(k.fallback)
		if hist {
			c.text(k.status)
			c.text(k.class)
			c.date(k.day)
			c.i2(k.minute)
		} else {
			c.text(k.hash)
		}
		for _, v := range g.vals[i].sums {
			c.i8(v)
		}
		if hist {
			c.hist(&g.vals[i].hist)
		}
	}
	return c.end()
}

// commitQuery appends to msg the simple query "BEGIN; COPY …; COPY …; COMMIT" of copyCommit, for
// the COPY statements sqls; each COPY's data follows it (appendCopy).
func commitQuery(msg []byte, sqls ...string) []byte {
	q := "BEGIN; " + strings.Join(sqls, "; ") + "; COMMIT"
	msg = append(msg, 'Q')
	msg = bigEndian.AppendUint32(msg, uint32(4+len(q)+1))
	msg = append(msg, q...)
	return append(msg, 0)
}

// commitBufs holds the buffers commits build their messages in: a commit of 1,000 records takes
// about 300 KB (296 KB of synthetic live records), and a new buffer each time cost page faults and
// clearing, and growing pgproto3's send buffer a copy of every byte (a fifth of the writer's CPU,
// measured with perf).
var commitBufs = sync.Pool{New: func() any { return new([]byte) }}

// putCommitBuf returns buf to commitBufs, holding msg's memory, unless that is over 16 MB: a
// commit of records with large metadata is rare, and its buffer is not worth keeping.
func putCommitBuf(buf *[]byte, msg []byte) {
	if cap(msg) <= 16<<20 {
		*buf = msg
		commitBufs.Put(buf)
	}
}

// copyCommit sends msg, a simple query "BEGIN; COPY …; COPY …; COMMIT" followed at once by each
// COPY's data (commitQuery, appendCopy), in one write, and waits for the outcome: one transaction
// in a single round trip. pgx's CopyFrom takes one COPY per round trip, and a commit of BEGIN, COPY,
// inserts and COMMIT apart took four; with 64 clients posting one record each, the flushers' round
// trips were what held the rate down. On an error PostgreSQL skips the rest of the query and drops
// the data still coming, so nothing is written; the connection is then rolled back to be used
// again, or left in its transaction for the pool to close.
func copyCommit(ctx context.Context, pg *pgconn.PgConn, msg []byte) error {
	// pgx may hold buffered reads or read in the background: the raw connection is only ours once
	// they are drained and stopped.
	if err := pg.SyncConn(ctx); err != nil {
		_ = pg.Close(ctx)
		return fmt.Errorf("sync connection: %w", err)
	}
	// The write is bounded by ctx's deadline too: the server reads it while it runs the query.
	if d, ok := ctx.Deadline(); ok {
		_ = pg.Conn().SetWriteDeadline(d)
		defer func() { _ = pg.Conn().SetWriteDeadline(time.Time{}) }()
	}
	// The connection is idle, so nothing waits in pgproto3's send buffer: this write is what its
	// Flush would do, without copying msg into that buffer first.
	if _, err := pg.Conn().Write(msg); err != nil {
		_ = pg.Close(ctx)
		return fmt.Errorf("send: %w", err)
	}
	var first error
	for {
		msg, err := pg.ReceiveMessage(ctx)
		if err != nil {
			_ = pg.Close(ctx)
			return fmt.Errorf("receive: %w", err)
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			if first == nil {
				first = pgconn.ErrorResponseToPgError(m)
			}
		case *pgproto3.ReadyForQuery:
			if first != nil && m.TxStatus != 'I' {
				_ = pg.Exec(ctx, "ROLLBACK").Close()
			}
			return first
		}
	}
}
