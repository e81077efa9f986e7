package analytics_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/rollup"
	"github.com/ledgerd/ledgerd/internal/seed"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/pricing"
)

// synthLedger is a synthetic ledger loaded by gen, with the Service that reads it.
type synthLedger struct {
	st      *store.Store
	svc     *analytics.Service
	project int64
	tz      *time.Location
	now     time.Time
}

// loadSynth loads n synthetic records over the 30 days before now, in New York, priced by the
// embedded catalog.
func loadSynth(tb testing.TB, n int, now time.Time) synthLedger {
	tb.Helper()
	return loadSeeded(tb, seed.Options{Records: n, Seed: 42, End: now, Days: 30})
}

// loadSeeded loads the synthetic ledger opt describes (its End the Service's now), in New York,
// priced by the embedded catalog.
func loadSeeded(tb testing.TB, opt seed.Options) synthLedger {
	tb.Helper()
	tz := mustZone(tb, "America/New_York")
	catalog, err := pricing.Load("")
	if err != nil {
		tb.Fatal(err)
	}
	st := store.New(dbtest.New(tb))
	opt.Timezone, opt.Price = tz, ingest.CatalogPrice(catalog)
	res, err := seed.Load(context.Background(), st, opt)
	if err != nil {
		tb.Fatal(err)
	}
	now := opt.End
	return synthLedger{st: st, svc: analytics.New(analytics.Options{Pool: st.Pool, Timezone: tz, Now: func() time.Time { return now }}),
		project: res.Projects[0].ID, tz: tz, now: now}
}

// firstSeries scans the columns cols of the first of the ledger's series that where (a condition,
// then its ORDER BY) picks into dst.
func (l synthLedger) firstSeries(t *testing.T, cols, where string, dst ...any) {
	t.Helper()
	if err := l.st.Pool.QueryRow(context.Background(), `SELECT `+cols+` FROM series WHERE project_id = $1 AND `+where+` LIMIT 1`,
		l.project).Scan(dst...); err != nil {
		t.Fatal(err)
	}
}

// rollupKey renders a group's key as rawKeys does.
func rollupKey(k analytics.Key) string {
	model := ""
	if k.Model != nil {
		from := ""
		if k.FallbackFrom != nil {
			from = *k.FallbackFrom
		}
		model = fmt.Sprintf("%s|%v|%s", *k.Model, *k.Fallback, from)
	}
	switch {
	case k.Day != "" && model != "":
		return k.Day + "|" + model
	case k.Day != "":
		return k.Day
	case k.Service != nil:
		return *k.Service
	}
	return model
}

// TestRollupsMatchRaw checks, on a synthetic month of varied traffic whose hourly detail older
// than rollup.HourlyKeep was pruned, that every answer the rollups give equals the one GROUP BY
// over the raw attempts gives: counts and money exactly, percentiles as the midpoint of the true
// value's bucket.
func TestRollupsMatchRaw(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 11, 4, 15, 30, 0, 0, mustZone(t, "America/New_York")) // just after DST ends
	l := loadSynth(t, 20_000, now)
	if n, err := rollup.Prune(ctx, l.st.Pool, now); err != nil || n == 0 {
		t.Fatalf("pruned %d hourly rows: %v", n, err)
	}
	cases := []struct {
		name     string
		from, to time.Time
		groupBy  string
		// wantFrom is the start of the range answered, when not from rounded to its hour.
		wantFrom time.Time
	}{
		{"default range by model", time.Time{}, time.Time{}, "model", time.Date(2026, 10, 29, 0, 0, 0, 0, l.tz)}, // today from hourly rows
		// Edges on both sides, the older one from the hours kept by model.
		{"days and models", now.AddDate(0, 0, -12).Add(-7 * time.Hour), now.Add(-2 * time.Hour), "day,model", time.Time{}},
		// A start older than the hours kept by service: the range starts at that day's midnight.
		{"services over the month", now.AddDate(0, 0, -30), now, "service", time.Date(2026, 10, 5, 0, 0, 0, 0, l.tz)},
		{"total", now.AddDate(0, 0, -3), now, "", time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var dims []string
			switch c.groupBy {
			case "day,model":
				dims = []string{"day", "model"}
			case "":
			default:
				dims = []string{c.groupBy}
			}
			got, err := l.svc.Summary(ctx, analytics.Filter{ProjectID: l.project, From: c.from, To: c.to}, dims...)
			if err != nil {
				t.Fatal(err)
			}
			wantFrom := c.wantFrom
			if wantFrom.IsZero() {
				wantFrom = c.from.Truncate(time.Hour)
			}
			if !got.From.Equal(wantFrom) {
				t.Errorf("answered from %v, want %v", got.From, wantFrom)
			}
			raw, err := rawSummary(ctx, l.st.Pool, l.project, got.From, got.To, l.tz, c.groupBy)
			if err != nil {
				t.Fatal(err)
			}
			groups := got.Groups
			if c.groupBy == "" {
				groups = []analytics.Group{{Stats: got.Total}}
			}
			if len(groups) != len(raw) || len(raw) == 0 {
				t.Fatalf("%d groups, raw %d", len(groups), len(raw))
			}
			for _, g := range groups {
				k := rollupKey(g.Key)
				checkGroup(t, k, g.Stats, raw[k])
			}
		})
	}
	t.Run("plans agree", func(t *testing.T) {
		t.Parallel()
		var model, provider, service, operation, tenant string
		l.firstSeries(t, "model, provider, service, operation, tenant", "fallback_from = '' ORDER BY model, service, tenant DESC",
			&model, &provider, &service, &operation, &tenant)
		ranges := [][2]time.Time{{}, {now.AddDate(0, 0, -12).Add(-7 * time.Hour), now.Add(-2 * time.Hour)},
			{time.Date(2026, 10, 10, 0, 0, 0, 0, l.tz), time.Date(2026, 11, 2, 0, 0, 0, 0, l.tz)}}
		filters := []analytics.Filter{{}, {Model: model}, {Provider: provider}, {Model: model, Provider: provider},
			{Service: service}, {Service: service, Operation: operation}, {Tenant: tenant}, {Tenant: tenant, Model: model},
			{Tenant: tenant, Service: service}}
		groupings := [][]string{nil, {"model"}, {"provider"}, {"day", "model"}, {"day"}, {"hour", "provider"},
			{"service"}, {"day", "service", "operation"}, {"tenant"}, {"day", "tenant"}, {"tenant", "model"},
			{"day", "tenant", "service"}}
		for _, r := range ranges {
			for _, f := range filters {
				for _, g := range groupings {
					f.ProjectID, f.From, f.To = l.project, r[0], r[1]
					got, err := l.svc.Summary(ctx, f, g...)
					if err != nil {
						t.Fatal(err)
					}
					want, err := l.svc.SummaryRaw(ctx, f, g...)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) || got.Total.Attempts == 0 {
						t.Errorf("%v to %v, %+v, by %v: from the rollups %d groups, %d attempts; raw %d groups, %d attempts",
							r[0], r[1], f, g, len(got.Groups), got.Total.Attempts, len(want.Groups), want.Total.Attempts)
					}
				}
			}
		}
	})
	// Minutes are counted from the raw attempts by SQL of their own (rollup.RawRowsSQL and
	// RawHistSQL); the same hours from the rollups give the same totals, percentiles and calls by
	// attempts included, for any grouping and filter.
	t.Run("minutes agree with hours", func(t *testing.T) {
		t.Parallel()
		var model, tenant string
		l.firstSeries(t, "model, tenant", "tenant <> '' ORDER BY model, tenant", &model, &tenant)
		to := now.Truncate(time.Hour)
		for _, f := range []analytics.Filter{{}, {Model: model}, {Tenant: tenant}, {WithAttempts: true}} {
			for _, g := range [][]string{{"minute"}, {"minute", "model"}, {"minute", "tenant", "service"}} {
				for _, step := range []time.Duration{time.Minute, 5 * time.Minute} {
					f.ProjectID, f.From, f.To, f.Step = l.project, to.Add(-6*time.Hour), to, step
					got, err := l.svc.Summary(ctx, f, g...)
					if err != nil {
						t.Fatal(err)
					}
					f.Step = 0
					want, err := l.svc.Summary(ctx, f, "hour")
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got.Total, want.Total) || got.Total.Attempts == 0 || !got.From.Equal(want.From) {
						t.Errorf("%+v by %v: by minute %s, by hour %s", f, g, js(got.Total), js(want.Total))
					}
				}
			}
		}
	})
	t.Run("top", func(t *testing.T) {
		t.Parallel()
		var model, service string
		l.firstSeries(t, "model, service", "tenant <> '' ORDER BY model, service", &model, &service)
		for _, f := range []analytics.Filter{{}, {Model: model}, {Service: service},
			{From: now.AddDate(0, 0, -30), To: now}, {From: now.Add(-5 * time.Hour), To: now, Model: model}} {
			for _, dim := range []string{"tenant", "service", "operation", "model", "day"} {
				for _, n := range []int{1, 3, 1000} {
					f.ProjectID = l.project
					want, err := l.svc.Summary(ctx, f, dim)
					if err != nil {
						t.Fatal(err)
					}
					want.Top(n)
					got, err := l.svc.SummaryTop(ctx, f, n, dim)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) || len(got.Groups) == 0 {
						t.Errorf("%+v by %s, top %d: %d of %d groups, total %d attempts; want %d of %d, %d attempts",
							f, dim, n, len(got.Groups), *got.GroupsTotal, got.Total.Attempts, len(want.Groups), *want.GroupsTotal, want.Total.Attempts)
					}
				}
				if dim == "day" || dim == "model" { // ranked as Summary then Top
					continue
				}
				// What the groups are ranked by is each one's cost, exactly (tenants: from the
				// spend blocks): an error that leaves a few groups' order alone shows here.
				costs, err := l.svc.RankCosts(ctx, f, dim)
				if err != nil {
					t.Fatal(err)
				}
				all, err := l.svc.Summary(ctx, f, dim)
				if err != nil {
					t.Fatal(err)
				}
				want := map[string]int64{}
				for _, g := range all.Groups {
					key := map[string]*string{"tenant": g.Key.Tenant, "service": g.Key.Service, "operation": g.Key.Operation}[dim]
					if g.CostUSD != nil {
						want[*key] = int64(*g.CostUSD)
					} else {
						want[*key] = 0
					}
				}
				if !reflect.DeepEqual(costs, want) {
					t.Errorf("%+v by %s: ranked on costs %v, want %v", f, dim, costs, want)
				}
			}
		}
	})
	t.Run("projection", func(t *testing.T) {
		t.Parallel()
		p, err := l.svc.Projection(ctx, l.project, now, "")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Date(2026, 11, 1, 0, 0, 0, 0, l.tz)
		raw, _, err := rawProjection(ctx, l.st.Pool, l.project, start, start.AddDate(0, 1, 0), l.tz)
		if err != nil {
			t.Fatal(err)
		}
		var mtd int64
		for _, c := range raw {
			mtd += c
		}
		if int64(p.MonthToDateUSD) != mtd || mtd == 0 {
			t.Errorf("month to date %d, raw %d", p.MonthToDateUSD, mtd)
		}
		for _, d := range p.Days {
			day, _ := time.Parse(time.DateOnly, d.Day)
			if int64(d.CostUSD) != raw[day] {
				t.Errorf("%s: %d, raw %d", d.Day, d.CostUSD, raw[day])
			}
		}
	})
	t.Run("cache", func(t *testing.T) {
		t.Parallel()
		rows, err := l.svc.Cache(ctx, analytics.Filter{ProjectID: l.project}, 0)
		if err != nil {
			t.Fatal(err)
		}
		from, to := time.Date(2026, 10, 29, 0, 0, 0, 0, l.tz), time.Date(2026, 11, 5, 0, 0, 0, 0, l.tz) // the default range
		raw, err := rawCache(ctx, l.st.Pool, l.project, from, to)
		if err != nil {
			t.Fatal(err)
		}
		broken, models := 0, 0
		for _, r := range rows {
			if r.PromptHash == nil {
				models++
			}
			h := "*"
			if r.PromptHash != nil {
				h = *r.PromptHash
			}
			k := cacheKey(r.Service, r.Operation, r.Provider, r.Model, r.Fallback, h)
			w, ok := raw[k]
			got := rawCacheRow{r.Calls, r.CacheWriteCalls, r.CacheReadCalls, r.CacheWriteTokens, r.CacheReadTokens,
				int64(*r.CostUSD), int64(*r.NoCacheCostUSD), r.PromptHashes, r.SingleUseHashes}
			if !ok || got != w {
				t.Errorf("%s: %+v, raw %+v", k, got, w)
			}
			if r.Broken {
				broken++
			}
		}
		if broken == 0 {
			t.Errorf("no broken cache among %d rows; the ledger has two", len(rows))
		}
		rawModels := 0
		for k, r := range raw {
			if strings.HasSuffix(k, "|*") && r.writeCalls+r.readCalls > 0 {
				rawModels++
			}
		}
		if models != rawModels {
			t.Errorf("%d models used the cache, raw %d", models, rawModels)
		}
	})
}

func checkGroup(t *testing.T, key string, s analytics.Stats, r rawGroup) {
	t.Helper()
	var errs int64
	for _, n := range s.Errors {
		errs += n
	}
	cost := int64(-1)
	if s.CostUSD != nil {
		cost = int64(*s.CostUSD)
	}
	wantCost := r.cost
	if r.unpriced == r.attempts {
		wantCost = -1
	}
	if s.Attempts != r.attempts || s.Requests != r.requests || s.Succeeded != r.ok || errs != r.errors ||
		s.UnpricedAttempts != r.unpriced || cost != wantCost || s.InputTokens != r.input || s.CacheReadTokens != r.cacheRead {
		t.Errorf("%s: attempts %d requests %d ok %d errors %d unpriced %d cost %d; raw %+v", key,
			s.Attempts, s.Requests, s.Succeeded, errs, s.UnpricedAttempts, cost, r)
	}
	if s.WastedUSD != nil && int64(*s.WastedUSD) != r.wasted || s.CacheSavingsUSD != nil && int64(*s.CacheSavingsUSD) != r.nocache-r.cost {
		t.Errorf("%s: wasted %v savings %v; raw wasted %d savings %d", key, s.WastedUSD, s.CacheSavingsUSD, r.wasted, r.nocache-r.cost)
	}
	if (s.LatencyMS == nil) != (r.p50 == nil) {
		t.Fatalf("%s: latency %v, raw p50 %v", key, s.LatencyMS, r.p50)
	}
	if s.LatencyMS != nil {
		for _, p := range []struct {
			name      string
			got, want float64
		}{{"p50", s.LatencyMS.P50, *r.p50}, {"p95", s.LatencyMS.P95, *r.p95}, {"p99", s.LatencyMS.P99, *r.p99}} {
			if p.got != bucketMid(p.want) {
				t.Errorf("%s: %s %v, raw %v (bucket midpoint %v)", key, p.name, p.got, p.want, bucketMid(p.want))
			}
		}
	}
}
