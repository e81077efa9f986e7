package analytics_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/rollup"
	"github.com/ledgerd/ledgerd/internal/seed"
)

// TestTenantBlocks checks the tenant questions that group by no time, which read whole days as
// blocks of 1, 8 and 64 days (rollup_daily_tenant and rollup_tenant_blocks), against the raw
// attempts: over ranges that hold blocks of 64 and of 8 days, from midnights and from hours, by
// tenant, one tenant's total and the costliest tenants.
func TestTenantBlocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tz := mustZone(t, "America/New_York")
	now := time.Date(2026, 11, 4, 15, 30, 0, 0, tz)
	l := loadSeeded(t, seed.Options{Records: 12_000, Seed: 5, Projects: []string{"saas"}, End: now, Days: 160,
		Spread: &seed.Spread{Tenants: 30, Services: 3}})
	project, svc := l.project, l.svc
	var tenant string
	l.firstSeries(t, "tenant", "TRUE ORDER BY tenant", &tenant)
	local := func(y int, m time.Month, d, h int) time.Time { return time.Date(y, m, d, h, 0, 0, 0, tz) }
	for _, r := range []struct {
		name     string
		from, to time.Time
		spans    []int // the spans of the blocks the range's whole days must include
	}{
		{"whole days", local(2026, 6, 20, 0), local(2026, 10, 25, 0), []int{1, 8, 64}},
		// From an hour older than the hours kept: from its midnight; to an hour of today: the
		// edge hours from the raw attempts.
		{"from hours", local(2026, 7, 3, 9), now.Add(-2 * time.Hour), []int{1, 8, 64}},
		{"a month", local(2026, 10, 6, 0), local(2026, 11, 5, 0), []int{1, 8}},
		{"days only", local(2026, 10, 28, 0), local(2026, 11, 2, 0), []int{1}},
	} {
		day := func(t time.Time) time.Time { return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC) }
		var spans []int
		for _, b := range rollup.SpendBlocks(day(r.from), day(r.to)) {
			if !slices.Contains(spans, b.Span) {
				spans = append(spans, b.Span)
			}
		}
		slices.Sort(spans)
		if !slices.Equal(spans, r.spans) {
			t.Fatalf("%s: blocks of %v days, want %v", r.name, spans, r.spans)
		}
		for _, f := range []analytics.Filter{{}, {Tenant: tenant}} {
			for _, g := range [][]string{{"tenant"}, nil} {
				f.ProjectID, f.From, f.To = project, r.from, r.to
				got, err := svc.Summary(ctx, f, g...)
				if err != nil {
					t.Fatal(err)
				}
				want, err := svc.SummaryRaw(ctx, f, g...)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) || got.Total.Attempts == 0 || got.Total.LatencyMS == nil {
					t.Errorf("%s, %+v by %v: from the blocks %s; raw %s", r.name, f, g, js(got.Total), js(want.Total))
				}
			}
		}
		f := analytics.Filter{ProjectID: project, From: r.from, To: r.to}
		want, err := svc.SummaryRaw(ctx, f, "tenant")
		if err != nil {
			t.Fatal(err)
		}
		want.Top(5)
		got, err := svc.SummaryTop(ctx, f, 5, "tenant")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Groups, want.Groups) || len(got.Groups) != 5 {
			t.Errorf("%s: the 5 costliest tenants %s, raw %s", r.name, js(got.Groups), js(want.Groups))
		}
	}
}
