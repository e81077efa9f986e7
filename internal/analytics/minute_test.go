package analytics_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/analytics"
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
