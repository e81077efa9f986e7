// Package ingest turns validated attempt records into committed ledger rows. Its Writer coalesces
// concurrent submissions into large multi-row commits (group commit), skips records already stored,
// and keeps the rollups exact: each commit adds its rollup deltas to pending tables, and the
// writer folds them into the rollups (rollup.FoldChunk), in chunks of bounded size, a few times a
// second and whenever a read asks (Sync, which waits for it a bounded time).
//
// A commit takes one of two paths. The fast path COPYs the batch straight into attempts and, in the
// same transaction and round trip (copyCommit), COPYs the batch's rollup deltas, summed in Go
// (sums.go, from rollup.Sums and rollup.CacheSums), into the pending tables. It succeeds whenever
// every record is new, which is nearly always: duplicates within the batch are removed beforehand.
// When a record was already stored (a redelivery), the COPY fails on the identity index, the
// transaction is rolled back, and the batch takes the exact path: insertSQL, one statement that
// inserts from arrays skipping stored records and adds exactly the inserted rows' deltas in SQL.
package ingest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/ledgerd/ledgerd/internal/backoff"
	"github.com/ledgerd/ledgerd/internal/rollup"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/schema"
)

// Errors Submit returns; the HTTP layer answers all three with 503 and Retry-After.
var (
	// ErrOverloaded means the queue of records waiting to be written is full.
	ErrOverloaded = errors.New("ingest queue full")
	// ErrClosed means the writer is shutting down and takes no new records.
	ErrClosed = errors.New("writer closed")
	// ErrUnavailable means the database could not commit the records.
	ErrUnavailable = errors.New("database unavailable")
)

// DefaultFoldEvery is how often the folder folds while records come in. A read does not wait for
// it: Sync folds at once. Each fold rewrites every rollup row its records touch, however few
// records touch it, so under a steady load the folds cost more the more often they run. Folding
// every 500 ms instead of 250 took a fifth off the folds' time at 80,000 records a second;
// dashboard reads during that load, which fold what is pending first, took about 20 ms longer at
// the median (docs/performance.md).
const DefaultFoldEvery = 500 * time.Millisecond

// Costing is the price of one attempt as the writer stores it. Priced is false for a model the
// catalog has no price for; its cost is then stored as NULL, never as zero.
type Costing struct {
	Cost    money.Nanos
	NoCache money.Nanos
	Priced  bool
	Version store.PriceVersion
}

// PriceFunc prices one attempt. It must be safe for concurrent use.
type PriceFunc func(a *schema.Attempt) Costing

// Options tunes a Writer. Zero values take the defaults shown.
type Options struct {
	MaxBatch     int            // records per commit at most (5,000)
	QueueLimit   int            // records waiting at most before Submit refuses (50,000)
	Flushers     int            // commits running at once (2; a second starts only with MaxBatch/4 records or more)
	FlushTimeout time.Duration  // bound on one commit, its retries included (10 s)
	Timezone     *time.Location // local day of daily rollups (UTC)
	FoldEvery    time.Duration  // how often committed rollup deltas are folded into the rollups (DefaultFoldEvery)
	// FoldChunk bounds the pending rows of each table one fold transaction takes
	// (rollup.DefaultChunk): a backlog of any size drains in steps of about a second.
	FoldChunk int
	// ReadWait, when set, bounds how long Sync waits for the fold to catch up before a read: a
	// read then answers from the rollups as they are, and Behind says how far behind they are.
	// Zero waits for the fold, bounded only by the read's context.
	ReadWait time.Duration
	// PruneEvery, when set, is how often the folder prunes the hours rollup_hourly and the buckets
	// rollup_minute5 keep no longer (rollup.Prune), then sums again the cache days folds noted
	// (rollup.SummarizeCacheDays), the first time PruneEvery after the writer starts. Zero never
	// prunes, and leaves the cache report to read the noted days' hours.
	PruneEvery time.Duration
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// OnCommit, when set, is called after each successful commit with the records it newly
	// inserted (never a duplicate), before their submitters are answered. It runs on the flusher
	// goroutine, so it must be quick, and must not keep the slice.
	OnCommit func([]Committed)
}

// Committed is one record a commit newly inserted, as OnCommit receives it.
type Committed struct {
	ProjectID int64
	Attempt   *schema.Attempt
	Cost      Costing
}

// Result is the outcome of one submission: how many records were newly committed and how many were
// already in the ledger.
type Result struct {
	Accepted   int
	Duplicates int
	// Unpriced lists, by position in the records submitted, those the price function could not
	// price (a usage-unknown record is not among them: its model may well have a price).
	Unpriced []int
}

// Writer is the single path by which records reach the attempts table.
type Writer struct {
	st    *store.Store
	price PriceFunc
	opt   Options
	log   *slog.Logger
	m     metrics

	// committed counts the commits that left rollup deltas pending; folded is its value when the
	// last fold that reached the end of the pending tables began, and caughtUp when it began: every
	// record this writer committed before caughtUp is in the rollups. Only the folder goroutine
	// folds (and Close, once it has stopped); foldKick wakes it. Each time a fold ends, or the
	// folder skips one while another fold holds the lock, foldDone is closed and replaced (under
	// caughtMu), for Sync to wait on; gaveUp is when the last fold that did not reach the end
	// began (or was skipped). lastFold is when the last fold ended, busySince when one last gave
	// up on the fold lock.
	committed atomic.Uint64
	folded    atomic.Uint64
	caughtMu  sync.Mutex
	caughtUp  time.Time
	gaveUp    time.Time
	foldDone  chan struct{}
	foldKick  chan struct{}
	pending   atomic.Int64
	lastFold  time.Time
	busySince time.Time
	// chunk is the pending rows of each table the next fold transaction takes: FoldChunk, halved
	// after a chunk ran out of time and doubled back after each that did not, so a fold makes
	// progress however slow the database is.
	chunk      int
	lastVacuum time.Time
	// lastPrune is when the last prune began; pruning whether it has chunks left, pruned the rows
	// it deleted so far.
	lastPrune  time.Time
	pruning    bool
	pruned     int64
	foldCtx    context.Context
	stopFolds  context.CancelFunc
	folderDone chan struct{}

	mu         sync.Mutex
	queue      []*job
	queued     int
	committing int // commits taken and not yet ended
	closed     bool
	downUntil  time.Time
	kick       chan struct{}
	done       chan struct{}
	wg         sync.WaitGroup
}

type job struct {
	rows []row
	res  Result
	err  error
	done chan struct{}
}

type row struct {
	a       *schema.Attempt // in the submitter's slice
	series  store.SeriesKey
	cost    Costing
	key     identity
	newHere bool // set during a flush: inserted by this flush
}

type identity struct {
	project   int64
	attemptID string
	micros    int64
}

type metrics struct {
	accepted     prometheus.Counter
	duplicates   prometheus.Counter
	batchSize    prometheus.Histogram
	flushTime    prometheus.Histogram
	failures     prometheus.Counter
	exactFlushes prometheus.Counter
	queueDepth   prometheus.GaugeFunc
	foldTime     prometheus.Histogram
	foldFailures prometheus.Counter
	foldChunks   prometheus.Counter
}

// NewWriter starts a writer with its flushers running.
func NewWriter(st *store.Store, price PriceFunc, opt Options) *Writer {
	if opt.MaxBatch <= 0 {
		opt.MaxBatch = 5000
	}
	if opt.QueueLimit <= 0 {
		opt.QueueLimit = 50_000
	}
	if opt.Flushers <= 0 {
		opt.Flushers = 2
	}
	if opt.FlushTimeout <= 0 {
		opt.FlushTimeout = 10 * time.Second
	}
	if opt.Timezone == nil {
		opt.Timezone = time.UTC
	}
	if opt.FoldEvery <= 0 {
		opt.FoldEvery = DefaultFoldEvery
	}
	if opt.FoldChunk <= 0 {
		opt.FoldChunk = rollup.DefaultChunk
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Writer{st: st, price: price, opt: opt, log: opt.Logger,
		kick: make(chan struct{}, 1), done: make(chan struct{}), folderDone: make(chan struct{}),
		foldKick: make(chan struct{}, 1), caughtUp: time.Now(), foldDone: make(chan struct{}), chunk: opt.FoldChunk,
		lastPrune: time.Now()}
	w.foldCtx, w.stopFolds = context.WithCancel(context.Background())
	f := promauto.With(opt.Registerer)
	w.m = metrics{
		accepted:   f.NewCounter(prometheus.CounterOpts{Name: "ledgerd_ingest_records_accepted_total", Help: "Records newly committed to the ledger."}),
		duplicates: f.NewCounter(prometheus.CounterOpts{Name: "ledgerd_ingest_records_duplicate_total", Help: "Records skipped because the ledger already held them."}),
		batchSize: f.NewHistogram(prometheus.HistogramOpts{Name: "ledgerd_writer_batch_records", Help: "Records per group commit.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 8)}),
		flushTime: f.NewHistogram(prometheus.HistogramOpts{Name: "ledgerd_writer_flush_seconds", Help: "Time to commit one group of records.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		failures: f.NewCounter(prometheus.CounterOpts{Name: "ledgerd_writer_flush_failures_total", Help: "Group commits that failed."}),
		exactFlushes: f.NewCounter(prometheus.CounterOpts{Name: "ledgerd_writer_exact_flushes_total",
			Help: "Group commits that held a record already stored, so took the exact (slower) insert instead of COPY."}),
	}
	w.m.foldTime = f.NewHistogram(prometheus.HistogramOpts{Name: "ledgerd_rollup_fold_seconds",
		Help: "Time to fold one chunk of the pending rollup deltas into the rollups.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)})
	w.m.foldChunks = f.NewCounter(prometheus.CounterOpts{Name: "ledgerd_rollup_fold_chunks_total",
		Help: "Chunks of pending rollup deltas folded into the rollups (each at most FoldChunk rows of each pending table)."})
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "ledgerd_rollup_pending_rows",
		Help: "Rollup delta rows waiting to be folded, of every replica (PostgreSQL's estimate, read after each fold)."},
		func() float64 { return float64(w.pending.Load()) })
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "ledgerd_rollup_behind_seconds",
		Help: "How far the rollups lag behind this replica's commits: 0 when every committed record is folded."},
		func() float64 { return w.Behind().Seconds() })
	w.m.foldFailures = f.NewCounter(prometheus.CounterOpts{Name: "ledgerd_rollup_fold_failures_total",
		Help: "Folds of pending rollup deltas that failed or found another fold running too long; the deltas stay pending for the next."})
	w.m.queueDepth = f.NewGaugeFunc(prometheus.GaugeOpts{Name: "ledgerd_writer_queue_records", Help: "Records waiting to be committed."},
		func() float64 { w.mu.Lock(); defer w.mu.Unlock(); return float64(w.queued) })
	for range opt.Flushers {
		w.wg.Add(1)
		go w.loop()
	}
	go w.folder()
	return w
}

// Submit commits the records of one request for a project and returns once they are committed (or
// refused). The records must already be valid. It never waits past ctx.
//
// The writer uses recs in place, without copying them: Submit sets each start time to UTC at
// microsecond precision, as stored, and the writer reads the records until their commit ends, which
// can be after Submit has returned on ctx's end. The caller must not change them after the call.
func (w *Writer) Submit(ctx context.Context, projectID int64, recs []schema.Attempt) (Result, error) {
	j := &job{rows: make([]row, len(recs)), done: make(chan struct{})}
	for i := range recs {
		r := &j.rows[i]
		r.a = &recs[i]
		r.a.StartedAt = r.a.StartedAt.UTC().Truncate(time.Microsecond)
		r.series = store.SeriesKey{ProjectID: projectID, Tenant: r.a.Tenant, Service: r.a.Service,
			Operation: r.a.Operation, Provider: r.a.Provider, Model: r.a.Model, FallbackFrom: r.a.FallbackFrom}
		if !r.a.UsageUnknown { // unknown counts are not zero counts: such a record stays unpriced
			r.cost = w.price(r.a)
		}
		r.key = identity{projectID, r.a.AttemptID, r.a.StartedAt.UnixMicro()}
	}
	w.mu.Lock()
	switch {
	case w.closed:
		w.mu.Unlock()
		return Result{}, ErrClosed
	case time.Now().Before(w.downUntil):
		w.mu.Unlock()
		return Result{}, ErrUnavailable
	case w.queued > 0 && w.queued+len(recs) > w.opt.QueueLimit:
		w.mu.Unlock()
		return Result{}, ErrOverloaded
	}
	w.queue = append(w.queue, j)
	w.queued += len(recs)
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
	select {
	case <-j.done:
		if j.err != nil {
			return j.res, j.err
		}
		res := j.res
		for i := range j.rows {
			if !j.rows[i].cost.Priced && !j.rows[i].a.UsageUnknown {
				res.Unpriced = append(res.Unpriced, i)
			}
		}
		return res, nil
	case <-ctx.Done():
		return Result{}, fmt.Errorf("wait for commit: %w", ctx.Err())
	}
}

// Close stops taking records, commits everything already queued, stops the flushers, and folds
// what they committed into the rollups (deltas it cannot fold stay pending, for the next writer to
// fold). It returns early with ctx's error if that takes too long.
func (w *Writer) Close(ctx context.Context) error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.done)
	}
	w.mu.Unlock()
	finished := make(chan struct{})
	go func() { w.wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-ctx.Done():
		w.stopFolds()
		return fmt.Errorf("flush on close: %w", ctx.Err())
	}
	w.stopFolds()
	<-w.folderDone
	if w.folded.Load() < w.committed.Load() {
		if err := w.fold(ctx); err != nil {
			return fmt.Errorf("fold on close: %w", err)
		}
	}
	return nil
}

// Sync waits until the rollups count every record this writer committed before the call, or
// Options.ReadWait (when set) has passed, or ctx ends, whichever comes first. It wakes the folder
// rather than folding itself, so a read waits on a backlog no longer than ReadWait; a read after
// it answers from the rollups as they are, and Behind tells how far behind. It errs only with ctx.
func (w *Writer) Sync(ctx context.Context) error {
	asked, target := time.Now(), w.committed.Load()
	if w.folded.Load() >= target {
		return nil
	}
	select {
	case w.foldKick <- struct{}{}:
	default:
	}
	var bound <-chan time.Time
	if w.opt.ReadWait > 0 {
		timer := time.NewTimer(w.opt.ReadWait)
		defer timer.Stop()
		bound = timer.C
	}
	for {
		w.caughtMu.Lock()
		ch, gaveUp := w.foldDone, w.gaveUp
		w.caughtMu.Unlock()
		// A fold begun after the call that could not finish (the database is down, or a rebuild
		// holds the lock) answers it too: the read goes on with the rollups as they are.
		if w.folded.Load() >= target || gaveUp.After(asked) {
			return nil
		}
		select {
		case <-ch:
		case <-bound:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("wait for the rollups: %w", ctx.Err())
		}
	}
}

// Behind is how far the rollups lag behind this writer's commits: zero when every record it
// committed is folded, else the time since the last fold that reached the end of the pending
// tables began (every record committed before then is counted).
func (w *Writer) Behind() time.Duration {
	if w.folded.Load() >= w.committed.Load() {
		return 0
	}
	w.caughtMu.Lock()
	defer w.caughtMu.Unlock()
	return time.Since(w.caughtUp)
}

// folder folds every FoldEvery while there are new commits, at once when a read asks (Sync), and
// every 30 seconds regardless, for deltas a stopped replica left pending; for 5 seconds after a fold
// gave up on the lock, it waits. Every PruneEvery it prunes rollup_hourly, a chunk a tick.
func (w *Writer) folder() {
	defer close(w.folderDone)
	tick := time.NewTicker(w.opt.FoldEvery)
	defer tick.Stop()
	for {
		select {
		case <-w.foldCtx.Done():
			return
		case <-tick.C:
		case <-w.foldKick:
		}
		due := w.committed.Load() > w.folded.Load() || time.Since(w.lastFold) >= 30*time.Second
		switch {
		case !due:
		case time.Since(w.busySince) < 5*time.Second:
			w.ended(time.Now(), false)
		default:
			if err := w.fold(w.foldCtx); err != nil && w.foldCtx.Err() == nil {
				w.log.Error("fold rollups", "err", err)
			}
		}
		if w.opt.PruneEvery > 0 && (w.pruning || time.Since(w.lastPrune) >= w.opt.PruneEvery) {
			if !w.pruning {
				w.lastPrune = time.Now()
			}
			w.pruning = w.prune(w.foldCtx)
		}
	}
}

// prune removes one chunk of the hours rollup_hourly and the buckets rollup_minute5 keep no longer,
// or once none is left sums one chunk of the noted cache days, and tells whether more may be left:
// the folder prunes a chunk a tick, so that the first prune of a large ledger does not hold up its
// folds. Several replicas may prune at once: each chunk takes the fold lock.
func (w *Writer) prune(ctx context.Context) (more bool) {
	// step runs one chunk in a transaction of its own, and logs its failure as what.
	step := func(what string, fn func(context.Context, pgx.Tx) error) bool {
		if _, err := w.foldTx(ctx, fn); err != nil {
			if ctx.Err() == nil {
				w.log.Warn(what, "err", err)
			}
			return false
		}
		return true
	}
	var n int64
	if !step("prune rollups", func(ctx context.Context, tx pgx.Tx) (err error) {
		n, more, err = rollup.PruneChunk(ctx, tx, time.Now())
		return err
	}) {
		return false
	}
	if !more && !step("sum cache days", func(ctx context.Context, tx pgx.Tx) (err error) {
		_, more, err = rollup.SummarizeCacheDays(ctx, tx, time.Now())
		return err
	}) {
		return false
	}
	if w.pruned += n; !more && w.pruned > 0 {
		now := time.Now()
		w.log.Info("pruned rollups", "rows", w.pruned, "hours_before", rollup.PruneCutoff(now).Format(time.RFC3339),
			"minutes_before", rollup.MinutesCutoff(now).Format(time.RFC3339))
		w.pruned = 0
	}
	return more
}

// fold folds until it reaches the end of every pending table, one chunk per transaction, each
// bounded by FlushTimeout: a chunk that fails leaves its rows pending, and the chunks before it
// stay folded; one that ran out of time makes the next chunks smaller. Only the folder calls it, and Close once the folder has stopped.
func (w *Writer) fold(ctx context.Context) error {
	upTo, began := w.committed.Load(), time.Now()
	defer w.readPending(ctx)
	// failed ends a fold that did not reach the end: another fold held the lock (the deltas stay
	// pending, and the folder waits a little), or err.
	failed := func(err error) error {
		w.m.foldFailures.Inc()
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == lockNotAvailable {
			w.busySince = time.Now()
			w.ended(began, false)
			w.log.Warn("fold rollups: another fold (a rollup rebuild or reprice?) has held the lock for over a second; the deltas stay pending")
			return nil
		}
		w.ended(began, false)
		return fmt.Errorf("fold rollups: %w", err)
	}
	for cur := rollup.NewCursor(); !cur.Done(); {
		next, moved, err := w.foldChunk(ctx, cur)
		if err != nil {
			return failed(err)
		}
		cur = next
		if moved > 0 && time.Since(w.lastVacuum) >= time.Second {
			w.lastVacuum = time.Now()
			if _, err := w.st.Pool.Exec(ctx, rollup.VacuumPendingSQL); err != nil {
				w.log.Warn("vacuum pending rollups", "err", err)
			}
		}
	}
	if err := w.raisePeaks(ctx); err != nil {
		return failed(err)
	}
	w.folded.Store(upTo)
	w.ended(began, true)
	return nil
}

// ended records the end of a fold begun at began, which reached the end of the pending tables or
// not (failed, or skipped while another fold holds the lock), and wakes the Syncs waiting.
func (w *Writer) ended(began time.Time, caughtUp bool) {
	w.caughtMu.Lock()
	defer w.caughtMu.Unlock()
	if caughtUp {
		w.caughtUp = began
	} else {
		w.gaveUp = began
	}
	close(w.foldDone)
	w.foldDone = make(chan struct{})
}

// minChunk is the fewest pending rows of each table a fold transaction takes.
const minChunk = 100

// foldChunk folds one chunk from cur in a transaction of its own.
func (w *Writer) foldChunk(ctx context.Context, cur rollup.Cursor) (rollup.Cursor, int64, error) {
	start := time.Now()
	var (
		next  rollup.Cursor
		moved int64
	)
	timedOut, err := w.foldTx(ctx, func(ctx context.Context, tx pgx.Tx) (err error) {
		next, moved, err = rollup.FoldChunk(ctx, tx, cur, w.chunk)
		return err
	})
	switch {
	case timedOut:
		w.chunk = max(w.chunk/2, minChunk)
	case err == nil:
		w.chunk = min(w.chunk*2, w.opt.FoldChunk)
	}
	w.m.foldTime.Observe(time.Since(start).Seconds())
	w.lastFold = time.Now()
	if err != nil {
		return cur, 0, err
	}
	w.m.foldChunks.Inc()
	return next, moved, nil
}

// foldTx runs fn in a transaction of its own bounded by FlushTimeout, giving up on a lock held for
// over a second (another fold, a reprice or a rebuild): the shape of every step the folder takes
// under the fold lock. timedOut says whether it ran out of time.
func (w *Writer) foldTx(ctx context.Context, fn func(context.Context, pgx.Tx) error) (timedOut bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, w.opt.FlushTimeout)
	defer cancel()
	err = pgx.BeginFunc(ctx, w.st.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '1s'`); err != nil {
			return err
		}
		return fn(ctx, tx)
	})
	return errors.Is(ctx.Err(), context.DeadlineExceeded), err
}

// raisePeaks raises the load peaks at the minutes the fold's chunks touched, once they are all
// folded, a bounded number of minutes a transaction (rollup.RaisePeaks).
func (w *Writer) raisePeaks(ctx context.Context) error {
	for more := true; more; {
		if _, err := w.foldTx(ctx, func(ctx context.Context, tx pgx.Tx) (err error) {
			_, more, err = rollup.RaisePeaks(ctx, tx)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// readPending reads the pending tables' depth for /metrics.
func (w *Writer) readPending(ctx context.Context) {
	var n int64
	if err := w.st.Pool.QueryRow(ctx, rollup.PendingRowsSQL).Scan(&n); err != nil {
		if ctx.Err() == nil {
			w.log.Warn("count pending rollup rows", "err", err)
		}
		return
	}
	w.pending.Store(n)
}

// take removes up to MaxBatch records' worth of whole jobs from the queue, and counts the commit
// they make as running. A commit starts beside a running one only with at least MaxBatch/4 records
// queued (two requests of 1,000 records at the default MaxBatch): fewer wait for the running commit
// to end and go into the next one, which is larger. Each commit, and each COPY statement in it,
// has a fixed cost, so fewer, larger commits cost PostgreSQL less per record, while large requests
// still get a second commit to overlap with. BenchmarkIngestVsCopy measures the threshold; its
// figures are in docs/performance.md.
func (w *Writer) take() []*job {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.committing > 0 && w.queued < w.opt.MaxBatch/4 {
		return nil
	}
	n, i := 0, 0
	for i < len(w.queue) && (i == 0 || n+len(w.queue[i].rows) <= w.opt.MaxBatch) {
		n += len(w.queue[i].rows)
		i++
	}
	jobs := w.queue[:i:i]
	w.queue = w.queue[i:]
	w.queued -= n
	if len(jobs) > 0 {
		w.committing++
	}
	return jobs
}

func (w *Writer) loop() {
	defer w.wg.Done()
	for {
		jobs := w.take()
		if len(jobs) == 0 {
			select {
			case <-w.kick:
				continue
			case <-w.done:
				if jobs = w.take(); len(jobs) == 0 {
					return
				}
			}
		}
		w.commit(jobs)
		w.mu.Lock()
		w.committing--
		w.mu.Unlock()
		// Let another flusher (or the next loop turn) see what arrived meanwhile.
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// commitTries bounds the tries of one commit. commitBackoff spaces the retries after a deadlock or
// a serialization failure, which clear once the other transaction has ended.
const commitTries = 3

var commitBackoff = backoff.Exponential{Min: 20 * time.Millisecond, Max: 100 * time.Millisecond}

// commit writes the jobs in one transaction, retrying deadlocks, serialization failures and a
// partition dropped under it within FlushTimeout, and reports to each job.
func (w *Writer) commit(jobs []*job) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), w.opt.FlushTimeout)
	defer cancel()
	var err error
	for try := 1; try <= commitTries; try++ {
		err = w.flush(ctx, jobs)
		if store.IsNoPartition(err) {
			// A month this writer knew was dropped since (retention, by another process): the
			// next try makes its partition again.
			w.st.ForgetPartitions()
			continue
		}
		if err == nil || !retryable(err) || try == commitTries {
			break
		}
		if backoff.Sleep(ctx, commitBackoff.Wait(try)) != nil {
			break // out of time: the commit fails with the last error
		}
	}
	w.m.flushTime.Observe(time.Since(start).Seconds())
	if err == nil {
		w.committed.Add(1)
	}
	if err != nil {
		w.m.failures.Inc()
		w.log.Error("commit records", "records", records(jobs), "err", err)
		if store.IsUnavailable(err) {
			w.mu.Lock()
			w.downUntil = time.Now().Add(time.Second)
			w.mu.Unlock()
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	if err == nil && w.opt.OnCommit != nil {
		done := make([]Committed, 0, records(jobs))
		for _, j := range jobs {
			for i := range j.rows {
				if r := &j.rows[i]; r.newHere {
					done = append(done, Committed{ProjectID: r.key.project, Attempt: r.a, Cost: r.cost})
				}
			}
		}
		w.opt.OnCommit(done)
	}
	for _, j := range jobs {
		j.err = err
		if err == nil {
			for i := range j.rows {
				if j.rows[i].newHere {
					j.res.Accepted++
				} else {
					j.res.Duplicates++
				}
			}
			w.m.accepted.Add(float64(j.res.Accepted))
			w.m.duplicates.Add(float64(j.res.Duplicates))
		}
		close(j.done)
	}
}

// records counts the records of jobs.
func records(jobs []*job) int {
	n := 0
	for _, j := range jobs {
		n += len(j.rows)
	}
	return n
}

func retryable(err error) bool {
	var pgErr interface{ SQLState() string }
	if errors.As(err, &pgErr) {
		s := pgErr.SQLState()
		return s == "40P01" || s == "40001"
	}
	return false
}

// flush inserts the first occurrence of every record in jobs, by the fast path or, when one was
// already stored, the exact one, and marks which ones were new.
func (w *Writer) flush(ctx context.Context, jobs []*job) error {
	rows := make([]*row, 0, records(jobs))
	for _, j := range jobs {
		for i := range j.rows {
			r := &j.rows[i]
			r.newHere = false
			rows = append(rows, r)
		}
	}
	// Records go in identity order, so two commits holding the same redelivered records wait for
	// each other on the identity index in one order, instead of deadlocking. The sort is stable and
	// Compact keeps the first of equal identities: a record sent twice is stored as first sent.
	slices.SortStableFunc(rows, func(a, b *row) int {
		return cmp.Or(cmp.Compare(a.key.project, b.key.project), strings.Compare(a.key.attemptID, b.key.attemptID),
			cmp.Compare(a.key.micros, b.key.micros))
	})
	rows = slices.CompactFunc(rows, func(a, b *row) bool { return a.key == b.key })
	times := make([]time.Time, len(rows))
	keys := make([]store.SeriesKey, len(rows))
	var prices []store.PriceVersion
	for i, r := range rows {
		times[i], keys[i] = r.a.StartedAt, r.series
		if r.cost.Priced {
			prices = append(prices, r.cost.Version)
		}
	}
	w.m.batchSize.Observe(float64(len(rows)))
	// The ids below must come from the server the batch commits on (store.SameServer).
	epoch := w.st.Epoch()
	if err := w.st.EnsurePartitions(ctx, times...); err != nil {
		return err
	}
	seriesIDs, err := w.st.SeriesIDs(ctx, keys)
	if err != nil {
		return err
	}
	priceIDs, err := w.st.PriceIDs(ctx, prices)
	if err != nil {
		return err
	}
	b, err := columns(rows, seriesIDs, priceIDs)
	if err != nil {
		return err
	}
	stored, err := w.insertFast(ctx, b, epoch)
	if err != nil {
		return err
	}
	if stored {
		for _, r := range rows {
			r.newHere = true
		}
		return nil
	}
	w.m.exactFlushes.Inc()
	return w.insertExact(ctx, b, rows, epoch)
}

// insertFast COPYs a batch into attempts, and its rollups summed in Go into the pending tables, in
// one transaction and one round trip (copyCommit). It reports false, having written nothing, when a
// record is already stored: COPY then fails on the identity index, and the batch must take the
// exact path. Like insertExact, it commits nothing when the pool moved to another server since
// epoch, when the batch's ids were looked up.
func (w *Writer) insertFast(ctx context.Context, b *batch, epoch uint64) (stored bool, err error) {
	days := localDays(b, w.opt.Timezone)
	hourly, cache := rollupGroups(b, days)
	sqls := []string{copySQL, pendingRollupCopySQL}
	if len(cache.keys) > 0 {
		sqls = append(sqls, pendingCacheCopySQL)
	}
	sqls = append(sqls, pendingLoadCopySQL)
	buf := commitBufs.Get().(*[]byte)
	msg := hourly.appendCopy(b.appendCopy(commitQuery((*buf)[:0], sqls...)), true)
	if len(cache.keys) > 0 {
		msg = cache.appendCopy(msg, false)
	}
	msg = loadOf(b, days).appendCopy(msg)
	defer putCommitBuf(buf, msg)
	conn, err := w.st.Pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("acquire connection: %w", err)
	}
	// Release closes a connection it gets back inside a transaction.
	defer conn.Release()
	if err := w.st.SameServer(epoch); err != nil {
		return false, err
	}
	if err := copyCommit(ctx, conn.Conn().PgConn(), msg); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == uniqueViolation {
			return false, nil
		}
		return false, fmt.Errorf("copy attempts and pending rollups: %w", err)
	}
	return true, nil
}

// insertExact inserts a batch with insertSQL, which skips records already stored and counts only
// the inserted ones into the rollups, and marks the rows it inserted.
func (w *Writer) insertExact(ctx context.Context, b *batch, rows []*row, epoch uint64) error {
	first := make(map[identity]*row, len(rows))
	for _, r := range rows {
		first[r.key] = r
	}
	conn, err := w.st.Pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Release()
	if err := w.st.SameServer(epoch); err != nil {
		return err
	}
	res, err := conn.Query(ctx, insertSQL, append(b.arrays(), w.opt.Timezone.String())...)
	if err != nil {
		return fmt.Errorf("insert attempts: %w", err)
	}
	var k identity
	var at time.Time
	_, err = pgx.ForEachRow(res, []any{&k.project, &k.attemptID, &at}, func() error {
		k.micros = at.UnixMicro()
		if r, ok := first[k]; ok {
			r.newHere = true
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("insert attempts: %w", err)
	}
	return nil
}

// batch holds the rows of one flush as typed columns, in attemptCols order: the slow path sends
// them as unnest arrays, the fast path COPYs them (copy.go), and the Go rollups sum them, so all
// three read the very values stored.
type batch struct {
	n                                      int
	project, series                        []int64
	started                                []time.Time
	attemptNo, latency                     []int32
	status, class                          []string
	fallback, batch, usageUnknown          []bool
	httpStatus                             []*int16
	retryAfter, priceID                    []*int32
	input, output, cw, cw1h, cr, reasoning []int64
	cost, nocache, clientCost              []*int64
	attemptID, requestID                   []string
	promptHash, providerReq, metadata      []*string
	org                                    []*string
	limits                                 []*schema.RateLimits
	key                                    []*store.SeriesKey // the load rollup's provider, model and service
}

// columns turns rows into a batch; seriesIDs[i] is the series of rows[i]. The batch's optional
// values point into rows and into one backing array per type, not into an allocation each.
func columns(rows []*row, seriesIDs []int64, priceIDs map[string]int32) (*batch, error) {
	n := len(rows)
	int64s, int32s, int16s := make([]int64, 3*n), make([]int32, 2*n), make([]int16, n)
	b := &batch{n: n,
		project: make([]int64, n), series: make([]int64, n),
		started:   make([]time.Time, n),
		attemptNo: make([]int32, n), latency: make([]int32, n),
		status: make([]string, n), class: make([]string, n),
		fallback: make([]bool, n), batch: make([]bool, n), usageUnknown: make([]bool, n),
		httpStatus: make([]*int16, n),
		retryAfter: make([]*int32, n), priceID: make([]*int32, n),
		input: make([]int64, n), output: make([]int64, n), cw: make([]int64, n), cw1h: make([]int64, n),
		cr: make([]int64, n), reasoning: make([]int64, n),
		cost: make([]*int64, n), nocache: make([]*int64, n), clientCost: make([]*int64, n),
		attemptID: make([]string, n), requestID: make([]string, n),
		promptHash: make([]*string, n), providerReq: make([]*string, n), metadata: make([]*string, n),
		org: make([]*string, n), limits: make([]*schema.RateLimits, n), key: seriesKeys(rows),
	}
	for i, r := range rows {
		a := r.a
		b.project[i] = r.key.project
		b.series[i] = seriesIDs[i]
		b.started[i] = a.StartedAt
		b.attemptNo[i] = int32(a.AttemptNo)
		b.latency[i] = int32(a.LatencyMS)
		b.status[i] = string(a.Status)
		b.class[i] = string(a.ErrorClass)
		if a.ErrorClass == "" {
			b.class[i] = string(schema.ErrorNone)
		}
		b.fallback[i], b.batch[i], b.usageUnknown[i] = a.Fallback, a.Batch, a.UsageUnknown
		if a.HTTPStatus != 0 {
			int16s[i] = int16(a.HTTPStatus)
			b.httpStatus[i] = &int16s[i]
		}
		if a.RetryAfterMS != 0 {
			int32s[2*i] = int32(a.RetryAfterMS)
			b.retryAfter[i] = &int32s[2*i]
		}
		b.input[i], b.output[i], b.cw[i], b.cw1h[i], b.cr[i], b.reasoning[i] = a.InputTokens, a.OutputTokens,
			a.CacheWriteTokens, a.CacheWrite1hTokens, a.CacheReadTokens, a.ReasoningTokens
		if r.cost.Priced {
			int64s[3*i], int64s[3*i+1], int32s[2*i+1] = int64(r.cost.Cost), int64(r.cost.NoCache), priceIDs[r.cost.Version.Key]
			b.cost[i], b.nocache[i], b.priceID[i] = &int64s[3*i], &int64s[3*i+1], &int32s[2*i+1]
		}
		if a.CostUSD != nil {
			int64s[3*i+2] = int64(*a.CostUSD)
			b.clientCost[i] = &int64s[3*i+2]
		}
		b.attemptID[i], b.requestID[i] = a.AttemptID, a.RequestID
		b.promptHash[i] = optional(&a.PromptHash)
		b.providerReq[i] = optional(&a.ProviderRequestID)
		b.org[i], b.limits[i] = optional(&a.Org), a.RateLimits
		if len(a.Metadata) > 0 {
			raw, err := json.Marshal(a.Metadata)
			if err != nil {
				return nil, fmt.Errorf("encode metadata: %w", err)
			}
			s := string(raw)
			b.metadata[i] = &s
		}
	}
	return b, nil
}

// arrays returns the columns as the arrays insertSQL unnests.
func (b *batch) arrays() []any {
	return append([]any{b.project, b.started, b.series, b.attemptNo, b.latency, b.status, b.class, b.fallback,
		b.batch, b.httpStatus, b.retryAfter, b.priceID, b.input, b.output, b.cw, b.cw1h, b.cr, b.reasoning,
		b.cost, b.nocache, b.clientCost, b.attemptID, b.requestID, b.promptHash, b.providerReq, b.metadata},
		append(b.limitArrays(), b.usageUnknown)...)
}

// optional is s, or nil (a NULL) when it is empty.
func optional(s *string) *string {
	if *s == "" {
		return nil
	}
	return s
}
