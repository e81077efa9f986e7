package analytics_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime/debug"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/app"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/rollup"
	"github.com/ledgerd/ledgerd/internal/seed"
	"github.com/ledgerd/ledgerd/internal/server"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/pricing"
)

var (
	benchRecords = flag.Int("records", 200_000, "synthetic attempts BenchmarkEndpoints loads")
	rawSamples   = flag.Int("raw-samples", 5, "timed runs of each raw GROUP BY in BenchmarkEndpoints (0: the rollups alone)")
	benchDB      = flag.String("bench-db", "", "URL of a database BenchmarkEndpoints loads once and keeps, "+
		"reusing it when it already holds -records attempts (default: a scratch database)")
)

// BenchmarkEndpoints loads -records synthetic attempts (30 days, three projects, New York time)
// into a database of its own, then times each endpoint over HTTP, answered from the rollups, and
// the same answer computed by GROUP BY over the raw attempts, for the busiest project. It reports
// the p95 of each (rollup-p95-ms over every b.Loop run, raw-p95-ms over -raw-samples runs) and their
// ratio (speedup-x). Run it with:
//
//	go test -run '^$' -bench Endpoints -timeout 3h ./analytics/ -args -records=10000000
//
// With -bench-db=URL (an empty database of its own) the ledger is loaded once and kept for the
// next runs.
func BenchmarkEndpoints(b *testing.B) {
	ctx := context.Background()
	now := time.Date(2026, 11, 4, 15, 30, 0, 0, mustZone(b, "America/New_York"))
	loaded := time.Now()
	var l synthLedger
	if *benchDB != "" {
		l = keptSynth(b, *benchDB, *benchRecords, now)
	} else {
		l = loadSynth(b, *benchRecords, now)
	}
	b.Logf("ledger of %d records ready in %v", *benchRecords, time.Since(loaded).Round(time.Second))
	// The hours a writer running at now would have pruned.
	if _, err := rollup.Prune(ctx, l.st.Pool, now); err != nil {
		b.Fatal(err)
	}
	if _, err := l.st.Pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		b.Fatal(err)
	}
	name, err := projectName(ctx, l)
	if err != nil {
		b.Fatal(err)
	}
	key, err := l.st.CreateKey(ctx, name)
	if err != nil {
		b.Fatal(err)
	}
	var service string // the busiest service
	if err := l.st.Pool.QueryRow(ctx, `SELECT s.service FROM rollup_daily r JOIN series s ON s.project_id = r.project_id
		AND s.id = r.series_id WHERE r.project_id = $1 GROUP BY 1 ORDER BY sum(r.attempts) DESC LIMIT 1`, l.project).Scan(&service); err != nil {
		b.Fatal(err)
	}
	srv := server.New(server.Options{Store: l.st, Registry: prometheus.NewRegistry(), Now: func() time.Time { return now }})
	l.svc.Mount(srv)
	hs := httptest.NewServer(srv.Echo)
	b.Cleanup(hs.Close)

	week := now.AddDate(0, 0, -6)
	weekFrom := time.Date(week.Year(), week.Month(), week.Day(), 0, 0, 0, 0, l.tz)
	to := time.Date(2026, 11, 5, 0, 0, 0, 0, l.tz) // the end of today: the default range's end
	monthFrom := now.AddDate(0, 0, -30).Truncate(time.Hour)
	november := time.Date(2026, 11, 1, 0, 0, 0, 0, l.tz)
	monthDay := time.Date(monthFrom.In(l.tz).Year(), monthFrom.In(l.tz).Month(), monthFrom.In(l.tz).Day(), 0, 0, 0, 0, l.tz) // peaks count whole days
	endpoints := []endpoint{
		// The default question: the last 7 days by model.
		{"summary", "/v1/summary?group_by=model", func() error {
			_, err := rawSummary(ctx, l.st.Pool, l.project, weekFrom, to, l.tz, "model")
			return err
		}},
		// A month's chart: cost per day and model.
		{"summary-month-by-day", "/v1/summary?group_by=day,model&from=" + monthFrom.Format(time.RFC3339), func() error {
			_, err := rawSummary(ctx, l.st.Pool, l.project, monthFrom, to, l.tz, "day,model")
			return err
		}},
		// A month by service, then per day by service and by tenant (each from its narrow rollup).
		{"summary-month-by-service", "/v1/summary?group_by=service&from=" + monthFrom.Format(time.RFC3339), func() error {
			_, err := rawSummary(ctx, l.st.Pool, l.project, monthFrom, to, l.tz, "service")
			return err
		}},
		{"summary-month-by-day-service", "/v1/summary?group_by=day,service&from=" + monthFrom.Format(time.RFC3339), func() error {
			_, err := rawSummary(ctx, l.st.Pool, l.project, monthFrom, to, l.tz, "day,service")
			return err
		}},
		{"summary-month-by-day-tenant", "/v1/summary?group_by=day,tenant&from=" + monthFrom.Format(time.RFC3339), func() error {
			_, err := rawSummary(ctx, l.st.Pool, l.project, monthFrom, to, l.tz, "day,tenant")
			return err
		}},
		// A month of one service by day and model: no narrow rollup keeps both, so rollup_daily.
		{"summary-month-service-by-day-model", "/v1/summary?group_by=day,model&service=" + url.QueryEscape(service) + "&from=" + monthFrom.Format(time.RFC3339), func() error {
			_, err := rawServiceSummary(ctx, l.st.Pool, l.project, monthFrom, to, l.tz, "day,model", service)
			return err
		}},
		// This month's projection (the basis days reach into October).
		{"projection", "/v1/projection", func() error {
			_, _, err := rawProjection(ctx, l.st.Pool, l.project, november.AddDate(0, 0, -7), november.AddDate(0, 1, 0), l.tz)
			return err
		}},
		// A month of each org's daily busiest minute, its 429s and lowest headroom (the 9am
		// question), from the load rollup's daily peaks; raw: GROUP BY per minute over attempts.
		{"peaks-month-by-org-day", "/v1/peaks?group_by=org,day&from=" + monthDay.Format(time.RFC3339), func() error {
			_, err := rawPeaks(ctx, l.st.Pool, l.project, monthDay, to, l.tz)
			return err
		}},
		// The last 7 days of cache use.
		{"cache", "/v1/cache", func() error {
			_, err := rawCache(ctx, l.st.Pool, l.project, weekFrom, to)
			return err
		}},
		// A month of incidents (issue 21): hours and minutes from the rollups, recoveries from the
		// raw attempts; raw: every minute, hour and cache hour by GROUP BY over attempts.
		{"incidents-month", "/v1/incidents?from=" + url.QueryEscape(monthFrom.Format(time.RFC3339)), func() error {
			_, err := rawIncidents(ctx, l.st.Pool, l.project, monthFrom, to)
			return err
		}},
		// The last 6 hours at 5-minute steps (the "Last 6 hours" charts), from rollup_minute5; raw:
		// the same GROUP BY written by hand.
		{"summary-6h-by-minute", "/v1/summary?group_by=minute&step=5m&from=" + url.QueryEscape(now.Add(-6*time.Hour).Format(time.RFC3339)) +
			"&to=" + url.QueryEscape(now.Format(time.RFC3339)), func() error {
			_, err := rawSummary(ctx, l.st.Pool, l.project, now.Add(-6*time.Hour), now, l.tz, "minute5")
			return err
		}},
		// The last hour minute by minute (the "Last hour" charts), from the raw attempts: no rollup
		// keeps minutes by series.
		{"summary-1h-by-minute", "/v1/summary?group_by=minute&from=" + url.QueryEscape(now.Add(-time.Hour).Format(time.RFC3339)) +
			"&to=" + url.QueryEscape(now.Format(time.RFC3339)), func() error {
			_, err := rawSummary(ctx, l.st.Pool, l.project, now.Add(-time.Hour), now, l.tz, "minute")
			return err
		}},
	}
	runEndpoints(b, hs.URL, key, endpoints)
}

// endpoint is a question BenchmarkEndpoints times: its path, and the same question answered by
// GROUP BY over the raw attempts.
type endpoint struct {
	name string
	path string
	raw  func() error
}

// runEndpoints times each endpoint over HTTP at base with key, and its raw question (timeEndpoint).
func runEndpoints(b *testing.B, base, key string, endpoints []endpoint) {
	for _, e := range endpoints {
		b.Run(e.name, func(b *testing.B) { timeEndpoint(b, base, key, e, nil) })
	}
}

// timeEndpoint times the endpoint e over HTTP at base with key, running before (when not nil)
// untimed before each request, and its raw question, and reports the p95 of each (rollup-p95-ms
// over every b.Loop run, raw-p95-ms over -raw-samples runs) and their ratio (speedup-x).
func timeEndpoint(b *testing.B, base, key string, e endpoint, before func() error) {
	// The server's garbage collector runs at the ledgerd command's target, as it would serving.
	defer debug.SetGCPercent(debug.SetGCPercent(app.GCPercent))
	var rollup []time.Duration
	for b.Loop() {
		if before != nil {
			if err := before(); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		if err := fetch(base+e.path, key); err != nil {
			b.Fatal(err)
		}
		rollup = append(rollup, time.Since(start))
	}
	var raw []time.Duration
	for range *rawSamples {
		start := time.Now()
		if err := e.raw(); err != nil {
			b.Fatal(err)
		}
		raw = append(raw, time.Since(start))
	}
	r := p95(rollup)
	b.ReportMetric(ms(r), "rollup-p95-ms")
	if len(raw) > 0 {
		w := p95(raw)
		b.ReportMetric(ms(w), "raw-p95-ms")
		b.ReportMetric(float64(w)/float64(r), "speedup-x")
	}
}

// keptSynth is loadSynth into the database at url, migrated first, which is kept: a database that
// already holds n attempts is taken as it is, so a 10M-record ledger is loaded once.
func keptSynth(b *testing.B, url string, n int, now time.Time) synthLedger {
	ctx := context.Background()
	pool, have := dbtest.Kept(b, url)
	st := store.New(pool)
	tz := mustZone(b, "America/New_York")
	switch have {
	case n:
	case 0:
		catalog, err := pricing.Load("")
		if err != nil {
			b.Fatal(err)
		}
		opt := seed.Options{Records: n, Seed: 42, End: now, Days: 30, Timezone: tz, Price: ingest.CatalogPrice(catalog)}
		if _, err := seed.Load(ctx, st, opt); err != nil {
			b.Fatal(err)
		}
	default:
		b.Fatalf("-bench-db holds %d attempts, not %d: give it an empty database", have, n)
	}
	var project int64
	if err := st.Pool.QueryRow(ctx, `SELECT id FROM projects WHERE name = 'synth-a'`).Scan(&project); err != nil {
		b.Fatal(err)
	}
	return synthLedger{st: st, svc: analytics.New(analytics.Options{Pool: st.Pool, Timezone: tz, Now: func() time.Time { return now }}), project: project, tz: tz, now: now}
}

func projectName(ctx context.Context, l synthLedger) (string, error) {
	var name string
	err := l.st.Pool.QueryRow(ctx, `SELECT name FROM projects WHERE id = $1`, l.project).Scan(&name)
	return name, err
}

// fetch GETs url with the API key and reads the answer through, failing on any status but 200.
func fetch(url, key string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	// The whole answer is read, but not kept: the client runs in the server's process, and
	// growing a buffer to megabytes of JSON on every request put its copying and garbage on the
	// server's two cores and its collector.
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// p95 is the nearest-rank 95th percentile.
func p95(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)*95+99)/100-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

var tenantRecords = flag.Int("tenant-records", 200_000, "synthetic attempts BenchmarkManyTenants loads")

// BenchmarkManyTenants loads -tenant-records synthetic attempts over 30 days spread over 10,000
// tenants, 50 services and 12 models (seed.Spread: a SaaS attributing spend per customer), then
// times the tenant questions and the cache report as BenchmarkEndpoints does, each against the
// same question by GROUP BY over the raw attempts, and reports each rollup's rows per attempt.
// With -bench-db=URL the ledger is loaded once into that empty database and kept. Run it with:
//
//	go test -run '^$' -bench ManyTenants -benchtime 20x -timeout 3h ./internal/analytics/ -args -tenant-records=10000000
func BenchmarkManyTenants(b *testing.B) {
	ctx := context.Background()
	tz := mustZone(b, "America/New_York")
	now := time.Date(2026, 11, 4, 15, 30, 0, 0, tz)
	loaded := time.Now()
	var pool *pgxpool.Pool
	have := 0
	if *benchDB != "" {
		pool, have = dbtest.Kept(b, *benchDB)
	} else {
		pool = dbtest.New(b)
	}
	st := store.New(pool)
	if have == 0 {
		catalog, err := pricing.Load("")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := seed.Load(ctx, st, seed.Options{Records: *tenantRecords, Seed: 7, Projects: []string{"saas"}, End: now,
			Days: 30, Timezone: tz, Price: ingest.CatalogPrice(catalog), Spread: &seed.Spread{Tenants: 10_000, Services: 50}}); err != nil {
			b.Fatal(err)
		}
		if _, err := pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
			b.Fatal(err)
		}
	} else if have != *tenantRecords {
		b.Fatalf("-bench-db holds %d attempts, not %d: give it an empty database", have, *tenantRecords)
	}
	b.Logf("ledger of %d records ready in %v", *tenantRecords, time.Since(loaded).Round(time.Second))
	var project int64
	if err := pool.QueryRow(ctx, `SELECT id FROM projects WHERE name = 'saas'`).Scan(&project); err != nil {
		b.Fatal(err)
	}
	key, err := st.CreateKey(ctx, "saas")
	if err != nil {
		b.Fatal(err)
	}
	var tenant string // the busiest tenant
	if err := pool.QueryRow(ctx, `SELECT tenant FROM rollup_daily_tenant WHERE project_id = $1
		GROUP BY 1 ORDER BY sum(attempts) DESC, 1 LIMIT 1`, project).Scan(&tenant); err != nil {
		b.Fatal(err)
	}
	// The hours a writer running at now would have pruned, and today's cache summaries as it
	// would have made them (up to now's hour).
	if _, err := rollup.Prune(ctx, pool, now); err != nil {
		b.Fatal(err)
	}
	summarizeCacheDaysAt(b, pool, now)
	var rows []int64
	tables := []string{"attempts", "rollup_hourly", "rollup_hourly_model", "rollup_daily", "rollup_daily_model", "rollup_daily_service",
		"rollup_daily_tenant", "rollup_daily_tenant_model", "rollup_tenant_spend", "rollup_tenant_blocks", "rollup_cache_hourly", "rollup_cache_daily",
		"rollup_load_minute"}
	for _, t := range tables {
		var n int64
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+t).Scan(&n); err != nil {
			b.Fatal(err)
		}
		rows = append(rows, n)
	}
	for i, t := range tables[1:] {
		b.Logf("%s: %d rows, %.4f a raw attempt", t, rows[i+1], float64(rows[i+1])/float64(rows[0]))
	}

	svc := analytics.New(analytics.Options{Pool: pool, Timezone: tz, Now: func() time.Time { return now }})
	srv := server.New(server.Options{Store: st, Registry: prometheus.NewRegistry(), Now: func() time.Time { return now }})
	svc.Mount(srv)
	hs := httptest.NewServer(srv.Echo)
	b.Cleanup(hs.Close)

	// 30 whole local days, today included; the cache report's default week.
	to := time.Date(2026, 11, 5, 0, 0, 0, 0, tz)
	from := to.AddDate(0, 0, -30)
	week := to.AddDate(0, 0, -7)
	month := "&from=" + url.QueryEscape(from.Format(time.RFC3339)) + "&to=" + url.QueryEscape(to.Format(time.RFC3339))
	raw := func(groupBy, tenant string) func() error {
		return func() error {
			_, err := rawFilteredSummary(ctx, pool, project, from, to, tz, groupBy, "", tenant)
			return err
		}
	}
	rawWeek := func() error {
		_, err := rawCache(ctx, pool, project, week, to)
		return err
	}
	// While calls come in, each fold writes today's rows of the tenants and series that called
	// again, today's row of rollup_days, and notes the hour it added cache rows to in
	// cache_days_dirty: here the rows of 100 tenants and of 100 series shapes are rewritten (new
	// row versions, the same figures) and now's hour noted (today's summary, up to it, still
	// holds) before each read, about what 400 calls a second make between reads 250 ms apart.
	today := to.AddDate(0, 0, -1)
	var (
		todays []string
		shapes []int64
	)
	if err := pool.QueryRow(ctx, `SELECT (SELECT array_agg(DISTINCT tenant ORDER BY tenant) FROM rollup_daily_tenant
		WHERE project_id = $1 AND bucket = $2), (SELECT array_agg(DISTINCT series_id ORDER BY series_id) FROM rollup_daily
		WHERE project_id = $1 AND bucket = $2)`, project, today).Scan(&todays, &shapes); err != nil {
		b.Fatal(err)
	}
	folded := 0
	fold := func() error {
		var (
			batch []string
			ids   []int64
		)
		for range 100 {
			batch, ids, folded = append(batch, todays[folded%len(todays)]), append(ids, shapes[folded%len(shapes)]), folded+7919
		}
		_, err := pool.Exec(ctx, `WITH t AS (UPDATE rollup_daily_tenant SET attempts = attempts
			WHERE project_id = $1 AND bucket = $2 AND tenant = ANY($3)), d AS (UPDATE rollup_daily SET attempts = attempts
			WHERE project_id = $1 AND bucket = $2 AND series_id = ANY($4)), c AS (INSERT INTO cache_days_dirty AS x (project_id, bucket, hour)
			VALUES ($1, $2, $5) ON CONFLICT (project_id, bucket) DO UPDATE SET hour = least(x.hour, excluded.hour))
			UPDATE rollup_days SET writes = writes + 1 WHERE project_id = $1 AND bucket = $2`,
			project, today, batch, ids, now.Truncate(time.Hour))
		return err
	}
	runEndpoints(b, hs.URL, key, []endpoint{
		{"summary-month-by-tenant", "/v1/summary?group_by=tenant" + month, raw("tenant", "")},
		{"top-20-tenants-by-spend", "/v1/summary?group_by=tenant&top=20" + month, raw("tenant", "")},
		{"one-tenant-month-by-day-model", "/v1/summary?group_by=day,model&tenant=" + url.QueryEscape(tenant) + month,
			raw("day,model", tenant)},
		{"overview-month-by-day-model", "/v1/summary?group_by=day,model" + month, raw("day,model", "")},
		{"cache", "/v1/cache", rawWeek},
		// The incidents open now, which the Overview page asks for on every load: the last two
		// hours, with the caches' days and the spend of the week before (the raw side finds every
		// incident of the range).
		{"open-incidents", "/v1/incidents?open=true&from=" + url.QueryEscape(now.Add(-2*time.Hour).Format(time.RFC3339)) +
			"&to=" + url.QueryEscape(now.Add(time.Hour).Format(time.RFC3339)), func() error {
			_, err := rawIncidents(ctx, pool, project, now.Add(-2*time.Hour), now.Add(time.Hour))
			return err
		}},
	})
	b.Run("summary-month-by-tenant-while-folding", func(b *testing.B) {
		timeEndpoint(b, hs.URL, key, endpoint{path: "/v1/summary?group_by=tenant" + month, raw: raw("tenant", "")}, fold)
	})
	b.Run("cache-while-folding", func(b *testing.B) {
		timeEndpoint(b, hs.URL, key, endpoint{path: "/v1/cache", raw: rawWeek}, fold)
	})
}
