package reprice_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/reprice"
	"github.com/ledgerd/ledgerd/internal/rollup"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/pricing"
	"github.com/ledgerd/ledgerd/schema"
)

// zone counts the daily rollups of the tests; 2026-11-01 is the day its clocks go back.
const zone = "America/New_York"

var dataStart = time.Date(2026, 10, 31, 18, 0, 0, 0, time.UTC)

func loadCatalog(t testing.TB, file string) *pricing.Catalog {
	t.Helper()
	c, err := pricing.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ledger is a test database with a writer pricing with some catalog.
type ledger struct {
	pool *pgxpool.Pool
	st   *store.Store
}

func newLedger(t *testing.T) ledger {
	t.Helper()
	pool := dbtest.New(t)
	st := store.New(pool)
	// The minute rollup holds every minute: the fixtures' clocks lie in the past.
	for k, v := range map[string]string{"timezone": zone, "minutes_from": "-infinity"} {
		if err := st.SetSetting(context.Background(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	return ledger{pool: pool, st: st}
}

// ingestAll commits recs for project through a new writer that prices with cat, and returns the
// writer's result.
func (l ledger) ingestAll(t *testing.T, project string, cat *pricing.Catalog, recs []schema.Attempt) ingest.Result {
	t.Helper()
	ctx := context.Background()
	tz, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.st.EnsureProject(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	w := ingest.NewWriter(l.st, ingest.CatalogPrice(cat), ingest.Options{Timezone: tz, Registerer: prometheus.NewRegistry()})
	defer w.Close(ctx)
	res, err := w.Submit(ctx, p.ID, recs)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

var testModels = []struct{ provider, model string }{
	{"anthropic", "claude-haiku-5-5"}, {"anthropic", "haiku-latest"}, {"anthropic", "claude-sonnet-5-5"},
	{"acme", "old-llm"}, {"acme", "new-llm"},
}

// records makes n varied attempts, one every step from start: every model, status, cache use,
// batch and fallback, and client costs that agree with catalog A (i%3 == 1) or B (i%3 == 2).
func records(prefix string, n int, start time.Time, step time.Duration, a, b *pricing.Catalog) []schema.Attempt {
	out := make([]schema.Attempt, n)
	for i := range out {
		m := testModels[i%len(testModels)]
		r := schema.Attempt{AttemptID: fmt.Sprintf("%s-%d", prefix, i), RequestID: fmt.Sprintf("%s-req-%d", prefix, i/2),
			AttemptNo: 1 + i%2, StartedAt: start.Add(time.Duration(i) * step), LatencyMS: int64(200 + 17*i),
			Provider: m.provider, Model: m.model, Service: fmt.Sprintf("svc%d", i%3), Operation: "default",
			Tenant: fmt.Sprintf("t%d", i%2), Status: schema.StatusOK,
			InputTokens: int64(1000 + 37*i), OutputTokens: int64(50 + 3*i)}
		switch i % 6 {
		case 3:
			r.Status, r.ErrorClass = schema.StatusError, schema.ErrorRateLimited
		case 5:
			r.Status, r.ErrorClass = schema.StatusCancelled, schema.ErrorCancelled
		}
		if i%3 == 0 {
			r.ReasoningTokens = r.OutputTokens / 2
		}
		if i%4 == 0 {
			r.CacheWriteTokens = 2000
			r.PromptHash = fmt.Sprintf("p%d", i%3)
			if i%8 == 0 {
				r.CacheWrite1hTokens = 500
			}
		}
		if i%5 == 2 {
			r.CacheReadTokens = 3000
			r.PromptHash = fmt.Sprintf("p%d", i%3)
		}
		if i%9 == 1 {
			r.PromptHash = "named-only"
		}
		if i%13 == 6 { // single-use: a new prompt on every call
			r.PromptHash = fmt.Sprintf("%s-once-%d", prefix, i)
		}
		r.Batch = i%7 == 0
		if i%10 == 7 {
			r.Fallback, r.FallbackFrom = true, "claude-sonnet-5-5"
		}
		var client *pricing.Catalog
		switch i % 3 {
		case 1:
			client = a
		case 2:
			client = b
		}
		if client != nil {
			if c := ingest.CatalogPrice(client)(&r); c.Priced {
				v := c.Cost
				r.CostUSD = &v
			}
		}
		out[i] = r
	}
	return out
}

// expect computes, independently of the reprice code, the figures a reprice of recs from catalog
// old to catalog cur should report.
func expect(recs []schema.Attempt, old, cur *pricing.Catalog) reprice.Figures {
	var f reprice.Figures
	for i := range recs {
		o, n := ingest.CatalogPrice(old)(&recs[i]), ingest.CatalogPrice(cur)(&recs[i])
		f.Attempts++
		if o != n {
			f.Changed++
		}
		switch {
		case !o.Priced && n.Priced:
			f.NewlyPriced++
		case o.Priced && !n.Priced:
			f.NewlyUnpriced++
		}
		if !n.Priced {
			f.Unpriced++
		}
		f.Before += o.Cost
		f.After += n.Cost
	}
	f.Delta = f.After - f.Before
	return f
}

func plus(a, b reprice.Figures) reprice.Figures {
	return reprice.Figures{Attempts: a.Attempts + b.Attempts, Changed: a.Changed + b.Changed,
		NewlyPriced: a.NewlyPriced + b.NewlyPriced, NewlyUnpriced: a.NewlyUnpriced + b.NewlyUnpriced,
		Unpriced: a.Unpriced + b.Unpriced, Before: a.Before + b.Before, After: a.After + b.After, Delta: a.Delta + b.Delta}
}

// checkRaw checks that every stored attempt carries the cost, cost without caching and price
// version that want[its id] gives.
func (l ledger) checkRaw(t *testing.T, want map[string]ingest.Costing) {
	t.Helper()
	rows, err := l.pool.Query(context.Background(), `SELECT a.attempt_id, a.cost_nanos, a.nocache_cost_nanos, p.key
		FROM attempts a LEFT JOIN price_versions p ON p.id = a.price_id`)
	if err != nil {
		t.Fatal(err)
	}
	var (
		id      string
		cost    *int64
		nocache *int64
		key     *string
		seen    int
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &cost, &nocache, &key}, func() error {
		seen++
		w, ok := want[id]
		if !ok {
			t.Errorf("unexpected attempt %s", id)
			return nil
		}
		var got ingest.Costing
		if cost != nil {
			got = ingest.Costing{Cost: money.Nanos(*cost), NoCache: money.Nanos(*nocache), Priced: true}
			if key != nil {
				got.Version.Key = *key
			}
		}
		if got.Priced != w.Priced || got.Cost != w.Cost || got.NoCache != w.NoCache || got.Version.Key != w.Version.Key {
			t.Errorf("attempt %s stores %+v, want cost %v nocache %v key %q priced %v", id, got, w.Cost, w.NoCache, w.Version.Key, w.Priced)
		}
		cost, nocache, key = nil, nil, nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != len(want) {
		t.Errorf("%d attempts stored, want %d", seen, len(want))
	}
}

// Recomputations of each rollup from raw attempts, written out here rather than taken from the
// ingest package, and the rollup columns they must equal: the shape-keyed rollups by the shape of
// each attempt's series. Latency histograms are left out: a
// reprice never touches them.
const (
	rawHourly = `WITH shaped AS (SELECT a.*, s.shape_id FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id)
		SELECT project_id, date_trunc('hour', started_at), shape_id, fallback, status, error_class,
		count(*), count(*) FILTER (WHERE attempt_no = 1), sum(input_tokens), sum(output_tokens),
		sum(cache_write_tokens), sum(cache_write_1h_tokens), sum(cache_read_tokens), sum(reasoning_tokens),
		count(*) FILTER (WHERE cache_write_tokens > 0), count(*) FILTER (WHERE cache_read_tokens > 0),
		coalesce(sum(cost_nanos), 0), coalesce(sum(nocache_cost_nanos), 0), count(*) FILTER (WHERE cost_nanos IS NULL),
		coalesce(sum(client_cost_nanos), 0),
		count(*) FILTER (WHERE client_cost_nanos IS NOT NULL AND cost_nanos IS NOT NULL AND abs(client_cost_nanos - cost_nanos) * 100 > cost_nanos),
		sum(latency_ms)
		FROM shaped GROUP BY 1, 2, 3, 4, 5, 6`
	rollupCols = `project_id, bucket, series_id, fallback, status, error_class, attempts, requests, input_tokens,
		output_tokens, cache_write_tokens, cache_write_1h_tokens, cache_read_tokens, reasoning_tokens,
		cache_write_calls, cache_read_calls, cost_nanos, nocache_cost_nanos, unpriced_attempts, client_cost_nanos,
		cost_mismatch_attempts, latency_sum_ms`
	// A hash used by one call in its UTC month counts on the series' empty-hash row, as single-use.
	rawCache = `WITH p AS (
			SELECT project_id, date_trunc('month', started_at, 'UTC') AS month, prompt_hash, count(*) AS n
			FROM attempts WHERE prompt_hash IS NOT NULL GROUP BY 1, 2, 3)
		SELECT a.project_id, date_trunc('hour', a.started_at), s.shape_id, a.fallback,
		CASE WHEN p.n >= 2 THEN a.prompt_hash ELSE '' END,
		count(*), count(*) FILTER (WHERE a.cache_write_tokens > 0), count(*) FILTER (WHERE a.cache_read_tokens > 0),
		sum(a.input_tokens), sum(a.cache_write_tokens), sum(a.cache_read_tokens), coalesce(sum(a.cost_nanos), 0),
		coalesce(sum(a.nocache_cost_nanos), 0), count(*) FILTER (WHERE a.cost_nanos IS NULL), count(*) FILTER (WHERE p.n = 1)
		FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id
			LEFT JOIN p ON p.project_id = a.project_id AND p.month = date_trunc('month', a.started_at, 'UTC')
			AND p.prompt_hash = a.prompt_hash
		WHERE a.cache_write_tokens > 0 OR a.cache_read_tokens > 0 OR a.prompt_hash IS NOT NULL
		GROUP BY 1, 2, 3, 4, 5`
	cacheCols = `project_id, bucket, series_id, fallback, prompt_hash, calls, cache_write_calls, cache_read_calls,
		input_tokens, cache_write_tokens, cache_read_tokens, cost_nanos, nocache_cost_nanos, unpriced_attempts, single_use`
	// The calls of each hash per month, and the figures of a hash's only call.
	rawPrefixes = `SELECT a.project_id, date_trunc('month', started_at, 'UTC'), prompt_hash, count(*),
		CASE WHEN count(*) = 1 THEN min(s.shape_id) END, CASE WHEN count(*) = 1 THEN coalesce(sum(cost_nanos), 0) END,
		CASE WHEN count(*) = 1 THEN coalesce(sum(nocache_cost_nanos), 0) END,
		CASE WHEN count(*) = 1 THEN count(*) FILTER (WHERE cost_nanos IS NULL) END
		FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id
		WHERE prompt_hash IS NOT NULL GROUP BY 1, 2, 3`
	prefixCols = `project_id, month, prompt_hash, calls, CASE WHEN calls = 1 THEN series_id END,
		CASE WHEN calls = 1 THEN cost_nanos END, CASE WHEN calls = 1 THEN nocache_cost_nanos END,
		CASE WHEN calls = 1 THEN unpriced_attempts END`
)

// checkRollups checks that every rollup table equals its recomputation from the raw attempts.
func (l ledger) checkRollups(t *testing.T) {
	t.Helper()
	daily := strings.Replace(rawHourly, "date_trunc('hour', started_at)", "(started_at AT TIME ZONE '"+zone+"')::date", 1)
	// The narrow daily rollups: daily, the series replaced by the columns kept (keep).
	narrow := func(keep string, n int) string {
		group := "1, 2, 3, 4, 5"
		for i := range n {
			group += fmt.Sprintf(", %d", 6+i)
		}
		return strings.NewReplacer("date_trunc('hour', started_at), shape_id,", "(started_at AT TIME ZONE '"+zone+"')::date, "+keep+",",
			"FROM shaped GROUP BY 1, 2, 3, 4, 5, 6", `FROM (SELECT a.*, s.provider, s.model, s.fallback_from, s.service, s.operation, s.tenant
				FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id) a GROUP BY `+group).Replace(rawHourly)
	}
	// rollup_hourly keeps no hour Prune removed; the narrow hourly rollup keeps every hour.
	hourly := strings.Replace(rawHourly, "FROM shaped GROUP BY", "FROM shaped WHERE started_at >= "+rollup.PrunedBeforeSQL+" GROUP BY", 1)
	hourlyModel := strings.NewReplacer("date_trunc('hour', started_at), shape_id,", "date_trunc('hour', started_at), provider, model, fallback_from,",
		"FROM shaped GROUP BY 1, 2, 3, 4, 5, 6", `FROM (SELECT a.*, s.provider, s.model, s.fallback_from
			FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id) a GROUP BY 1, 2, 3, 4, 5, 6, 7, 8`).Replace(rawHourly)
	// rollup_minute5 holds the 5 minutes from minutes_from on.
	minute := strings.NewReplacer("date_trunc('hour', started_at)", rollup.Minute5BucketExpr,
		"FROM shaped GROUP BY", "FROM shaped WHERE started_at >= "+rollup.MinutesFromSQL+" GROUP BY").Replace(rawHourly)
	for _, c := range []struct{ table, raw, cols string }{
		{"rollup_hourly", hourly, rollupCols},
		{"rollup_minute5", minute, rollupCols},
		{"rollup_hourly_model", hourlyModel, strings.Replace(rollupCols, "series_id,", "provider, model, fallback_from,", 1)},
		{"rollup_daily", daily, rollupCols},
		{"rollup_daily_model", narrow("provider, model, fallback_from", 3), strings.Replace(rollupCols, "series_id,", "provider, model, fallback_from,", 1)},
		{"rollup_daily_service", narrow("service, operation", 2), strings.Replace(rollupCols, "series_id,", "service, operation,", 1)},
		{"rollup_daily_tenant", narrow("tenant", 1), strings.Replace(rollupCols, "series_id,", "tenant,", 1)},
		{"rollup_daily_tenant_model", narrow("tenant, provider, model, fallback_from", 4),
			strings.Replace(rollupCols, "series_id,", "tenant, provider, model, fallback_from,", 1)},
		{"rollup_tenant_spend", `SELECT project_id, sp.span, day - (((day - date '2000-01-01') % sp.span + sp.span) % sp.span), tenant,
			coalesce(sum(cost_nanos), 0)::int8
			FROM (SELECT a.project_id, (a.started_at AT TIME ZONE '` + zone + `')::date AS day, s.tenant, a.cost_nanos
				FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id) a
			CROSS JOIN unnest('{1,8,64}'::int2[]) AS sp(span) GROUP BY 1, 2, 3, 4`, "project_id, span, bucket, tenant, cost_nanos"},
		// The tenant blocks are the tenant rollup's days (checked above) added up per block.
		{"rollup_tenant_blocks", rollup.BlocksFromDailySQL, "*"},
		{"rollup_cache_hourly WHERE calls <> 0", rawCache, cacheCols}, // a row emptied by moves equals none
		{"cache_prefixes", rawPrefixes, prefixCols},
		// The load rollup's cost sums, by its key (the incidents' wasted spend).
		{"rollup_load_minute", `SELECT a.project_id, date_trunc('minute', a.started_at, 'UTC'), coalesce(a.org, ''), s.provider,
			s.model, s.service, a.fallback, s.fallback_from, coalesce(sum(a.cost_nanos) FILTER (WHERE a.status <> 'ok'), 0)::int8,
			count(*) FILTER (WHERE a.cost_nanos IS NULL)
			FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id GROUP BY 1, 2, 3, 4, 5, 6, 7, 8`,
			"project_id, bucket, org, provider, model, service, fallback, fallback_from, wasted_nanos, unpriced_attempts"},
		// The same per model (rollup_model_minute).
		{"rollup_model_minute", `SELECT a.project_id, date_trunc('minute', a.started_at, 'UTC'), s.provider, s.model, a.fallback,
			s.fallback_from, coalesce(sum(a.cost_nanos) FILTER (WHERE a.status <> 'ok'), 0)::int8,
			count(*) FILTER (WHERE a.cost_nanos IS NULL)
			FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id GROUP BY 1, 2, 3, 4, 5, 6`,
			"project_id, bucket, provider, model, fallback, fallback_from, wasted_nanos, unpriced_attempts"},
	} {
		var extra, missing int
		q := fmt.Sprintf(`SELECT (SELECT count(*) FROM ((SELECT %[2]s FROM %[1]s) EXCEPT (%[3]s)) x),
			(SELECT count(*) FROM ((%[3]s) EXCEPT (SELECT %[2]s FROM %[1]s)) y)`, c.table, c.cols, c.raw)
		if err := l.pool.QueryRow(context.Background(), q).Scan(&extra, &missing); err != nil {
			t.Fatalf("%s: %v", c.table, err)
		}
		if extra != 0 || missing != 0 {
			t.Errorf("%s: %d rows differ from the raw attempts, %d recomputed rows are missing", c.table, extra, missing)
		}
	}
}

// costings prices recs with cat for checkRaw; inRange says which records take cur instead.
func costings(recs []schema.Attempt, old, cur *pricing.Catalog, inRange func(*schema.Attempt) bool) map[string]ingest.Costing {
	out := map[string]ingest.Costing{}
	for i := range recs {
		r := &recs[i]
		cat := old
		if inRange(r) {
			cat = cur
		}
		c := ingest.CatalogPrice(cat)(r)
		c.Version = store.PriceVersion{Key: c.Version.Key}
		out[r.AttemptID] = c
	}
	return out
}

func TestReprice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	catA, catB := loadCatalog(t, "testdata/prices-a.yaml"), loadCatalog(t, "testdata/prices-b.yaml")
	l := newLedger(t)
	// 240 attempts every 23 minutes: 2026-10-31 18:00Z to 2026-11-04 13:37Z, in two projects.
	acme := records("acme", 160, dataStart, 23*time.Minute, catA, catB)
	beta := records("beta", 80, dataStart.Add(11*time.Minute), 46*time.Minute, catA, catB)
	if res := l.ingestAll(t, "acme", catA, acme); res.Accepted != 160 {
		t.Fatalf("ingest acme: %+v", res)
	}
	if res := l.ingestAll(t, "beta", catA, beta); res.Accepted != 80 {
		t.Fatalf("ingest beta: %+v", res)
	}
	all := append(append([]schema.Attempt{}, acme...), beta...)
	l.checkRollups(t)

	from, to := time.Date(2026, 11, 1, 4, 30, 0, 0, time.UTC), time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC)
	within := func(r *schema.Attempt) bool { return !r.StartedAt.Before(from) && r.StartedAt.Before(to) }
	haiku := func(r *schema.Attempt) bool {
		return within(r) && (r.Model == "claude-haiku-5-5" || r.Model == "haiku-latest")
	}
	selected := func(keep func(*schema.Attempt) bool) []schema.Attempt {
		var out []schema.Attempt
		for i := range all {
			if keep(&all[i]) {
				out = append(out, all[i])
			}
		}
		return out
	}
	nothing := func(*schema.Attempt) bool { return false }

	steps := []struct {
		name string
		cat  *pricing.Catalog
		opt  reprice.Options
		// want are the expected totals; stored says which attempts carry catalog B's figures after.
		want   reprice.Figures
		stored func(*schema.Attempt) bool
		// touched are the local days whose row of rollup_days the step writes again: those whose
		// daily rollup rows it changes (the range's, in New York), so a reader that kept them
		// reads them again.
		touched string
	}{
		// Repricing with the catalog the attempts were ingested with changes nothing: reprice prices
		// exactly as the writer does.
		{"same catalog", catA, reprice.Options{From: from, To: to},
			expect(selected(within), catA, catA), nothing, ""},
		// A dry run reports what B would change and writes nothing.
		{"dry run", catB, reprice.Options{From: from, To: to, DryRun: true},
			expect(selected(within), catA, catB), nothing, ""},
		// --model selects the model by any name the catalog gives it (haiku-latest is an alias in B).
		{"one model", catB, reprice.Options{From: from, To: to, Model: "Claude-Haiku-5-5", ChunkRows: 7},
			expect(selected(haiku), catA, catB), haiku, "2026-11-01 2026-11-02 2026-11-03"},
		// The whole range, in chunks of 10: the rest of the models change too, old-llm loses its
		// price and new-llm gains one.
		{"whole range", catB, reprice.Options{From: from, To: to, ChunkRows: 10},
			plus(expect(selected(haiku), catB, catB), expect(selected(func(r *schema.Attempt) bool { return within(r) && !haiku(r) }), catA, catB)),
			within, "2026-11-01 2026-11-02 2026-11-03"},
		// Running it again changes nothing.
		{"again", catB, reprice.Options{From: from, To: to},
			expect(selected(within), catB, catB), within, ""},
	}
	// days are the xmins of rollup_days' rows, by day.
	days := func() map[string]int64 {
		t.Helper()
		rows, err := l.st.Pool.Query(ctx, `SELECT bucket::text, xmin::text::int8 FROM rollup_days`)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		var (
			d    string
			xmin int64
		)
		if _, err := pgx.ForEachRow(rows, []any{&d, &xmin}, func() error { out[d] = xmin; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, s := range steps {
		before := days()
		rep, err := reprice.Run(ctx, l.st, s.cat, s.opt)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		var touched []string
		for d, xmin := range days() {
			if before[d] != xmin {
				touched = append(touched, d)
			}
		}
		slices.Sort(touched)
		if got := strings.Join(touched, " "); got != s.touched {
			t.Errorf("%s: days noted in rollup_days %q, want %q", s.name, got, s.touched)
		}
		if rep.Totals != s.want {
			t.Errorf("%s: totals\n got %+v\nwant %+v", s.name, rep.Totals, s.want)
		}
		var sum reprice.Figures
		for _, m := range rep.Models {
			sum.Attempts += m.Attempts
			sum.Changed += m.Changed
			sum.Delta += m.Delta
		}
		if sum.Attempts != rep.Totals.Attempts || sum.Changed != rep.Totals.Changed || sum.Delta != rep.Totals.Delta {
			t.Errorf("%s: the models add up to %+v, not the totals %+v", s.name, sum, rep.Totals)
		}
		l.checkRaw(t, costings(all, catA, catB, s.stored))
		l.checkRollups(t)
	}

	// The fixture, stated outright: the range holds acme's attempts 28 to 159 and beta's 14 to 79
	// (198). Going from A to B, new-llm's 27 + 14 and haiku-latest's 26 + 13 gain a price, and
	// old-llm's 27 + 13 lose theirs, except the 4 + 2 batch ones, which A could not price either.
	whole := expect(selected(within), catA, catB)
	if whole.Attempts != 198 || whole.NewlyPriced != 27+14+26+13 || whole.NewlyUnpriced != 27+13-4-2 {
		t.Errorf("fixture changed: %+v", whole)
	}

	// Duplicates of every attempt delivered afterwards, priced with A by a server that was not
	// restarted, are skipped and change no rollup.
	if res := l.ingestAll(t, "acme", catA, acme); res.Duplicates != 160 || res.Accepted != 0 {
		t.Errorf("redelivery: %+v", res)
	}
	l.checkRaw(t, costings(all, catA, catB, within))
	l.checkRollups(t)
}

// TestRepriceAfterPrune reprices attempts some of whose hours rollup_hourly pruned
// (rollup.Prune): their deltas go to the rollups that keep those hours, and every rollup still
// equals its recount from the raw attempts.
func TestRepriceAfterPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	catA, catB := loadCatalog(t, "testdata/prices-a.yaml"), loadCatalog(t, "testdata/prices-b.yaml")
	l := newLedger(t)
	recs := records("acme", 160, dataStart, 23*time.Minute, catA, catB)
	if res := l.ingestAll(t, "acme", catA, recs); res.Accepted != 160 {
		t.Fatalf("ingest: %+v", res)
	}
	// Nine days and a half after the data's second day: its first two days are pruned.
	now := dataStart.Add(24*time.Hour + rollup.HourlyKeep + 36*time.Hour)
	n, err := rollup.Prune(ctx, l.pool, now)
	if err != nil {
		t.Fatal(err)
	}
	var left, before int64
	if err := l.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE bucket < $1) FROM rollup_hourly`, rollup.PruneCutoff(now)).
		Scan(&left, &before); err != nil {
		t.Fatal(err)
	}
	if n == 0 || left == 0 || before != 0 {
		t.Fatalf("pruned %d rows, %d left, %d before the cutoff: the fixture should straddle it", n, left, before)
	}
	l.checkRollups(t)
	// The prune summed the cache days (rollup.SummarizeCacheDays); a reprice that changes their
	// hours' costs notes them, so their summaries are not read until summed again.
	validDays := func() (n int) {
		if err := l.pool.QueryRow(ctx, `SELECT count(*) FROM rollup_cache_days d WHERE NOT EXISTS (SELECT 1 FROM cache_days_dirty x
			WHERE x.project_id = d.project_id AND x.bucket = d.bucket AND x.hour < d.through)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if validDays() == 0 {
		t.Fatal("no cache day summed before the reprice")
	}
	if _, err := reprice.Run(ctx, l.st, catB, reprice.Options{From: dataStart, To: dataStart.AddDate(0, 0, 10)}); err != nil {
		t.Fatal(err)
	}
	l.checkRaw(t, costings(recs, catA, catB, func(*schema.Attempt) bool { return true }))
	l.checkRollups(t)
	if n := validDays(); n != 0 {
		t.Errorf("%d cache days still read as summed before the reprice", n)
	}
}

// TestReport checks the report's figures for a known case and its text form.
func TestReport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	catA, catB := loadCatalog(t, "testdata/prices-a.yaml"), loadCatalog(t, "testdata/prices-b.yaml")
	l := newLedger(t)
	at := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	recs := []schema.Attempt{
		// $0.0000378 at A's (embedded) haiku price, $0.0000756 at B's doubled one.
		{AttemptID: "h", RequestID: "h", AttemptNo: 1, StartedAt: at, LatencyMS: 900, Provider: "anthropic",
			Model: "claude-haiku-5-5", Service: "router", Operation: "default", Status: schema.StatusOK, InputTokens: 333, OutputTokens: 9},
		// $0.001 + $0.000200 at A; unpriced at B.
		{AttemptID: "o", RequestID: "o", AttemptNo: 1, StartedAt: at, LatencyMS: 900, Provider: "acme",
			Model: "old-llm", Service: "router", Operation: "default", Status: schema.StatusOK, InputTokens: 1000, OutputTokens: 100},
		// Unpriced at A; $0.003 + $0.0015 at B.
		{AttemptID: "n", RequestID: "n", AttemptNo: 1, StartedAt: at, LatencyMS: 900, Provider: "acme",
			Model: "new-llm", Service: "router", Operation: "default", Status: schema.StatusOK, InputTokens: 1000, OutputTokens: 100},
	}
	l.ingestAll(t, "acme", catA, recs)
	rep, err := reprice.Run(ctx, l.st, catB, reprice.Options{From: at, To: at.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	want := reprice.Figures{Attempts: 3, Changed: 3, NewlyPriced: 1, NewlyUnpriced: 1, Unpriced: 1,
		Before: 37_800 + 1_200_000, After: 75_600 + 4_500_000, Delta: 75_600 + 4_500_000 - 37_800 - 1_200_000}
	if rep.Totals != want {
		t.Errorf("totals\n got %+v\nwant %+v", rep.Totals, want)
	}
	var buf bytes.Buffer
	if err := rep.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	wantText := `Repriced attempts that started in [2026-11-02T09:00:00Z, 2026-11-02T10:00:00Z).
Examined 3 attempts; changed 3: 1 newly priced, 1 newly unpriced, 1 unpriced now.
Cost of the priced attempts: $0.001238 before, $0.004576 after (+$0.003338).

PROVIDER   MODEL             ATTEMPTS  CHANGED  NEWLY PRICED  NEWLY UNPRICED  UNPRICED  BEFORE      AFTER       DELTA
acme       new-llm           1         1        1             0               0         $0.00       $0.0045     +$0.0045
acme       old-llm           1         1        0             1               1         $0.0012     $0.00       -$0.0012
anthropic  claude-haiku-5-5  1         1        0             0               0         $0.0000378  $0.0000756  +$0.0000378
`
	if buf.String() != wantText {
		t.Errorf("text:\n%s\nwant:\n%s", buf.String(), wantText)
	}
	l.checkRollups(t)
}

// TestBusy checks that a second reprice fails at once while one holds the lock, and that a dry run
// is not held up by it.
func TestBusy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger(t)
	cat := loadCatalog(t, "")
	tx, err := l.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(reprice.LockKey)); err != nil {
		t.Fatal(err)
	}
	opt := reprice.Options{From: dataStart, To: dataStart.Add(time.Hour)}
	if _, err := reprice.Run(ctx, l.st, cat, opt); !errors.Is(err, reprice.ErrBusy) {
		t.Errorf("reprice under the lock: %v, want ErrBusy", err)
	}
	opt.DryRun = true
	if _, err := reprice.Run(ctx, l.st, cat, opt); err != nil {
		t.Errorf("dry run under the lock: %v", err)
	}
}

// TestConcurrentIngest reprices while a writer (pricing with the old catalog, like a server not
// yet restarted) commits new attempts and redeliveries into the same hours: afterwards every rollup
// still equals its recomputation from raw, whichever attempts the reprice saw.
func TestConcurrentIngest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	catA, catB := loadCatalog(t, "testdata/prices-a.yaml"), loadCatalog(t, "testdata/prices-b.yaml")
	l := newLedger(t)
	first := records("first", 1500, dataStart, 3*time.Minute, catA, catB)
	l.ingestAll(t, "acme", catA, first)
	tz, _ := time.LoadLocation(zone)
	p, err := l.st.EnsureProject(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	w := ingest.NewWriter(l.st, ingest.CatalogPrice(catA), ingest.Options{Timezone: tz, Registerer: prometheus.NewRegistry(), MaxBatch: 50})
	defer w.Close(ctx)
	more := records("more", 1500, dataStart.Add(time.Minute), 3*time.Minute, catA, catB)
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g * 50; i < len(more); i += 150 {
				// new attempts and redeliveries of ones the reprice is rewriting
				batch := append(append([]schema.Attempt{}, more[i:min(i+50, len(more))]...), first[i:min(i+10, len(first))]...)
				if _, err := w.Submit(ctx, p.ID, batch); err != nil {
					t.Errorf("submit: %v", err)
					return
				}
			}
		}()
	}
	rep, err := reprice.Run(ctx, l.st, catB, reprice.Options{From: dataStart, To: dataStart.Add(100 * time.Hour), ChunkRows: 100})
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	// How many of the new attempts the reprice saw depends on timing; the ones committed before it
	// started it saw, and priced with B.
	if rep.Totals.Attempts < int64(len(first)) {
		t.Errorf("examined %d attempts, want at least the %d committed before", rep.Totals.Attempts, len(first))
	}
	want := costings(first, catA, catB, func(*schema.Attempt) bool { return true })
	var n int
	rows, _ := l.pool.Query(ctx, `SELECT a.attempt_id, a.cost_nanos, p.key FROM attempts a
		LEFT JOIN price_versions p ON p.id = a.price_id WHERE a.attempt_id LIKE 'first-%'`)
	var (
		id   string
		cost *int64
		key  *string
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &cost, &key}, func() error {
		n++
		w := want[id]
		if w.Priced != (cost != nil) || cost != nil && (money.Nanos(*cost) != w.Cost || *key != w.Version.Key) {
			t.Errorf("attempt %s: cost %v key %v, want %+v", id, cost, key, w)
		}
		cost, key = nil, nil
		return nil
	})
	if err != nil || n != len(first) {
		t.Fatalf("%d of %d first attempts: %v", n, len(first), err)
	}
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	l.checkRollups(t)
}

// BenchmarkReprice reprices 50,000 attempts back and forth between catalogs A and B (about 75% of
// them change each time) and reports attempts repriced per second.
func BenchmarkReprice(b *testing.B) {
	ctx := context.Background()
	cats := []*pricing.Catalog{loadCatalog(b, "testdata/prices-b.yaml"), loadCatalog(b, "testdata/prices-a.yaml")}
	pool := dbtest.New(b)
	st := store.New(pool)
	if err := st.SetSetting(ctx, "timezone", zone); err != nil {
		b.Fatal(err)
	}
	p, err := st.EnsureProject(ctx, "acme")
	if err != nil {
		b.Fatal(err)
	}
	tz, _ := time.LoadLocation(zone)
	w := ingest.NewWriter(st, ingest.CatalogPrice(cats[1]), ingest.Options{Timezone: tz, Registerer: prometheus.NewRegistry()})
	recs := records("bench", 50_000, dataStart, 5*time.Second, cats[1], cats[0])
	for i := 0; i < len(recs); i += 5000 {
		if _, err := w.Submit(ctx, p.ID, recs[i:i+5000]); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
	opt := reprice.Options{From: dataStart, To: dataStart.Add(7 * 24 * time.Hour)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := reprice.Run(ctx, st, cats[i%2], opt)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Totals.Attempts != int64(len(recs)) {
			b.Fatalf("examined %d", rep.Totals.Attempts)
		}
	}
	b.ReportMetric(float64(b.N*len(recs))/b.Elapsed().Seconds(), "attempts/s")
}
