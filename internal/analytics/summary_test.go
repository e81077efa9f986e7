package analytics_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/schema"
)

func f64(num, den int64) *float64    { v := float64(num) / float64(den); return &v }
func usd(n money.Nanos) *money.Nanos { return &n }
func str(s string) *string           { return &s }
func boolp(b bool) *bool             { return &b }

// latency is the Latency analytics must report for the latencies of succeeded attempts, each
// percentile the bucket midpoint of the observation of nearest rank (the list is sorted).
func latency(ms ...float64) *analytics.Latency {
	rank := func(q float64) float64 {
		i := int(q*float64(len(ms))+0.999999) - 1
		return bucketMid(ms[max(i, 0)])
	}
	var sum float64
	for _, v := range ms {
		sum += v
	}
	return &analytics.Latency{P50: rank(0.5), P95: rank(0.95), P99: rank(0.99), Mean: sum / float64(len(ms))}
}

// summaryLedger is a hand-built ledger of one hour (2026-10-05 10:00 UTC) whose every figure is
// worked out below.
func summaryLedger(t *testing.T) (*ledger, int64) {
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	at := day(2026, 10, 5, 10, time.UTC)
	l.add(p,
		// A: one clean call. cost 1000·100 + 100·500 = 150,000; the client agrees.
		newRec(at, "sonnet").tokens(1000, 100).clientCost("0.00015").done(),
		// B: rate limited (no tokens), timed out (500·100 + 10·500 = 55,000), then served by gpt-4o
		// as a fallback (500·100 + 50·500 = 75,000).
		newRec(at, "sonnet").request("B", 1).latency(50).fail(schema.ErrorRateLimited).done(),
		newRec(at, "sonnet").request("B", 2).latency(60000).tokens(500, 10).fail(schema.ErrorTimeout).done(),
		newRec(at, "gpt-4o").request("B", 3).latency(2000).tokens(500, 50).fallback("sonnet").done(),
		// C: a model without a price.
		newRec(at, "free-model").latency(300).tokens(100, 10).done(),
		// D: writes the cache: 200·100 + 1000·125 + 100·500 = 195,000 (170,000 without caching).
		newRec(at, "sonnet").tokens(200, 100).cache(1000, 0).done(),
		// E: reads it: 200·100 + 1000·10 + 100·500 = 80,000 (170,000 without); the client says
		// 100,000, more than 1% off.
		newRec(at, "sonnet").latency(4000).tokens(200, 100).cache(0, 1000).clientCost("0.0001").done(),
		// F: cancelled after 300·100 + 20·500 = 40,000 was spent.
		newRec(at, "sonnet").latency(500).tokens(300, 20).cancel().done(),
	)
	return l, p
}

// sonnetStats is the figures of sonnet's own traffic in summaryLedger.
func sonnetStats() analytics.Stats {
	return analytics.Stats{
		Attempts: 6, Requests: 5, AttemptsPerCall: f64(6, 5), Succeeded: 3,
		CostUSD: usd(520_000), InputTokens: 2200, OutputTokens: 330, CacheWriteTokens: 1000, CacheReadTokens: 1000,
		CacheHitRatio: f64(1000, 4200), CacheSavingsUSD: usd(585_000 - 520_000),
		ErrorRate: f64(2, 6), Errors: map[string]int64{"rate_limited": 1, "timeout": 1}, Cancelled: 1,
		RateLimitedShare: f64(1, 6), FallbackShare: f64(0, 3), WastedUSD: usd(95_000),
		LatencyMS: latency(1000, 1000, 4000), ClientCostMismatches: 1,
	}
}

func TestSummaryFigures(t *testing.T) {
	t.Parallel()
	l, p := summaryLedger(t)
	s := l.service(day(2026, 10, 6, 12, time.UTC))
	window := analytics.Filter{ProjectID: p, From: day(2026, 10, 5, 0, time.UTC), To: day(2026, 10, 6, 0, time.UTC)}
	total := analytics.Stats{
		Attempts: 8, Requests: 6, AttemptsPerCall: f64(8, 6), Succeeded: 5,
		CostUSD: usd(595_000), UnpricedAttempts: 1, InputTokens: 2800, OutputTokens: 390,
		CacheWriteTokens: 1000, CacheReadTokens: 1000, CacheHitRatio: f64(1000, 4800),
		CacheSavingsUSD: usd(65_000), ErrorRate: f64(2, 8), Errors: map[string]int64{"rate_limited": 1, "timeout": 1},
		Cancelled: 1, RateLimitedShare: f64(1, 8), FallbackShare: f64(1, 5), WastedUSD: usd(95_000),
		LatencyMS: latency(300, 1000, 1000, 2000, 4000), ClientCostMismatches: 1,
	}
	gpt := analytics.Stats{
		Attempts: 1, Succeeded: 1, CostUSD: usd(75_000), InputTokens: 500, OutputTokens: 50,
		CacheHitRatio: f64(0, 550), CacheSavingsUSD: usd(0), ErrorRate: f64(0, 1), Errors: map[string]int64{},
		RateLimitedShare: f64(0, 1), FallbackShare: f64(1, 1), WastedUSD: usd(0), LatencyMS: latency(2000),
	}
	free := analytics.Stats{
		Attempts: 1, Requests: 1, AttemptsPerCall: f64(1, 1), Succeeded: 1, UnpricedAttempts: 1,
		InputTokens: 100, OutputTokens: 10, CacheHitRatio: f64(0, 110), ErrorRate: f64(0, 1),
		Errors: map[string]int64{}, RateLimitedShare: f64(0, 1), FallbackShare: f64(0, 1), WastedUSD: usd(0),
		LatencyMS: latency(300),
	}
	chat := total
	cases := []struct {
		name    string
		filter  analytics.Filter
		groupBy []string
		total   analytics.Stats
		groups  []analytics.Group
	}{
		// The total alone; cost_usd leaves out the unpriced attempt and says so.
		{"total", window, nil, total, []analytics.Group{}},
		// Fallback attempts form their own group, keyed by the model they stood in for, and never
		// blend into gpt-4o's or sonnet's own figures; an all-unpriced model has cost_usd null.
		{"by model", window, []string{"model"}, total, []analytics.Group{
			{Key: analytics.Key{Model: str("free-model"), Fallback: boolp(false)}, Stats: free},
			{Key: analytics.Key{Model: str("gpt-4o"), Fallback: boolp(true), FallbackFrom: str("sonnet")}, Stats: gpt},
			{Key: analytics.Key{Model: str("sonnet"), Fallback: boolp(false)}, Stats: sonnetStats()},
		}},
		// Grouping by service includes every attempt, fallbacks too.
		{"by service", window, []string{"service"}, total, []analytics.Group{
			{Key: analytics.Key{Service: str("chat")}, Stats: chat},
		}},
		// A model filter narrows the total to that model, its fallback traffic elsewhere included.
		{"filtered", analytics.Filter{ProjectID: p, From: window.From, To: window.To, Model: "gpt-4o"}, nil, gpt, []analytics.Group{}},
		// A range that is not hour-aligned is rounded outward to whole hours.
		{"rounded", analytics.Filter{ProjectID: p, From: day(2026, 10, 5, 10, time.UTC).Add(20 * time.Minute),
			To: day(2026, 10, 5, 10, time.UTC).Add(40 * time.Minute)}, nil, total, []analytics.Group{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := s.Summary(context.Background(), c.filter, c.groupBy...)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Total, c.total) {
				t.Errorf("total:\n got %s\nwant %s", js(got.Total), js(c.total))
			}
			if !reflect.DeepEqual(got.Groups, c.groups) {
				t.Errorf("groups:\n got %s\nwant %s", js(got.Groups), js(c.groups))
			}
		})
	}
}

// TestSummaryRoundsRange checks the effective range echoed for a range that is not hour-aligned,
// and the default range: the last 7 local days, today included.
func TestSummaryRoundsRange(t *testing.T) {
	t.Parallel()
	l, p := summaryLedger(t)
	now := time.Date(2026, 10, 6, 12, 15, 0, 0, time.UTC)
	s := l.service(now)
	cases := []struct {
		name     string
		from, to time.Time
		wantFrom time.Time
		wantTo   time.Time
	}{
		// Rounded outward to whole hours.
		{"rounded", now.Add(-90 * time.Minute), now.Add(-10 * time.Minute), day(2026, 10, 6, 10, time.UTC), day(2026, 10, 6, 13, time.UTC)},
		// Nothing given: the last 7 days, today included, as whole days.
		{"default", time.Time{}, time.Time{}, day(2026, 9, 30, 0, time.UTC), day(2026, 10, 7, 0, time.UTC)},
	}
	for _, c := range cases {
		got, err := s.Summary(context.Background(), analytics.Filter{ProjectID: p, From: c.from, To: c.to})
		if err != nil {
			t.Fatal(err)
		}
		if !got.From.Equal(c.wantFrom) || !got.To.Equal(c.wantTo) {
			t.Errorf("%s: range [%v, %v), want [%v, %v)", c.name, got.From, got.To, c.wantFrom, c.wantTo)
		}
	}
}

// TestSummaryParamErrors checks that a question that cannot be answered names the parameter.
func TestSummaryParamErrors(t *testing.T) {
	t.Parallel()
	l, p := summaryLedger(t)
	s := l.service(day(2026, 10, 6, 12, time.UTC))
	from := day(2026, 10, 1, 0, time.UTC)
	cases := []struct {
		name    string
		f       analytics.Filter
		groupBy []string
		param   string
	}{
		{"unknown dimension", analytics.Filter{ProjectID: p}, []string{"colour"}, "group_by"},          // not in the whitelist
		{"twice", analytics.Filter{ProjectID: p}, []string{"model", "model"}, "group_by"},              // repeated
		{"day and hour", analytics.Filter{ProjectID: p}, []string{"day", "hour"}, "group_by"},          // exclusive
		{"backwards", analytics.Filter{ProjectID: p, From: from, To: from.Add(-time.Hour)}, nil, "to"}, // empty range
		{"too long", analytics.Filter{ProjectID: p, From: from.AddDate(-2, 0, 0), To: from}, nil, "from"},
		{"hours of a quarter", analytics.Filter{ProjectID: p, From: from.AddDate(0, -3, 0), To: from}, []string{"hour"}, "group_by"},
	}
	for _, c := range cases {
		_, err := s.Summary(context.Background(), c.f, c.groupBy...)
		var pe *analytics.ParamError
		if !errors.As(err, &pe) || pe.Param != c.param {
			t.Errorf("%s: error %v, want a ParamError on %s", c.name, err, c.param)
		}
	}
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestLatencyPercentiles checks percentiles merged across daily and hourly rollup rows against the
// exact nearest-rank percentiles of the raw latencies: each is the midpoint of the bucket of the
// true value, so within 2.2% of it. Failed attempts do not count.
func TestLatencyPercentiles(t *testing.T) {
	t.Parallel()
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	rng := rand.New(rand.NewPCG(7, 7))
	start := day(2026, 10, 1, 6, time.UTC)
	var recs []schema.Attempt
	var oks []float64
	for i := range 900 {
		at := start.Add(time.Duration(i) * 5 * time.Minute) // 75 hours: three local days and edges
		ms := int64(math.Exp(6.5 + 1.2*rng.NormFloat64()))
		r := newRec(at, "sonnet").latency(ms)
		if i%10 == 0 {
			r = r.latency(ms * 50).fail(schema.ErrorTimeout)
		} else {
			oks = append(oks, float64(ms))
		}
		recs = append(recs, r.done())
	}
	l.add(p, recs...)
	slices.Sort(oks)
	got, err := l.service(start.AddDate(0, 0, 5)).Summary(context.Background(),
		analytics.Filter{ProjectID: p, From: start, To: start.Add(75 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	lat := got.Total.LatencyMS
	for _, c := range []struct {
		name string
		q    float64
		got  float64
	}{{"p50", 0.5, lat.P50}, {"p95", 0.95, lat.P95}, {"p99", 0.99, lat.P99}} {
		exact := oks[int(math.Ceil(c.q*float64(len(oks))))-1]
		if c.got != bucketMid(exact) || math.Abs(c.got/exact-1) > 0.022 {
			t.Errorf("%s = %v, exact %v (bucket midpoint %v)", c.name, c.got, exact, bucketMid(exact))
		}
	}
}

// TestSummaryUsageUnknown checks that attempts whose answer carried no usage are counted apart,
// stay out of cost_usd, and never make a group's cost $0: a model with nothing but such attempts
// has cost_usd null, like an unpriced one.
func TestSummaryUsageUnknown(t *testing.T) {
	t.Parallel()
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	at := day(2026, 10, 5, 10, time.UTC)
	unknown := func(model string) schema.Attempt {
		a := newRec(at, model).done()
		a.UsageUnknown = true
		return a
	}
	l.add(p,
		newRec(at, "sonnet").tokens(1000, 100).done(), // 150,000
		unknown("sonnet"),
		unknown("gpt-4o"), unknown("gpt-4o"),
		newRec(at, "free-model").tokens(100, 10).done(),
	)
	s := l.service(day(2026, 10, 6, 12, time.UTC))
	got, err := s.Summary(context.Background(), analytics.Filter{ProjectID: p, From: day(2026, 10, 5, 0, time.UTC), To: day(2026, 10, 6, 0, time.UTC)}, "model")
	if err != nil {
		t.Fatal(err)
	}
	if got.Total.UsageUnknownAttempts != 3 || got.Total.UnpricedAttempts != 1 || got.Total.CostUSD == nil || *got.Total.CostUSD != 150_000 {
		t.Errorf("total: %s", js(got.Total))
	}
	for _, g := range got.Groups {
		if *g.Key.Model == "gpt-4o" && (g.CostUSD != nil || g.UsageUnknownAttempts != 2 || g.UnpricedAttempts != 0) {
			t.Errorf("gpt-4o, only usage unknown: %s", js(g.Stats))
		}
	}
	proj, err := s.Projection(context.Background(), p, day(2026, 10, 6, 12, time.UTC), "")
	if err != nil {
		t.Fatal(err)
	}
	if proj.UsageUnknownAttempts != 3 || proj.UnpricedAttempts != 1 {
		t.Errorf("projection counts %d usage unknown, %d unpriced; want 3, 1", proj.UsageUnknownAttempts, proj.UnpricedAttempts)
	}
}
