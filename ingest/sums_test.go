package ingest

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/dbtest"
)

// TestLatencyBucketMatchesSQL checks latencyBucket against the schema's latency_bucket on every
// latency up to 70 s, every power of two (where rounding is closest) and its neighbours, and the
// largest latency a row holds.
func TestLatencyBucketMatchesSQL(t *testing.T) {
	t.Parallel()
	var ms []int32
	for v := range int32(70_000) {
		ms = append(ms, v)
	}
	for p := 17; p < 31; p++ {
		ms = append(ms, 1<<p-1, 1<<p, 1<<p+1)
	}
	ms = append(ms, math.MaxInt32)
	rows, err := dbtest.New(t).Query(context.Background(), `SELECT latency_bucket(ms) FROM unnest($1::int4[]) WITH ORDINALITY AS t(ms, i) ORDER BY i`, ms)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var want int
		if err := rows.Scan(&want); err != nil {
			t.Fatal(err)
		}
		if got := latencyBucket(ms[i]); got != want {
			t.Errorf("latency %d ms: bucket %d, SQL says %d", ms[i], got, want)
		}
		i++
	}
	if err := rows.Err(); err != nil || i != len(ms) {
		t.Fatalf("read %d of %d buckets: %v", i, len(ms), err)
	}
}

// TestHistCopy checks the histogram as the fast path COPYs it against SQL's hist_agg over the same
// latencies.
func TestHistCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE copied (h int8[])`); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		ms   []int32
		want string
	}{
		{"one fast call", []int32{0}, "[0:0]={1}"},                                 // bucket 0, lower bound 0
		{"fast calls", []int32{1, 0, 1}, "[0:0]={3}"},                              // ≤ 1 ms all in bucket 0
		{"growing down", []int32{1000, 2}, "[16:160]={1" + zeros(143) + ",1}"},     // a lower bucket extends the front
		{"growing up", []int32{2, 1000, 1000}, "[16:160]={1" + zeros(143) + ",2}"}, // a higher bucket extends the back
		{"one second", []int32{1000}, "[160:160]={1}"},                             // a lone bucket far from 0 keeps its index
	}
	for _, c := range cases {
		var h hist
		for _, v := range c.ms {
			h.add(latencyBucket(v))
		}
		var sql, got string
		if err := pool.QueryRow(ctx, `SELECT hist_agg(latency_bucket(ms))::text FROM unnest($1::int4[]) AS t(ms)`, c.ms).Scan(&sql); err != nil {
			t.Fatal(err)
		}
		buf := startCopy(commitQuery(nil, `COPY copied FROM STDIN (FORMAT binary)`))
		buf.row(1)
		buf.hist(&h)
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = copyCommit(ctx, conn.Conn().PgConn(), buf.end())
		conn.Release()
		if err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRow(ctx, `DELETE FROM copied RETURNING h::text`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want || sql != c.want {
			t.Errorf("%s: Go %s, SQL %s, want %s", c.name, got, sql, c.want)
		}
	}
}

func zeros(n int) string {
	s := ""
	for range n {
		s += ",0"
	}
	return s
}

// BenchmarkRollupGroups sums a commit of 1,000 records into its pending rollup rows and cache
// groups, as the fast path does on every commit.
func BenchmarkRollupGroups(b *testing.B) {
	const n = 1000
	bt := &batch{n: n, project: make([]int64, n), series: make([]int64, n), started: make([]time.Time, n),
		attemptNo: make([]int32, n), latency: make([]int32, n), status: make([]string, n), class: make([]string, n),
		fallback: make([]bool, n), input: make([]int64, n), output: make([]int64, n), cw: make([]int64, n),
		cw1h: make([]int64, n), cr: make([]int64, n), reasoning: make([]int64, n), cost: make([]*int64, n),
		nocache: make([]*int64, n), clientCost: make([]*int64, n), promptHash: make([]*string, n)}
	start := time.Date(2026, 11, 4, 15, 0, 0, 0, time.UTC)
	hash := "p1"
	for i := range n {
		c := int64(1000 + i)
		bt.project[i], bt.series[i], bt.started[i] = 1, int64(i%50), start.Add(time.Duration(i)*time.Second)
		bt.attemptNo[i], bt.latency[i], bt.status[i], bt.class[i] = int32(1+i%2), int32(100+i), "ok", "none"
		bt.input[i], bt.output[i], bt.cw[i], bt.cr[i] = 2000, 300, int64(i%3), int64(i%2)*500
		if i%10 != 0 {
			bt.cost[i], bt.nocache[i] = &c, &c
		}
		if i%4 == 0 {
			bt.clientCost[i], bt.promptHash[i] = &c, &hash
		}
	}
	for b.Loop() {
		rollupGroups(bt, localDays(bt, time.UTC))
	}
}
