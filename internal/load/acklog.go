package load

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/schema"
)

// Ack is one line of an ack log: a record ledgerd acknowledged, with what is needed to find it in
// the database and to recompute billed totals. CostNanos is the price the catalog gives the record
// (nil when unpriced), so the log's total is the bill the ledger must show.
type Ack struct {
	AttemptID          string    `json:"attempt_id"`
	StartedAt          time.Time `json:"started_at"`
	Provider           string    `json:"provider"`
	Model              string    `json:"model"`
	AttemptNo          int       `json:"attempt_no"`
	Status             string    `json:"status"`
	InputTokens        int64     `json:"input_tokens"`
	OutputTokens       int64     `json:"output_tokens"`
	CacheWriteTokens   int64     `json:"cache_write_tokens"`
	CacheWrite1hTokens int64     `json:"cache_write_1h_tokens"`
	CacheReadTokens    int64     `json:"cache_read_tokens"`
	CostNanos          *int64    `json:"cost_nanos"`
}

// AckOf builds the ack log line of a record; price may be nil, leaving the record unpriced.
func AckOf(a *schema.Attempt, price ingest.PriceFunc) Ack {
	ack := Ack{AttemptID: a.AttemptID, StartedAt: a.StartedAt.UTC().Truncate(time.Microsecond),
		Provider: a.Provider, Model: a.Model, AttemptNo: a.AttemptNo, Status: string(a.Status),
		InputTokens: a.InputTokens, OutputTokens: a.OutputTokens, CacheWriteTokens: a.CacheWriteTokens,
		CacheWrite1hTokens: a.CacheWrite1hTokens, CacheReadTokens: a.CacheReadTokens}
	if price != nil {
		if c := price(a); c.Priced {
			v := int64(c.Cost)
			ack.CostNanos = &v
		}
	}
	return ack
}

// ackLog writes acknowledged records, one JSON line each, safely from many workers.
type ackLog struct {
	mu  sync.Mutex
	w   *bufio.Writer
	enc *json.Encoder
	err error
}

func newAckLog(w io.Writer) *ackLog {
	bw := bufio.NewWriterSize(w, 256<<10)
	return &ackLog{w: bw, enc: json.NewEncoder(bw)}
}

func (l *ackLog) write(acks []Ack) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range acks {
		if l.err == nil {
			l.err = l.enc.Encode(&acks[i])
		}
	}
}

func (l *ackLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = l.w.Flush()
	}
	if l.err != nil {
		return fmt.Errorf("write ack log: %w", l.err)
	}
	return nil
}

// ReadAcks reads an ack log. A record listed twice (two runs appending to one log) is kept once.
func ReadAcks(r io.Reader) ([]Ack, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	seen := map[string]bool{}
	var out []Ack
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var a Ack
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			return nil, fmt.Errorf("ack log line %d: %w", line, err)
		}
		k := identityOf(a.AttemptID, a.StartedAt)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, a)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read ack log: %w", err)
	}
	return out, nil
}

// Totals are the figures a ledger holding exactly a set of acknowledged records must show.
type Totals struct {
	Records      int64
	Requests     int64 // records with attempt_no 1
	Unpriced     int64
	CostNanos    int64 // sum over priced records
	InputTokens  int64
	OutputTokens int64
}

// Sum adds up acknowledged records.
func Sum(acks []Ack) Totals {
	var t Totals
	for _, a := range acks {
		t.Records++
		if a.AttemptNo == 1 {
			t.Requests++
		}
		if a.CostNanos == nil {
			t.Unpriced++
		} else {
			t.CostNanos += *a.CostNanos
		}
		t.InputTokens += a.InputTokens
		t.OutputTokens += a.OutputTokens
	}
	return t
}

// identityOf is how ledgerd tells records apart within a project.
func identityOf(attemptID string, startedAt time.Time) string {
	return fmt.Sprintf("%s|%d", attemptID, startedAt.UnixMicro())
}
