package ingest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/schema"
)

// variedBatch returns n records covering what the rollups distinguish: statuses and error
// classes, fallbacks, unpriced models, client costs that mismatch ledgerd's by more than 1% and
// less, cache writes and reads, prompt hashes, latencies 0, 1, 2 and huge, and start times over
// 48 hours from 2026-10-31 12:00 UTC: a UTC month boundary, local midnights in Asia/Kolkata
// (18:30 UTC) and America/Los_Angeles, and the end of US daylight saving time (2026-11-01).
func variedBatch(n int) []schema.Attempt {
	rng := rand.New(rand.NewPCG(7, 11))
	base := time.Date(2026, 10, 31, 12, 0, 0, 0, time.UTC)
	edges := []time.Time{
		time.Date(2026, 10, 31, 18, 29, 59, 999999000, time.UTC), // last instant of Oct 31 in Kolkata
		time.Date(2026, 10, 31, 18, 30, 0, 0, time.UTC),          // first instant of Nov 1 in Kolkata
		time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),             // first instant of November (UTC)
		time.Date(2026, 11, 1, 6, 59, 59, 999999000, time.UTC),   // last instant of Oct 31 in Los Angeles
		time.Date(2026, 11, 1, 7, 0, 0, 0, time.UTC),             // first instant of Nov 1 in Los Angeles
		time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC),             // first instant of Nov 2 there (PST)
	}
	latencies := []int64{0, 1, 2, 3, 250, 1000, 2_000_000_000}
	models := []string{"claude-haiku-5-5", "claude-opus-5", "free-model"}
	classes := []schema.ErrorClass{schema.ErrorRateLimited, schema.ErrorTimeout, schema.ErrorServer, schema.ErrorOverloaded}
	recs := make([]schema.Attempt, n)
	for i := range recs {
		at := base.Add(time.Duration(rng.Int64N(int64(48 * time.Hour))))
		if i < len(edges) {
			at = edges[i]
		}
		a := schema.Attempt{AttemptID: fmt.Sprintf("v%d", i), RequestID: fmt.Sprintf("q%d", i/2),
			AttemptNo: 1 + rng.IntN(3), StartedAt: at, LatencyMS: latencies[rng.IntN(len(latencies))],
			Provider: "anthropic", Model: models[rng.IntN(len(models))], Service: []string{"router", "search"}[rng.IntN(2)],
			Operation: "default", Tenant: []string{"", "t1"}[rng.IntN(2)], Status: schema.StatusOK,
			InputTokens: rng.Int64N(5000), OutputTokens: rng.Int64N(800), ReasoningTokens: rng.Int64N(3) * 100}
		if i%9 == 0 {
			a.LatencyMS += rng.Int64N(100_000)
		}
		switch rng.IntN(10) {
		case 0, 1:
			a.Status, a.ErrorClass = schema.StatusError, classes[rng.IntN(len(classes))]
		case 2:
			a.Status, a.ErrorClass = schema.StatusCancelled, schema.ErrorCancelled
		}
		if rng.IntN(8) == 0 {
			a.Fallback, a.FallbackFrom = true, "claude-opus-5"
		}
		if rng.IntN(3) == 0 {
			a.CacheWriteTokens = 1 + rng.Int64N(2000)
			a.CacheWrite1hTokens = rng.Int64N(2) * 500
		}
		if rng.IntN(3) == 0 {
			a.CacheReadTokens = 1 + rng.Int64N(4000)
		}
		switch rng.IntN(6) {
		case 0: // a stable prompt
			a.PromptHash = []string{"p1", "p2"}[rng.IntN(2)]
		case 1: // a new prompt on every call: single-use hashes
			a.PromptHash = fmt.Sprintf("u%d", i)
		case 2: // a few calls each, in different commits and months: single-use calls move
			a.PromptHash = fmt.Sprintf("r%d", i%50)
		}
		if i%4 == 1 { // the columns no rollup reads, stored as sent
			a.HTTPStatus, a.RetryAfterMS, a.ProviderRequestID, a.Batch = 529, int64(i)*7, fmt.Sprintf("msg_%d", i), true
			a.Metadata = map[string]string{"region": "eu-west", "note": fmt.Sprintf("ünï \"q\" %d", i)}
		}
		if i%5 == 2 { // an org, and the limits its provider reported (one not, one only a reset)
			a.Org = []string{"org-a", "org-b"}[i%2]
			a.RateLimits = &schema.RateLimits{
				Requests:     schema.RateLimit{Limit: 50, Remaining: int64(i % 51), Reset: at.Add(time.Duration(i) * time.Millisecond)},
				Tokens:       schema.RateLimit{Limit: 40_000, Remaining: int64(i * 37 % 40_001)},
				OutputTokens: schema.RateLimit{Reset: at.Add(time.Second)},
			}
		}
		if i%11 == 3 { // an answer without usage: no counts, never priced
			a.UsageUnknown = true
			a.InputTokens, a.OutputTokens, a.ReasoningTokens, a.CacheWriteTokens, a.CacheWrite1hTokens, a.CacheReadTokens = 0, 0, 0, 0, 0, 0
		}
		cost := flatPrice(&a).Cost
		switch rng.IntN(4) {
		case 1: // agrees with ledgerd's
			a.CostUSD = &cost
		case 2: // 0.5% off: not a mismatch
			c := cost + cost/200
			a.CostUSD = &c
		case 3: // 2% off: a mismatch (unless unpriced)
			c := cost + cost/50 + 1
			a.CostUSD = &c
		}
		recs[i] = a
	}
	return recs
}

// TestFastPathMatchesExact ingests the same varied batch by the fast path (COPY, rollups summed in
// Go) into one database and by the exact path (forced by a record already stored) into another, in
// two timezones, and requires identical rollups; and that analytics.Rebuild, counting from the raw
// attempts with the SQL expressions, changes nothing. The fast path's deltas are folded after each
// commit, the exact path's all three commits' at once, so the fold is checked both ways too.
func TestFastPathMatchesExact(t *testing.T) {
	t.Parallel()
	for _, zone := range []string{
		"Asia/Kolkata",        // a half-hour offset: local midnight is not on a UTC hour
		"America/Los_Angeles", // daylight saving ends within the batch
	} {
		t.Run(zone, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			tz, err := time.LoadLocation(zone)
			if err != nil {
				t.Fatal(err)
			}
			recs := variedBatch(600)
			const commits = 3
			stored := attempt("stored", time.Date(2026, 10, 31, 20, 0, 0, 0, time.UTC), 1, schema.StatusOK)
			minutesFrom := time.Date(2026, 11, 1, 0, 30, 0, 0, time.UTC)
			cases := []struct {
				name      string
				extra     []schema.Attempt // added to each commit
				want      ingest.Result
				wantExact float64
				foldEach  bool // fold after each commit, rather than all three commits' deltas at once on Close
			}{
				// Every record new: one COPY per commit.
				{"fast", nil, ingest.Result{Accepted: len(recs)}, 0, true},
				// The stored record again makes the COPY fail: the exact path inserts the rest.
				{"exact", []schema.Attempt{stored}, ingest.Result{Accepted: len(recs), Duplicates: commits}, commits, false},
			}
			dumps := make([]string, len(cases))
			var fastPool *pgxpool.Pool
			for i, c := range cases {
				pool := dbtest.New(t)
				st := store.New(pool)
				// The 5-minute rollup starts within the batch's two days.
				if err := st.SetSetting(ctx, "minutes_from", minutesFrom.Format(time.RFC3339)); err != nil {
					t.Fatal(err)
				}
				reg := prometheus.NewRegistry()
				w := ingest.NewWriter(st, flatPrice, ingest.Options{Timezone: tz, Registerer: reg})
				p, err := st.EnsureProject(ctx, "acme")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := w.Submit(ctx, p.ID, []schema.Attempt{stored}); err != nil {
					t.Fatal(err)
				}
				// Three commits in a row, so that later calls find the hashes of earlier ones.
				var got ingest.Result
				for k := range commits {
					part := recs[k*len(recs)/commits : (k+1)*len(recs)/commits]
					res, err := w.Submit(ctx, p.ID, append(append([]schema.Attempt(nil), part...), c.extra...))
					if err != nil {
						t.Fatalf("%s: %v", c.name, err)
					}
					got.Accepted += res.Accepted
					got.Duplicates += res.Duplicates
					if c.foldEach {
						if err := w.Sync(ctx); err != nil {
							t.Fatal(err)
						}
					}
				}
				if err := w.Close(ctx); err != nil {
					t.Fatal(err)
				}
				if got.Accepted != c.want.Accepted || got.Duplicates != c.want.Duplicates {
					t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
				}
				if n := counter(t, reg, "ledgerd_writer_exact_flushes_total"); n != c.wantExact {
					t.Errorf("%s: %v exact flushes, want %v", c.name, n, c.wantExact)
				}
				var hourly, daily int64
				if err := pool.QueryRow(ctx, `SELECT (SELECT sum(attempts) FROM rollup_hourly), (SELECT sum(attempts) FROM rollup_daily)`).Scan(&hourly, &daily); err != nil {
					t.Fatal(err)
				}
				if want := int64(len(recs) + 1); hourly != want || daily != want {
					t.Errorf("%s: rollups count %d hourly, %d daily attempts; want %d", c.name, hourly, daily, want)
				}
				// rollup_minute5 holds the attempts from minutes_from on, and nothing before.
				var minute, since int64
				if err := pool.QueryRow(ctx, `SELECT (SELECT coalesce(sum(attempts), 0) FROM rollup_minute5),
					(SELECT count(*) FROM attempts WHERE started_at >= $1)`, minutesFrom).Scan(&minute, &since); err != nil {
					t.Fatal(err)
				}
				if minute != since || since == 0 || since == int64(len(recs)+1) {
					t.Errorf("%s: rollup_minute5 counts %d attempts, want the %d from %v on (of %d)", c.name, minute, since, minutesFrom, len(recs)+1)
				}
				dumps[i] = dumpLedger(t, pool)
				if c.name == "fast" {
					fastPool = pool
				}
			}
			for _, empty := range []string{"rollup_load_minute: 0 rows", "rollup_load_peaks: 0 rows", "rollup_minute5: 0 rows"} {
				if strings.Contains(dumps[0], empty) {
					t.Fatalf("the fast path left a rollup empty: %s", empty)
				}
			}
			if dumps[0] != dumps[1] {
				t.Errorf("fast and exact paths wrote different rollups:\n%s", diffLines(dumps[0], dumps[1]))
			}
			if _, err := analytics.Rebuild(ctx, fastPool, tz); err != nil {
				t.Fatal(err)
			}
			if rebuilt := dumpLedger(t, fastPool); rebuilt != dumps[0] {
				t.Errorf("rebuild from raw attempts changed the fast path's rollups:\n%s", diffLines(dumps[0], rebuilt))
			}
		})
	}
}

// dumpLedger renders the stored attempts, the rollup tables and cache_prefixes as sorted text,
// series named rather than numbered.
func dumpLedger(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var out []string
	// A cache row emptied by moves equals no row; cache_prefixes' sums of a hash's only call mean
	// nothing once it has more.
	const join = "JOIN series s ON s.project_id = r.project_id AND s.id = r.series_id"
	// The narrow daily rollups hold their series columns themselves.
	const noSeries = "CROSS JOIN (SELECT NULL::text AS tenant, NULL AS service, NULL AS operation, NULL AS provider, " +
		"NULL AS model, NULL AS fallback_from) s"
	for _, q := range []struct{ table, row, join, where string }{
		// The stored attempts too: the fast path's COPY encoder and the exact path's arrays must store
		// the same values.
		{"attempts", "to_jsonb(r) - 'series_id' - 'price_id' - 'received_at', pv.key", join + " LEFT JOIN price_versions pv ON pv.id = r.price_id", "TRUE"},
		{"rollup_hourly", "to_jsonb(r) - 'series_id' - 'latency_hist', r.latency_hist::text", join, "TRUE"},
		{"rollup_daily", "to_jsonb(r) - 'series_id' - 'latency_hist', r.latency_hist::text", join, "TRUE"},
		{"rollup_minute5", "to_jsonb(r) - 'series_id' - 'latency_hist', r.latency_hist::text", join, "TRUE"},
		{"rollup_daily_model", "to_jsonb(r) - 'latency_hist', r.latency_hist::text", noSeries, "TRUE"},
		{"rollup_daily_service", "to_jsonb(r) - 'latency_hist', r.latency_hist::text", noSeries, "TRUE"},
		{"rollup_daily_tenant", "to_jsonb(r) - 'latency_hist', r.latency_hist::text", noSeries, "TRUE"},
		{"rollup_cache_hourly", "to_jsonb(r) - 'series_id'", join, "r.calls <> 0"},
		{"rollup_load_minute", "to_jsonb(r)", noSeries, "TRUE"},
		{"rollup_model_minute", "to_jsonb(r)", noSeries, "TRUE"},
		{"rollup_tenant_spend", "to_jsonb(r)", noSeries, "TRUE"},
		{"rollup_tenant_blocks", "to_jsonb(r) - 'latency_hist', r.latency_hist::text", noSeries, "TRUE"},
		{"rollup_load_peaks", "to_jsonb(r)", noSeries, "TRUE"},
		{"cache_prefixes", "CASE WHEN r.calls = 1 THEN to_jsonb(r) - 'series_id' ELSE jsonb_build_object('month', r.month, " +
			"'prompt_hash', r.prompt_hash, 'calls', r.calls) END", "LEFT " + join + " AND r.calls = 1", "TRUE"},
	} {
		var rows []string
		sql := fmt.Sprintf(`SELECT coalesce(array_agg(line ORDER BY line), '{}') FROM (
				SELECT concat_ws(' ', s.tenant, s.service, s.operation, s.provider, s.model, s.fallback_from, %s) AS line
				FROM %s r %s WHERE %s) d`, q.row, q.table, q.join, q.where)
		if err := pool.QueryRow(context.Background(), sql).Scan(&rows); err != nil {
			t.Fatalf("dump %s: %v", q.table, err)
		}
		out = append(out, fmt.Sprintf("%s: %d rows", q.table, len(rows)))
		out = append(out, rows...)
	}
	return strings.Join(out, "\n")
}

// diffLines lists the lines of a and b that the other lacks (at most 20).
func diffLines(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ina, inb := in(a), in(b)
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if !inb[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !ina[l] {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out[:min(len(out), 20)], "\n")
}

// counter reads a counter from a registry.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	v, _ := gathered(t, reg, name)
	return v
}

// gathered returns the value of the counter name, or the sample count of the histogram name, as
// reg exposes it.
func gathered(t *testing.T, reg *prometheus.Registry, name string) (counter float64, samples uint64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			return m.GetCounter().GetValue(), m.GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0, 0
}
