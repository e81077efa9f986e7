package ingest_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/rollup"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/schema"
)

var backlogRecords = flag.Int("backlog-records", 200_000, "records BenchmarkFoldBacklog commits before folding")

// manyTenants returns n records over the 30 days before end, from 10,000 tenants, 50 services and
// 12 models: the ledger of a SaaS that attributes spend per customer, whose series are many.
func manyTenants(n int, end time.Time) []schema.Attempt {
	rng := rand.New(rand.NewPCG(3, 5))
	recs := make([]schema.Attempt, n)
	for i := range recs {
		at := end.Add(-time.Duration(rng.Int64N(int64(30 * 24 * time.Hour))))
		recs[i] = schema.Attempt{AttemptID: fmt.Sprintf("m%d", i), RequestID: fmt.Sprintf("r%d", i), AttemptNo: 1,
			StartedAt: at, LatencyMS: 100 + rng.Int64N(3000), Provider: "anthropic",
			Model: fmt.Sprintf("model-%d", rng.IntN(12)), Service: fmt.Sprintf("svc-%d", rng.IntN(50)), Operation: "default",
			Tenant: fmt.Sprintf("tenant-%d", rng.IntN(10_000)), Status: schema.StatusOK,
			InputTokens: 500 + rng.Int64N(4000), OutputTokens: rng.Int64N(800), CacheReadTokens: rng.Int64N(2) * 1000}
	}
	return recs
}

// backlog commits recs through a writer that does not fold, into a database of its own, and
// returns the database and the writer.
func backlog(b *testing.B, recs []schema.Attempt, opt ingest.Options) (*pgxpool.Pool, *ingest.Writer) {
	ctx := context.Background()
	pool := dbtest.New(b)
	st := store.New(pool)
	opt.Registerer, opt.FoldEvery = prometheus.NewRegistry(), time.Hour
	w := ingest.NewWriter(st, flatPrice, opt)
	b.Cleanup(func() { _ = w.Close(context.Background()) })
	p, err := st.EnsureProject(ctx, "acme")
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(recs); i += 5000 {
		if _, err := w.Submit(ctx, p.ID, recs[i:min(i+5000, len(recs))]); err != nil {
			b.Fatal(err)
		}
	}
	return pool, w
}

// BenchmarkFoldBacklog commits -backlog-records records of many series (manyTenants) without
// folding, then drains the backlog twice, on two databases holding the same records: as the writer
// does, in chunks of rollup.DefaultChunk pending rows a transaction, while a read waits its bound;
// and, the baseline, as the fold did before chunks, in one statement. It reports the pending rows,
// the first read's wait (first-read-ms, bounded by ReadWait), the chunked drain's time against the
// single statement's (chunked/single), and the rollups' rows per raw attempt once drained.
//
//	go test -run '^$' -bench FoldBacklog -benchtime 1x ./ingest/ -args -backlog-records=1000000
func BenchmarkFoldBacklog(b *testing.B) {
	ctx := context.Background()
	recs := manyTenants(*backlogRecords, time.Date(2026, 11, 4, 15, 0, 0, 0, time.UTC))
	for b.Loop() {
		single, _ := backlog(b, recs, ingest.Options{})
		// Reads wait as long as ledgerd serve's default --fold-wait lets them.
		pool, w := backlog(b, recs, ingest.Options{ReadWait: 750 * time.Millisecond})
		var pending int64
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pending_rollup_hourly) + (SELECT count(*) FROM pending_cache)
			+ (SELECT count(*) FROM pending_load_minute)`).Scan(&pending); err != nil {
			b.Fatal(err)
		}

		start := time.Now()
		if err := w.Sync(ctx); err != nil {
			b.Fatal(err)
		}
		firstRead := time.Since(start)
		for w.Behind() > 0 { // a read now and then wakes the folder should a chunk fail
			time.Sleep(10 * time.Millisecond)
			if err := w.Sync(ctx); err != nil {
				b.Fatal(err)
			}
		}
		chunked := time.Since(start)

		start = time.Now()
		if err := pgx.BeginFunc(ctx, single, func(tx pgx.Tx) error {
			_, _, err := rollup.FoldChunk(ctx, tx, rollup.NewCursor(), len(recs)*2)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		one := time.Since(start)

		var hourly, daily, cache int64
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM rollup_hourly), (SELECT count(*) FROM rollup_daily),
			(SELECT count(*) FROM rollup_cache_hourly)`).Scan(&hourly, &daily, &cache); err != nil {
			b.Fatal(err)
		}
		n := float64(len(recs))
		b.ReportMetric(float64(pending), "pending-rows")
		b.ReportMetric(ms(firstRead), "first-read-ms")
		b.ReportMetric(chunked.Seconds(), "chunked-s")
		b.ReportMetric(one.Seconds(), "single-s")
		b.ReportMetric(chunked.Seconds()/one.Seconds(), "chunked/single")
		b.ReportMetric(float64(hourly)/n, "hourly-rows/attempt")
		b.ReportMetric(float64(daily)/n, "daily-rows/attempt")
		b.ReportMetric(float64(cache)/n, "cache-rows/attempt")
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
