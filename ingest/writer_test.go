package ingest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/schema"
)

// flatPrice charges one nano-dollar per token of any kind, so expected costs are easy to state;
// model "free-model" has no price.
func flatPrice(a *schema.Attempt) ingest.Costing {
	if a.Model == "free-model" {
		return ingest.Costing{}
	}
	total := money.Nanos(a.InputTokens + a.OutputTokens + a.CacheWriteTokens + a.CacheReadTokens)
	return ingest.Costing{Cost: total, NoCache: total, Priced: true,
		Version: store.PriceVersion{Key: "test/" + a.Model + "@2026-01-01", Provider: a.Provider, Model: a.Model,
			EffectiveFrom: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
}

func attempt(id string, at time.Time, no int, status schema.Status) schema.Attempt {
	a := schema.Attempt{AttemptID: id, RequestID: "req-" + id, AttemptNo: no, StartedAt: at, LatencyMS: 1000,
		Provider: "anthropic", Model: "claude-haiku-5-5", Service: "router", Operation: "default",
		Status: status, InputTokens: 100, OutputTokens: 10}
	if status == schema.StatusError {
		a.ErrorClass = schema.ErrorRateLimited
	}
	return a
}

// newWriter starts a writer on a new ledger holding one project, "acme", whose id it returns.
func newWriter(t *testing.T, opt ingest.Options) (*ingest.Writer, *store.Store, int64) {
	t.Helper()
	st := store.New(dbtest.New(t))
	p, err := st.EnsureProject(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	opt.Registerer = prometheus.NewRegistry()
	w := ingest.NewWriter(st, flatPrice, opt)
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return w, st, p.ID
}

// TestSubmitDuplicates checks that a record delivered again, in the same request, a later request
// or weeks later, is stored and counted once, and never changes a rollup.
func TestSubmitDuplicates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, st, project := newWriter(t, ingest.Options{})
	at := time.Date(2026, 10, 3, 10, 15, 0, 123456789, time.UTC)
	a := attempt("a1", at, 1, schema.StatusOK)
	b := attempt("a2", at.Add(time.Minute), 2, schema.StatusError)
	first, again := attempt("a5", at, 1, schema.StatusOK), attempt("a5", at, 1, schema.StatusOK)
	first.LatencyMS, again.LatencyMS = 100, 999
	cases := []struct {
		name string
		recs []schema.Attempt
		want ingest.Result
	}{
		{"first delivery", []schema.Attempt{a, b}, ingest.Result{Accepted: 2}},       // both new
		{"same request twice", []schema.Attempt{a, a}, ingest.Result{Duplicates: 2}}, // already stored
		{"new and old together", []schema.Attempt{attempt("a3", at, 1, schema.StatusOK), b}, ingest.Result{Accepted: 1, Duplicates: 1}},
		{"twice within one request", []schema.Attempt{attempt("a4", at, 1, schema.StatusOK), attempt("a4", at, 1, schema.StatusOK)}, ingest.Result{Accepted: 1, Duplicates: 1}},
		{"twice, sent differently", []schema.Attempt{first, again}, ingest.Result{Accepted: 1, Duplicates: 1}}, // the first is stored
	}
	for _, c := range cases {
		got, err := w.Submit(ctx, project, c.recs)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got.Accepted != c.want.Accepted || got.Duplicates != c.want.Duplicates {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var rows, attempts, requests, cost int64
	if err := st.Pool.QueryRow(ctx, `SELECT count(*) FROM attempts`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if err := st.Pool.QueryRow(ctx, `SELECT sum(attempts), sum(requests), sum(cost_nanos) FROM rollup_hourly`).Scan(&attempts, &requests, &cost); err != nil {
		t.Fatal(err)
	}
	if rows != 5 || attempts != 5 || requests != 4 || cost != 550 {
		t.Errorf("rows %d, rollup attempts %d requests %d cost %d; want 5, 5, 4, 550", rows, attempts, requests, cost)
	}
	var latency int64
	if err := st.Pool.QueryRow(ctx, `SELECT latency_ms FROM attempts WHERE attempt_id = 'a5'`).Scan(&latency); err != nil {
		t.Fatal(err)
	}
	if latency != first.LatencyMS {
		t.Errorf("a5 stored with latency %d, want the first delivery's %d", latency, first.LatencyMS)
	}
	var daily int64
	if err := st.Pool.QueryRow(ctx, `SELECT sum(attempts) FROM rollup_daily`).Scan(&daily); err != nil {
		t.Fatal(err)
	}
	if daily != 5 {
		t.Errorf("daily rollup attempts %d, want 5", daily)
	}
}

// TestConcurrentSubmitters checks group commit under many concurrent single-record requests with
// redeliveries: rollups equal the raw table exactly.
func TestConcurrentSubmitters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, st, project := newWriter(t, ingest.Options{Flushers: 2})
	base := time.Date(2026, 10, 31, 23, 0, 0, 0, time.UTC) // spans a month boundary
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := ingest.Result{}
	for c := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				n := (c*50 + i) % 600 // clients overlap: some records are sent twice
				a := attempt(fmt.Sprintf("r%d", n), base.Add(time.Duration(n)*5*time.Second), 1+n%3, schema.StatusOK)
				a.Model = []string{"claude-haiku-5-5", "free-model"}[n%2]
				res, err := w.Submit(ctx, project, []schema.Attempt{a})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total.Accepted += res.Accepted
				total.Duplicates += res.Duplicates
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if total.Accepted != 600 || total.Duplicates != 200 {
		t.Fatalf("accepted %d duplicates %d, want 600 and 200", total.Accepted, total.Duplicates)
	}
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var rawN, rawReq, rawCost, rollN, rollReq, rollCost, unpriced int64
	if err := st.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE attempt_no = 1), coalesce(sum(cost_nanos), 0) FROM attempts`).Scan(&rawN, &rawReq, &rawCost); err != nil {
		t.Fatal(err)
	}
	if err := st.Pool.QueryRow(ctx, `SELECT sum(attempts), sum(requests), sum(cost_nanos), sum(unpriced_attempts) FROM rollup_hourly`).Scan(&rollN, &rollReq, &rollCost, &unpriced); err != nil {
		t.Fatal(err)
	}
	if rawN != rollN || rawReq != rollReq || rawCost != rollCost || unpriced != 300 {
		t.Errorf("raw %d/%d/%d, rollup %d/%d/%d, unpriced %d (want 300)", rawN, rawReq, rawCost, rollN, rollReq, rollCost, unpriced)
	}
}

// TestHourBucketsAreUTC guards the rollups against the session's TimeZone: on a server set to a
// half-hour zone, hourly buckets must still start on UTC hours.
func TestHourBucketsAreUTC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbtest.NewURL(t)+"&timezone=Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st := store.New(pool)
	w := ingest.NewWriter(st, flatPrice, ingest.Options{Registerer: prometheus.NewRegistry()})
	defer w.Close(ctx)
	p, err := st.EnsureProject(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 10, 3, 10, 45, 0, 0, time.UTC)
	if _, err := w.Submit(ctx, p.ID, []schema.Attempt{attempt("k1", at, 1, schema.StatusOK)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var bucket time.Time
	if err := pool.QueryRow(ctx, `SELECT bucket FROM rollup_hourly`).Scan(&bucket); err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 10, 3, 10, 0, 0, 0, time.UTC); !bucket.Equal(want) {
		t.Fatalf("bucket %v, want %v", bucket.UTC(), want)
	}
}

// TestSubmitIntoDroppedMonth checks that a record for a month another process dropped for
// retention, after this writer had cached its partition, is stored in the partition made again,
// and does not fail the commit it shares with other records.
func TestSubmitIntoDroppedMonth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, st, project := newWriter(t, ingest.Options{})
	old := time.Date(2026, 8, 20, 10, 0, 0, 0, time.UTC)
	if _, err := w.Submit(ctx, project, []schema.Attempt{attempt("before-drop", old, 1, schema.StatusOK)}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, c := range []struct {
		name string
		recs []schema.Attempt
		want ingest.Result
	}{
		{"new records", []schema.Attempt{attempt("late-1", old, 1, schema.StatusOK), attempt("a-now", now, 1, schema.StatusOK)}, ingest.Result{Accepted: 2}},
		{"with a duplicate", []schema.Attempt{attempt("late-2", old, 1, schema.StatusOK), attempt("a-now", now, 1, schema.StatusOK)}, ingest.Result{Accepted: 1, Duplicates: 1}}, // a-now again: the exact insert stores late-2
	} {
		// Each time, another process (`ledgerd partitions drop`) drops the month this writer has
		// cached first.
		if _, err := store.New(st.Pool).DropPartitionsBefore(ctx, time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)); err != nil {
			t.Fatal(err)
		}
		res, err := w.Submit(ctx, project, c.recs)
		if err != nil || res.Accepted != c.want.Accepted || res.Duplicates != c.want.Duplicates {
			t.Fatalf("%s: %+v, %v; want %+v", c.name, res, err, c.want)
		}
		var n int
		if err := st.Pool.QueryRow(ctx, `SELECT count(*) FROM attempts WHERE attempt_id = $1`, c.recs[0].AttemptID).Scan(&n); err != nil || n != 1 {
			t.Fatalf("%s: %s stored %d times (%v)", c.name, c.recs[0].AttemptID, n, err)
		}
	}
}
