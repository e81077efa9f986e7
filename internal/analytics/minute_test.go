package analytics_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/synth"
	"github.com/ledgerd/ledgerd/schema"
)

// TestSummaryByMinute checks minute groups, counted from the raw attempts: each attempt in the
// minute (or five) it started in, the range rounded outward to whole steps, and the bounds.
func TestSummaryByMinute(t *testing.T) {
	t.Parallel()
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	ten := day(2026, 10, 5, 10, time.UTC)
	at := func(m, s int) time.Time { return ten.Add(time.Duration(m)*time.Minute + time.Duration(s)*time.Second) }
	l.add(p,
		newRec(at(0, 30), "sonnet").tokens(1000, 0).done(),                     // 100,000
		newRec(at(3, 59), "sonnet").tokens(2000, 0).done(),                     // 200,000
		newRec(at(7, 0), "sonnet").tokens(4000, 0).fail("server_error").done(), // 400,000
		newRec(at(61, 0), "sonnet").tokens(8000, 0).done(),                     // outside the range
	)
	s := l.service(day(2026, 10, 6, 0, time.UTC))
	type point struct {
		minute time.Time
		cost   int64
		errs   int64
	}
	cases := []struct {
		name     string
		from, to time.Time
		step     time.Duration
		want     []point
	}{
		// One group per minute that has attempts.
		{"minutes", ten, ten.Add(time.Hour), 0, []point{{at(0, 0), 100_000, 0}, {at(3, 0), 200_000, 0}, {at(7, 0), 400_000, 1}}},
		// Five-minute steps: 10:00 holds 10:00:30 and 10:03:59.
		{"five minutes", ten, ten.Add(time.Hour), 5 * time.Minute, []point{{at(0, 0), 300_000, 0}, {at(5, 0), 400_000, 1}}},
		// A range inside minutes is rounded outward to whole steps: [10:03:10, 10:06:50) reads
		// 10:03 to 10:07, not 10:07 itself.
		{"rounded", at(3, 10), at(6, 50), 0, []point{{at(3, 0), 200_000, 0}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := s.Summary(context.Background(), analytics.Filter{ProjectID: p, From: c.from, To: c.to, Step: c.step}, analytics.ByMinute)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Groups) != len(c.want) {
				t.Fatalf("%d groups, want %d: %s", len(got.Groups), len(c.want), js(got.Groups))
			}
			for i, w := range c.want {
				g := got.Groups[i]
				if g.Key.Minute == nil || !g.Key.Minute.Equal(w.minute) || int64(*g.CostUSD) != w.cost || g.Errors["server_error"] != w.errs {
					t.Errorf("group %d: %s, want %v", i, js(g), w)
				}
				// Latencies are those of the succeeded attempts (1000 ms each), none for a minute
				// of failures only.
				if ok := g.Succeeded > 0; ok != (g.LatencyMS != nil) || ok && g.LatencyMS.P50 != bucketMid(1000) {
					t.Errorf("group %d latency: %s", i, js(g.LatencyMS))
				}
			}
		})
	}
	// Refused: minutes over more than a day, a step other than 1 or 5 minutes, minute with hour.
	for _, c := range []struct {
		f    analytics.Filter
		dims []string
	}{
		{analytics.Filter{ProjectID: p, From: ten, To: ten.Add(25 * time.Hour)}, []string{analytics.ByMinute}},
		{analytics.Filter{ProjectID: p, From: ten, To: ten.Add(time.Hour), Step: 2 * time.Minute}, []string{analytics.ByMinute}},
		{analytics.Filter{ProjectID: p, From: ten, To: ten.Add(time.Hour)}, []string{analytics.ByMinute, analytics.ByHour}},
	} {
		var pe *analytics.ParamError
		if _, err := s.Summary(context.Background(), c.f, c.dims...); !errors.As(err, &pe) {
			t.Errorf("%+v %v: got %v, want a ParamError", c.f, c.dims, err)
		}
	}
}

// TestSummaryByMinuteSplit checks that a minute summary is the same wherever the 5-minute rollup
// begins (settings minutes_from, here also within 5 minutes): all of the range from rollup_minute5,
// none of it, or split, for every grouping and filter, and that it answers the summaries by 5
// minutes but those naming a tenant, which it does not keep.
func TestSummaryByMinuteSplit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	end := day(2026, 11, 5, 0, time.UTC)
	opt := synth.Demo(3, end, time.UTC)
	opt.Start = end.Add(-3 * time.Hour)
	g := synth.New(opt)
	var recs []schema.Attempt
	for len(recs) < 2000 {
		recs = append(recs, g.Next()...)
	}
	l.addMany(p, recs)
	s := l.service(end)
	from, to := end.Add(-3*time.Hour), end
	var tenant, model string
	if err := l.st.Pool.QueryRow(ctx, `SELECT tenant, model FROM series WHERE tenant <> '' ORDER BY id LIMIT 1`).Scan(&tenant, &model); err != nil {
		t.Fatal(err)
	}
	queries := []struct {
		f    analytics.Filter
		dims []string
	}{
		{analytics.Filter{}, []string{analytics.ByMinute}},
		{analytics.Filter{Step: 5 * time.Minute}, []string{analytics.ByMinute, analytics.ByModel}},
		{analytics.Filter{Model: model}, []string{analytics.ByMinute, analytics.ByService, analytics.ByOperation}},
		{analytics.Filter{Step: 5 * time.Minute, Model: model}, []string{analytics.ByMinute, analytics.ByService, analytics.ByOperation}},
		{analytics.Filter{Step: 5 * time.Minute, WithAttempts: true}, []string{analytics.ByMinute, analytics.ByProvider}},
		{analytics.Filter{Tenant: tenant}, []string{analytics.ByMinute}},
		{analytics.Filter{Step: 5 * time.Minute}, []string{analytics.ByMinute, analytics.ByTenant}},
	}
	answer := func(minutesFrom string) []string {
		t.Helper()
		if err := l.st.SetSetting(ctx, "minutes_from", minutesFrom); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, q := range queries {
			f := q.f
			f.ProjectID, f.From, f.To = p, from, to
			got, err := s.Summary(ctx, f, q.dims...)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Groups) < 10 {
				t.Fatalf("%v %+v: %d groups, want a varied ledger", q.dims, q.f, len(got.Groups))
			}
			out = append(out, js(got))
		}
		return out
	}
	raw := answer("infinity")
	var minuteRows int64
	if err := l.st.Pool.QueryRow(ctx, `SELECT count(*) FROM rollup_minute5`).Scan(&minuteRows); err != nil || minuteRows == 0 {
		t.Fatalf("rollup_minute5 holds %d rows (%v): the writer should have kept every bucket", minuteRows, err)
	}
	for _, at := range []string{"-infinity", from.Add(62 * time.Minute).Format(time.RFC3339), to.Add(-time.Minute).Format(time.RFC3339)} {
		for i, got := range answer(at) {
			if got != raw[i] {
				t.Errorf("minutes from %s: %v %+v differs from the raw attempts:\n got %s\nwant %s", at, queries[i].dims, queries[i].f, got, raw[i])
			}
		}
	}
	// And the rollup is what answers: a cost changed in it shows, but not to the tenant questions.
	if _, err := l.st.Pool.Exec(ctx, `UPDATE rollup_minute5 SET cost_nanos = cost_nanos + 1`); err != nil {
		t.Fatal(err)
	}
	for i, got := range answer("-infinity") {
		q := queries[i]
		rolled := q.f.Step == 5*time.Minute && q.f.Tenant == "" && !slices.Contains(q.dims, analytics.ByTenant)
		if (got != raw[i]) != rolled {
			t.Errorf("%v %+v: read the 5-minute rollup %v, want %v", q.dims, q.f, got != raw[i], rolled)
		}
	}
}
