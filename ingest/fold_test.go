package ingest_test

import (
	"context"
	"fmt"
	"sync"
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

// ledgerCounts are the attempts the raw table holds and each rollup counts, and the rows still
// pending.
type ledgerCounts struct{ raw, hourly, daily, model, service, tenant, cache, pending int64 }

func countLedger(t *testing.T, pool *pgxpool.Pool) ledgerCounts {
	t.Helper()
	var c ledgerCounts
	err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM attempts),
		(SELECT coalesce(sum(attempts), 0) FROM rollup_hourly), (SELECT coalesce(sum(attempts), 0) FROM rollup_daily),
		(SELECT coalesce(sum(attempts), 0) FROM rollup_daily_model), (SELECT coalesce(sum(attempts), 0) FROM rollup_daily_service),
		(SELECT coalesce(sum(attempts), 0) FROM rollup_daily_tenant), (SELECT coalesce(sum(calls), 0) FROM rollup_cache_hourly),
		(SELECT (SELECT count(*) FROM pending_rollup_hourly) + (SELECT count(*) FROM pending_cache))`).
		Scan(&c.raw, &c.hourly, &c.daily, &c.model, &c.service, &c.tenant, &c.cache, &c.pending)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// folded is what countLedger returns once all n stored attempts, cache of them with a prompt hash
// or cache use, are folded.
func folded(n, cache int64) ledgerCounts {
	return ledgerCounts{raw: n, hourly: n, daily: n, model: n, service: n, tenant: n, cache: cache}
}

func cacheCalls(recs []schema.Attempt) int64 {
	var n int64
	for _, a := range recs {
		if a.CacheWriteTokens > 0 || a.CacheReadTokens > 0 || a.PromptHash != "" {
			n++
		}
	}
	return n
}

// foldLedger returns a fresh database, a writer on it folding every foldEvery (time.Hour leaves
// folding to Sync and Close within a test) with its metrics on reg, closed at the end of the test,
// and a project's id.
func foldLedger(t *testing.T, foldEvery time.Duration, reg *prometheus.Registry) (*pgxpool.Pool, *ingest.Writer, int64) {
	t.Helper()
	pool := dbtest.New(t)
	st := store.New(pool)
	w := ingest.NewWriter(st, flatPrice, ingest.Options{Registerer: reg, FoldEvery: foldEvery})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	p, err := st.EnsureProject(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	return pool, w, p.ID
}

// TestFold checks when the writer folds committed rollup deltas: not in the commit, on Sync, by
// itself every FoldEvery, on Close, and those another replica left.
func TestFold(t *testing.T) {
	t.Parallel()
	recs := variedBatch(300)
	n, cache := int64(len(recs)), cacheCalls(recs)
	never := time.Hour // FoldEvery that leaves folding to Sync and Close within a test
	cases := []struct {
		name string
		// fold gets the committed deltas folded, through the writer or around it.
		fold      func(t *testing.T, w *ingest.Writer, pool *pgxpool.Pool)
		foldEvery time.Duration
	}{
		{"sync", func(t *testing.T, w *ingest.Writer, _ *pgxpool.Pool) {
			if err := w.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
		}, never},
		{"close", func(t *testing.T, w *ingest.Writer, _ *pgxpool.Pool) {
			if err := w.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
		}, never},
		{"by itself", func(t *testing.T, _ *ingest.Writer, pool *pgxpool.Pool) {
			waitFolded(t, pool)
		}, 20 * time.Millisecond},
		// The committing writer never folds, as a replica killed after its commit: another one,
		// with no commits of its own, folds what it left.
		{"by another replica", func(t *testing.T, _ *ingest.Writer, pool *pgxpool.Pool) {
			other := ingest.NewWriter(store.New(pool), flatPrice, ingest.Options{Registerer: prometheus.NewRegistry(), FoldEvery: 20 * time.Millisecond})
			t.Cleanup(func() { _ = other.Close(context.Background()) })
			waitFolded(t, pool)
		}, never},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pool, w, project := foldLedger(t, c.foldEvery, prometheus.NewRegistry())
			if _, err := w.Submit(context.Background(), project, recs); err != nil {
				t.Fatal(err)
			}
			if c.foldEvery == never {
				if got := countLedger(t, pool); got.raw != n || got.hourly != 0 || got.pending == 0 {
					t.Errorf("after the commit: %+v, want %d raw attempts, none in the rollups, deltas pending", got, n)
				}
			}
			c.fold(t, w, pool)
			if got, want := countLedger(t, pool), folded(n, cache); got != want {
				t.Errorf("after folding: %+v, want %+v", got, want)
			}
		})
	}
}

// waitFolded waits up to 10 s for the pending rollup rows to be folded.
func waitFolded(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var left int64
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pending_rollup_hourly`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			return
		}
	}
	t.Fatal("deltas left pending for 10 s")
}

// waitCaughtUp reads (Sync) until the writer's rollups count everything it committed, for up to 30
// s: the folder waits 5 s after a fold gave up on the lock.
func waitCaughtUp(t *testing.T, w *ingest.Writer) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); w.Behind() > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("rollups still %v behind after 30 s", w.Behind())
		}
		if err := w.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSyncSkipsAndYields checks that Sync folds nothing when nothing was committed since the last
// fold, and that the fold gives up, leaving the deltas pending, when another fold (a rollup
// rebuild, say) holds the lock for over a second, once for all the Syncs waiting meanwhile, which
// answer within their bound; the folder folds them once the lock is released.
func TestSyncSkipsAndYields(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	pool, w, project := foldLedger(t, time.Hour, reg)
	recs := variedBatch(50)
	if _, err := w.Submit(ctx, project, recs); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := w.Sync(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, folds := gathered(t, reg, "ledgerd_rollup_fold_seconds"); folds != 1 {
		t.Errorf("two Syncs after one commit folded %d times, want 1", folds)
	}

	more := variedBatch(80)[50:]
	for i := range more {
		more[i].AttemptID += "-more"
	}
	if _, err := w.Submit(ctx, project, more); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE rollup_fold_lock IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// Eight reads at once: they wait for one fold to give up, not for one each.
	start := time.Now()
	var syncs sync.WaitGroup
	for range 8 {
		syncs.Go(func() {
			if err := w.Sync(ctx); err != nil {
				t.Errorf("Sync under a held fold lock: %v, want nil", err)
			}
		})
	}
	syncs.Wait()
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("8 Syncs under a held fold lock took %v, want about a second", took)
	}
	// The reads answered after their bound; the fold gives up a second after it began.
	for deadline := time.Now().Add(5 * time.Second); counter(t, reg, "ledgerd_rollup_fold_failures_total") == 0 &&
		time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
	}
	if f := counter(t, reg, "ledgerd_rollup_fold_failures_total"); f != 1 {
		t.Errorf("%v fold failures, want 1", f)
	}
	if got := countLedger(t, pool); got.hourly != int64(len(recs)) || got.pending == 0 {
		t.Errorf("under the lock: %+v, want the first %d attempts folded and the rest pending", got, len(recs))
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	waitCaughtUp(t, w)
	all := append(recs, more...)
	if got, want := countLedger(t, pool), folded(int64(len(all)), cacheCalls(all)); got != want {
		t.Errorf("after the lock: %+v, want %+v", got, want)
	}
}

// TestReplicasFold runs two writers, as two ledgerd replicas, on one database, committing and
// folding at once (each every few milliseconds and on Sync): every delta is folded exactly once.
func TestReplicasFold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	st := store.New(pool)
	p, err := st.EnsureProject(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	recs := variedBatch(1200)
	var wg sync.WaitGroup
	for r := range 2 {
		// Each replica has its own store, as its own process would.
		w := ingest.NewWriter(store.New(pool), flatPrice, ingest.Options{Registerer: prometheus.NewRegistry(), FoldEvery: 5 * time.Millisecond})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if err := w.Close(ctx); err != nil {
					t.Errorf("replica %d: %v", r, err)
				}
			}()
			for i := r * 20; i < len(recs); i += 40 {
				if _, err := w.Submit(ctx, p.ID, recs[i:i+20]); err != nil {
					t.Errorf("replica %d: %v", r, err)
					return
				}
				if i%120 == 0 {
					if err := w.Sync(ctx); err != nil {
						t.Errorf("replica %d: %v", r, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if got, want := countLedger(t, pool), folded(int64(len(recs)), cacheCalls(recs)); got != want {
		t.Errorf("%+v, want %+v", got, want)
	}
}

// TestFoldVacuums checks that a fold which moved rows is followed by a vacuum of the pending
// tables, which autovacuum would leave to bloat for up to a minute under load.
func TestFoldVacuums(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, w, project := foldLedger(t, time.Hour, prometheus.NewRegistry())
	if _, err := w.Submit(ctx, project, variedBatch(20)); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// Statistics reach pg_stat_user_tables once the vacuuming connection reports them, within a
	// second or so of going idle.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var vacuums int64
		if err := pool.QueryRow(ctx, `SELECT min(vacuum_count) FROM pg_stat_user_tables
			WHERE relname LIKE 'pending\_%'`).Scan(&vacuums); err != nil {
			t.Fatal(err)
		}
		if vacuums > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no vacuum of every pending table within 10 s of a fold")
		}
	}
}

// TestFoldDrainsBacklog checks that a backlog of many fold chunks drains, one chunk per
// transaction, while reads wait only their bound for it and are told how far behind the rollups
// are; once drained, the rollups count every attempt.
func TestFoldDrainsBacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	pool := dbtest.New(t)
	st := store.New(pool)
	// Chunks of 10 pending rows: the backlog below takes over a hundred of them.
	w := ingest.NewWriter(st, flatPrice, ingest.Options{Registerer: reg, FoldEvery: time.Hour, FoldChunk: 10,
		ReadWait: 20 * time.Millisecond})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	p, err := st.EnsureProject(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	recs := variedBatch(4000)
	if _, err := w.Submit(ctx, p.ID, recs); err != nil {
		t.Fatal(err)
	}
	backlog := countLedger(t, pool).pending
	if backlog < 1000 {
		t.Fatalf("%d pending rows, want a backlog of over a hundred chunks", backlog)
	}
	// The read gets its answer after its bound, with most of the backlog still pending.
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if got := countLedger(t, pool); got.pending == 0 || got.hourly == int64(len(recs)) {
		t.Errorf("after a read's bounded wait: %+v, want the backlog still draining", got)
	}
	if w.Behind() <= 0 {
		t.Errorf("Behind() = %v during the drain, want the lag", w.Behind())
	}
	waitCaughtUp(t, w)
	if got, want := countLedger(t, pool), folded(int64(len(recs)), cacheCalls(recs)); got != want {
		t.Errorf("after the drain: %+v, want %+v", got, want)
	}
	// Each chunk takes up to 10 rows of each of the three pending tables.
	if chunks := counter(t, reg, "ledgerd_rollup_fold_chunks_total"); chunks < float64(backlog/30) {
		t.Errorf("%v chunks folded a backlog of %d rows, want at least %d", chunks, backlog, backlog/30)
	}
}

// TestFoldNotesLoadDays checks that a fold chunk that adds only load deltas (the hourly ones all
// folded before) writes again the row of rollup_days of their day: the incidents keep a past
// day's minutes as of that row (internal/analytics).
func TestFoldNotesLoadDays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, w, p := foldLedger(t, time.Hour, prometheus.NewRegistry())
	// A call in each minute of one past hour: a pending hourly row or a few, and 60 load rows.
	at := time.Date(2026, 10, 5, 10, 0, 0, 0, time.UTC)
	var recs []schema.Attempt
	for m := range 60 {
		recs = append(recs, attempt(fmt.Sprintf("m%d", m), at.Add(time.Duration(m)*time.Minute), 1, schema.StatusOK))
	}
	if _, err := w.Submit(ctx, p, recs); err != nil {
		t.Fatal(err)
	}
	// state is the xmin of the day's row of rollup_days (0: none) and the rows pending in the
	// hourly and load tables.
	state := func() (xmin, hourly, load int64) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT coalesce((SELECT xmin::text::int8 FROM rollup_days WHERE project_id = $1
			AND bucket = '2026-10-05'), 0), (SELECT count(*) FROM pending_rollup_hourly), (SELECT count(*) FROM pending_load_minute)`, p).
			Scan(&xmin, &hourly, &load); err != nil {
			t.Fatal(err)
		}
		return xmin, hourly, load
	}
	// chunk folds up to 10 rows of each pending table after cur, in a transaction of its own.
	chunk := func(cur rollup.Cursor) rollup.Cursor {
		t.Helper()
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
			cur, _, err = rollup.FoldChunk(ctx, tx, cur, 10)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return cur
	}
	loadOnly := 0
	for cur := rollup.NewCursor(); !cur.Done(); {
		xmin, hourly, load := state()
		cur = chunk(cur)
		after, _, left := state()
		if left < load && after == xmin {
			t.Errorf("a chunk folded %d load rows (%d hourly rows pending before it) and left the day's row of rollup_days as it was", load-left, hourly)
		}
		if left < load && hourly == 0 {
			loadOnly++
		}
	}
	if loadOnly < 3 {
		t.Errorf("%d chunks folded load rows alone, want at least 3", loadOnly)
	}
}

// TestWriterPrunes checks that a writer with PruneEvery set removes rollup_hourly's hours older
// than rollup.HourlyKeep on its own, keeps the recent ones, and leaves every other rollup whole;
// and that it then sums the cache days its folds noted (rollup.SummarizeCacheDays).
func TestWriterPrunes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, st, project := newWriter(t, ingest.Options{FoldEvery: 10 * time.Millisecond,
		PruneEvery: 50 * time.Millisecond})
	now := time.Now()
	recs := []schema.Attempt{attempt("old", now.Add(-rollup.HourlyKeep-48*time.Hour), 1, schema.StatusOK),
		attempt("new", now.Add(-time.Hour), 1, schema.StatusOK)}
	for i := range recs {
		recs[i].PromptHash = "sys-v1"
	}
	if _, err := w.Submit(ctx, project, recs); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var hourly, old, model, daily, days, noted int64
		if err := st.Pool.QueryRow(ctx, `SELECT (SELECT coalesce(sum(attempts), 0) FROM rollup_hourly),
			(SELECT count(*) FROM rollup_hourly WHERE bucket < $1), (SELECT coalesce(sum(attempts), 0) FROM rollup_hourly_model),
			(SELECT coalesce(sum(attempts), 0) FROM rollup_daily),
			(SELECT coalesce(sum(calls), 0) FROM rollup_cache_daily WHERE prompt_hash = ''),
			(SELECT count(*) FROM cache_days_dirty)`, rollup.PruneCutoff(now)).Scan(&hourly, &old, &model, &daily, &days, &noted); err != nil {
			t.Fatal(err)
		}
		if hourly == 1 && old == 0 && model == 2 && daily == 2 && days == 2 && noted == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rollup_hourly counts %d attempts (%d rows before the cutoff), rollup_hourly_model %d, rollup_daily %d, "+
				"the cache days %d (%d days noted); want 1, 0, 2, 2, 2, 0", hourly, old, model, daily, days, noted)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
