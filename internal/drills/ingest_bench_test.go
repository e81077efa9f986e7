package drills

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/procfs"
	"golang.org/x/sync/errgroup"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/app"
	"github.com/ledgerd/ledgerd/internal/apptest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/load"
	"github.com/ledgerd/ledgerd/internal/rollup"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/internal/synth"
	"github.com/ledgerd/ledgerd/schema"
)

// benchRecords is the size of the ledger each benchmark iteration writes both ways
// (LEDGERD_BENCH_RECORDS overrides it).
func benchRecords(b *testing.B) int {
	if s := os.Getenv("LEDGERD_BENCH_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			b.Fatalf("LEDGERD_BENCH_RECORDS=%q: want a positive number", s)
		}
		return n
	}
	return 100_000
}

// BenchmarkIngestVsCopy writes the same synthetic ledger twice, each into a fresh database: through
// ledgerd's HTTP API in requests of 1,000 records into the real group-commit writer (which also
// keeps the rollups), and with a raw COPY of equivalent rows into attempts (no rollups). It reports
// records/s for both and their ratio (COPY timed before and after the HTTP run, and averaged); the
// target is http/copy >= 0.70. http/copy counts until the
// last record is acknowledged (committed); folded/copy until a read after it has folded every
// rollup delta into the rollups, so deferring that work cannot flatter the figure. "live" records
// started in the last 15 minutes, in no order (late reports: every commit holds calls of every 5
// minutes of the 15); "stream" holds the same records in the order they started, as services that
// report as they go send them (a commit spans seconds); "week" spreads them over 7 days (a
// backfill), which touches far more rollup rows, in no order (a commit holds calls of every hour
// of the week); "replay" is the week in the order the calls started, as a backfill replayed from
// logs or another store sends it (a commit spans hours, not the whole week).
//
// A third COPY, in commits of as many rows as the HTTP run's commits held on average, two at a
// time like the writer's flushers, shows how much of the gap committing in groups alone costs
// (commits/copy). commit_s/copy_s and fold_s/copy_s are the writer's own seconds in commits and in
// folds against the COPY's: where a change of http/copy comes from. With -benchtime Nx each figure
// is the median of N runs.
func BenchmarkIngestVsCopy(b *testing.B) {
	for _, shape := range []struct {
		name    string
		span    time.Duration
		ordered bool
	}{{"live", 15 * time.Minute, false}, {"stream", 15 * time.Minute, true}, {"week", 7 * 24 * time.Hour, false},
		{"replay", 7 * 24 * time.Hour, true}} {
		b.Run(shape.name, func(b *testing.B) { ingestVsCopy(b, shape.span, shape.ordered) })
	}
}

func ingestVsCopy(b *testing.B, span time.Duration, ordered bool) {
	const perRequest, posters = 1000, 4
	// As the ledgerd command runs; the COPY baseline's garbage is collected alike.
	defer debug.SetGCPercent(debug.SetGCPercent(app.GCPercent))
	n := benchRecords(b)
	price, err := prices()
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	// records makes the same n records on every call. They are made again for the COPY rather
	// than kept: held during the HTTP run, their pointers would add to every garbage collection
	// of the ledgerd in this process, as they would not in ledgerd's own.
	records := func() []schema.Attempt {
		g := synth.New(synth.Options{Seed: 31, Start: now.Add(-span), End: now})
		recs := make([]schema.Attempt, 0, n+64)
		for len(recs) < n {
			recs = append(recs, g.Next()...)
		}
		recs = recs[:n]
		if ordered {
			slices.SortStableFunc(recs, func(x, y schema.Attempt) int { return x.StartedAt.Compare(y.StartedAt) })
		}
		return recs
	}
	recs := records()
	var bodies [][]byte
	for i := 0; i < n; i += perRequest {
		body, err := json.Marshal(recs[i:min(i+perRequest, n)])
		if err != nil {
			b.Fatal(err)
		}
		bodies = append(bodies, body)
	}
	recs = nil
	runtime.GC()
	metrics := map[string][]float64{}
	for b.Loop() {
		// The COPY baseline runs before and after the HTTP run, and counts as their mean: on a
		// shared machine one COPY alone moved by half from run to run.
		before, cpuBefore := ingestCopy(b, records(), price, 0)
		runtime.GC()
		cpu0 := busyCPU(b)
		acked, folded, perCommit, spent := ingestHTTP(b, bodies, posters, n)
		cpu1 := busyCPU(b)
		commits, _ := ingestCopy(b, records(), price, perCommit)
		after, cpuAfter := ingestCopy(b, records(), price, 0)
		httpRate, foldedRate := float64(n)/acked.Seconds(), float64(n)/folded.Seconds()
		copySeconds := (before + after).Seconds() / 2
		copyRate := float64(n) / copySeconds
		for name, v := range map[string]float64{
			"http_records/s": httpRate,
			"copy_records/s": copyRate,
			// How far the two COPYs differed, over their mean: the noise a ratio from this run carries.
			"copy_spread": math.Abs((before - after).Seconds()) / ((before + after).Seconds() / 2),
			"http/copy":   httpRate / copyRate,
			"folded/copy": foldedRate / copyRate,
			// The machine's CPU (all processes: ledgerd, its clients, PostgreSQL) per record, HTTP
			// over COPY: steadier than the rates where other guests share the host, and what bounds
			// the rate once the cores are busy.
			"cpu_http/copy":  (cpu1 - cpu0) / ((cpuBefore + cpuAfter) / 2),
			"commit_records": float64(perCommit),
			// The writer's seconds in commits and in folds over the COPY's seconds for as many records.
			"commit_s/copy_s": spent.commits / copySeconds,
			"fold_s/copy_s":   spent.folds / copySeconds,
			"commits/copy":    float64(n) / commits.Seconds() / copyRate,
			"http/commits":    httpRate / (float64(n) / commits.Seconds()),
		} {
			metrics[name] = append(metrics[name], v)
		}
	}
	for name, vs := range metrics {
		b.ReportMetric(median(vs), name)
	}
}

// median is the middle of vs (the mean of the two middle values when there are an even number).
func median(vs []float64) float64 {
	s := slices.Sorted(slices.Values(vs))
	return (s[(len(s)-1)/2] + s[len(s)/2]) / 2
}

// benchApp starts ledgerd in this process on a fresh database with a project's API key.
func benchApp(b *testing.B) (base, key string, stop func()) {
	b.Helper()
	dbURL := dbtest.NewURL(b)
	st := store.New(connect(b, dbURL))
	// The 5-minute rollup holds its last day, as a running writer's prune leaves it, rather than
	// only what came after the database was made: every live record is counted into it.
	if err := st.SetSetting(context.Background(), "minutes_from", rollup.MinutesCutoff(time.Now()).Format(time.RFC3339)); err != nil {
		b.Fatal(err)
	}
	key, err := st.CreateKey(context.Background(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	base, stop = apptest.Run(b, app.Options{DatabaseURL: dbURL})
	return base, key, stop
}

// ingestHTTP starts ledgerd in this process on a fresh database, posts the bodies from several
// clients, and returns the time from the first post to the last acknowledgement, and to the end of
// a read after it (which folds the rollup deltas still pending), the mean records a commit, and the
// writer's time in commits and folds.
func ingestHTTP(b *testing.B, bodies [][]byte, posters, records int) (acked, folded time.Duration, perCommit int, spent writerTime) {
	b.Helper()
	base, key, stop := benchApp(b)
	defer stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: posters}}
	defer client.CloseIdleConnections()
	next := make(chan []byte, len(bodies))
	for _, body := range bodies {
		next <- body
	}
	close(next)
	var posting sync.WaitGroup
	var mu sync.Mutex
	accepted := 0
	checkpoint(b)
	start := time.Now()
	for range posters {
		posting.Add(1)
		go func() {
			defer posting.Done()
			for body := range next {
				for {
					req, _ := http.NewRequest(http.MethodPost, base+"/v1/attempts", bytes.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+key)
					resp, err := client.Do(req)
					if err != nil {
						b.Errorf("post: %v", err)
						return
					}
					var ir schema.IngestResponse
					derr := json.NewDecoder(resp.Body).Decode(&ir)
					resp.Body.Close()
					if resp.StatusCode == http.StatusServiceUnavailable {
						time.Sleep(100 * time.Millisecond)
						continue
					}
					if resp.StatusCode != http.StatusOK || derr != nil {
						b.Errorf("post: status %d: %v", resp.StatusCode, derr)
						return
					}
					mu.Lock()
					accepted += ir.Accepted
					mu.Unlock()
					break
				}
			}
		}()
	}
	posting.Wait()
	acked = time.Since(start)
	if accepted != records {
		b.Fatalf("ledgerd accepted %d of %d records", accepted, records)
	}
	resp, err := client.Get(base + "/metrics")
	if err != nil {
		b.Fatalf("read after ingest: %v", err)
	}
	resp.Body.Close()
	folded = time.Since(start)
	m := metrics(base)
	sum, count := m["ledgerd_writer_batch_records_sum"], m["ledgerd_writer_batch_records_count"]
	if count == 0 {
		b.Fatal("read the writer's commits from /metrics: no commits")
	}
	spent = writerTime{commits: m["ledgerd_writer_flush_seconds_sum"], folds: m["ledgerd_rollup_fold_seconds_sum"]}
	return acked, folded, int(math.Round(sum / count)), spent
}

// writerTime is the seconds the writer spent in its commits (summed over its flushers) and in
// folding chunks of rollup deltas, as its /metrics histograms count them: against the COPY's time
// they say whether a change in http/copy comes from the commits or from the folds.
type writerTime struct{ commits, folds float64 }

// ingestCopy prepares rows equivalent to the writer's (series and price ids resolved, costs
// computed, partitions created) in a fresh database outside the timing, then times a COPY of all
// of them into attempts, and returns its time and the machine's busy CPU seconds meanwhile. With
// perCommit 0 it is one COPY; otherwise a COPY of perCommit rows a transaction, two at a time.
func ingestCopy(b *testing.B, recs []schema.Attempt, price ingest.PriceFunc, perCommit int) (time.Duration, float64) {
	b.Helper()
	ctx := context.Background()
	pool := connect(b, dbtest.NewURL(b))
	st := store.New(pool)
	p, err := st.EnsureProject(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]store.SeriesKey, len(recs))
	times := make([]time.Time, len(recs))
	costs := make([]ingest.Costing, len(recs))
	var versions []store.PriceVersion
	for i := range recs {
		a := &recs[i]
		if a.Operation == "" {
			a.Operation = schema.DefaultOperation
		}
		keys[i] = store.SeriesKey{ProjectID: p.ID, Tenant: a.Tenant, Service: a.Service, Operation: a.Operation,
			Provider: a.Provider, Model: a.Model, FallbackFrom: a.FallbackFrom}
		times[i] = a.StartedAt.UTC().Truncate(time.Microsecond)
		costs[i] = price(a)
		if costs[i].Priced {
			versions = append(versions, costs[i].Version)
		}
	}
	if err := st.EnsurePartitions(ctx, times...); err != nil {
		b.Fatal(err)
	}
	series, err := st.SeriesIDs(ctx, keys)
	if err != nil {
		b.Fatal(err)
	}
	priceIDs, err := st.PriceIDs(ctx, versions)
	if err != nil {
		b.Fatal(err)
	}
	rows := make([][]any, len(recs))
	for i := range recs {
		rows[i] = copyRow(p.ID, &recs[i], times[i], series[i], costs[i], priceIDs)
	}
	runtime.GC() // the garbage of making rows collected outside the timing, as before the HTTP run
	checkpoint(b)
	cpu0 := busyCPU(b)
	start := time.Now()
	copied, streams := atomic.Int64{}, 1
	if perCommit == 0 {
		perCommit = len(rows)
	} else {
		streams = 2 // as the writer's two flushers
	}
	chunks := make(chan [][]any, len(rows)/perCommit+1)
	for i := 0; i < len(rows); i += perCommit {
		chunks <- rows[i:min(i+perCommit, len(rows))]
	}
	close(chunks)
	g, gctx := errgroup.WithContext(ctx)
	for range streams {
		g.Go(func() error {
			for chunk := range chunks {
				n, err := pool.CopyFrom(gctx, pgx.Identifier{"attempts"}, copyColumns, pgx.CopyFromRows(chunk))
				if err != nil {
					return err
				}
				copied.Add(n)
			}
			return nil
		})
	}
	err = g.Wait()
	took := time.Since(start)
	cpu := busyCPU(b) - cpu0
	if err != nil {
		b.Fatal(err)
	}
	if int(copied.Load()) != len(recs) {
		b.Fatalf("copied %d of %d rows", copied.Load(), len(recs))
	}
	return took, cpu
}

// checkpoint makes PostgreSQL write every dirty buffer out now (CHECKPOINT), so that a timed run
// starts as the others do and no checkpoint falls inside it. On the shared test server (128 MB of
// shared buffers, max_wal_size 1 GB) a run of 300,000 records wrote 150 MB of WAL, and a checkpoint
// that WAL had made due landed in one run and not in the others.
func checkpoint(b *testing.B) {
	b.Helper()
	conn, err := pgx.Connect(context.Background(), dbtest.BaseURL())
	if err != nil {
		b.Fatalf("checkpoint: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "CHECKPOINT"); err != nil {
		b.Fatalf("checkpoint (the benchmark needs a superuser or the pg_checkpoint role): %v", err)
	}
}

// busyCPU returns the seconds all the machine's CPUs have spent busy (user, nice, system, irq and
// softirq in /proc/stat; not idle, iowait or stolen by other guests) since boot.
func busyCPU(b *testing.B) float64 {
	b.Helper()
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		b.Fatalf("read CPU time: %v", err)
	}
	st, err := fs.Stat()
	if err != nil {
		b.Fatalf("read CPU time: %v", err)
	}
	c := st.CPUTotal
	return c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ
}

// copyColumns are the attempts columns the writer fills.
var copyColumns = []string{"project_id", "started_at", "series_id", "attempt_no", "latency_ms", "status",
	"error_class", "fallback", "batch", "http_status", "retry_after_ms", "price_id", "input_tokens",
	"output_tokens", "cache_write_tokens", "cache_write_1h_tokens", "cache_read_tokens", "reasoning_tokens",
	"cost_nanos", "nocache_cost_nanos", "client_cost_nanos", "attempt_id", "request_id", "prompt_hash",
	"provider_request_id", "metadata"}

// copyRow is one attempts row as the writer would store it.
func copyRow(project int64, a *schema.Attempt, at time.Time, series int64, c ingest.Costing, priceIDs map[string]int32) []any {
	class := string(a.ErrorClass)
	if class == "" {
		class = string(schema.ErrorNone)
	}
	opt := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	var httpStatus, retryAfter, priceID, cost, nocache, clientCost, metadata any
	if a.HTTPStatus != 0 {
		httpStatus = int16(a.HTTPStatus)
	}
	if a.RetryAfterMS != 0 {
		retryAfter = int32(a.RetryAfterMS)
	}
	if c.Priced {
		priceID, cost, nocache = priceIDs[c.Version.Key], int64(c.Cost), int64(c.NoCache)
	}
	if a.CostUSD != nil {
		clientCost = int64(*a.CostUSD)
	}
	if len(a.Metadata) > 0 {
		raw, _ := json.Marshal(a.Metadata)
		metadata = string(raw)
	}
	return []any{project, at, series, int32(a.AttemptNo), int32(a.LatencyMS), string(a.Status), class,
		a.Fallback, a.Batch, httpStatus, retryAfter, priceID, a.InputTokens, a.OutputTokens,
		a.CacheWriteTokens, a.CacheWrite1hTokens, a.CacheReadTokens, a.ReasoningTokens, cost, nocache,
		clientCost, a.AttemptID, a.RequestID, opt(a.PromptHash), opt(a.ProviderRequestID), metadata}
}

// BenchmarkIngestSingle posts one record per request from 64 clients, as fast as ledgerd
// acknowledges, to a ledgerd in this process (so -cpuprofile sees the server), and reports
// committed records/s and the acknowledgement latency. Its clients are Go net/http clients in the
// same process, which take about as much CPU per request as the server; scripts/ingest-load.sh
// measures the same against the ledgerd binary with wrk, which takes less than half of that.
func BenchmarkIngestSingle(b *testing.B) {
	const clients = 64
	defer debug.SetGCPercent(debug.SetGCPercent(app.GCPercent)) // as the ledgerd command runs
	duration := 10 * time.Second
	if s := os.Getenv("LEDGERD_BENCH_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("LEDGERD_BENCH_DURATION=%q: %v", s, err)
		}
		duration = d
	}
	var s load.Summary
	for b.Loop() {
		b.StopTimer()
		base, key, stop := benchApp(b)
		b.StartTimer()
		var err error
		s, err = load.Run(context.Background(), load.Options{URL: base, Key: key, Batch: 1, Concurrency: clients,
			Duration: duration, Source: load.Live(synth.New(synth.Options{Seed: 41}))})
		b.StopTimer()
		stop()
		if err != nil {
			b.Fatal(err)
		}
		if s.Failed+s.Rejected > 0 {
			b.Fatalf("%d records failed, %d rejected", s.Failed, s.Rejected)
		}
		b.StartTimer()
	}
	b.ReportMetric(s.AckRate(), "records/s")
	b.ReportMetric(float64(s.Ack.P50.Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(s.Ack.P99.Microseconds())/1000, "p99_ms")
}
