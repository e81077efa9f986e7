package analytics_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/analytics"
)

// TestSummaryKeptToday checks that a Service keeps today's rows of the narrow daily rollups a
// month's summary reads and reads again only the rows written since: after each change, the same
// Service answers as a new one does (and as the raw attempts), having to read again only the
// groups the change wrote, and the whole day after a rebuild, which may delete rows.
func TestSummaryKeptToday(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	call := func(d, h int, tenant, model string) *rec {
		return newRec(oct(d, h, 0), model).tenant(tenant).tokens(200, 100)
	}
	for i, tenant := range []string{"t1", "t2", "t3", "t4", "t5"} {
		l.add(p, call(6, 10, tenant, "sonnet").done(), call(8, 9, tenant, "sonnet").latency(int64(500*(i+1))).done(),
			call(8, 10, tenant, "gpt-4o").fail("overloaded").done())
	}
	now := oct(8, 12, 0)
	month := analytics.Filter{ProjectID: p, From: oct(4, 0, 0), To: oct(9, 0, 0)}
	t2 := analytics.Filter{ProjectID: p, From: oct(4, 0, 0), To: oct(9, 0, 0), Tenant: "t2"}
	questions := []struct {
		f       analytics.Filter
		groupBy []string
	}{
		{month, []string{analytics.ByTenant}},
		{month, []string{analytics.ByDay, analytics.ByTenant}},
		{month, []string{analytics.ByModel}},
		{t2, []string{analytics.ByDay, analytics.ByModel}},
	}
	answers := func(s *analytics.Service) string {
		t.Helper()
		var out string
		for _, q := range questions {
			sum, err := s.Summary(ctx, q.f, q.groupBy...)
			if err != nil {
				t.Fatal(err)
			}
			out += js(sum) + "\n"
		}
		return out
	}
	exec := func(sql string) { t.Helper(); l.exec(sql, p) }
	s := l.service(now)
	_ = answers(s)

	steps := []struct {
		name   string
		change func()
		// changed is the groups of the month by tenant the next read reads again.
		changed int
	}{
		{"nothing", func() {}, 0},
		{"a call of t2 today", func() { l.add(p, call(8, 11, "t2", "sonnet").done()) }, 1},
		// As a fold writes a day's rows: with the day's row of rollup_days, which tells that they
		// changed (internal/rollup/days.go).
		{"t3's row rewritten", func() {
			exec(`WITH d AS (UPDATE rollup_days SET writes = writes + 1 WHERE project_id = $1 AND bucket = '2026-10-08')
				UPDATE rollup_daily_tenant SET attempts = attempts + 10 WHERE project_id = $1 AND bucket = '2026-10-08' AND tenant = 't3'
				AND status = 'ok'`)
		}, 1},
		{"a call on the 6th", func() { l.add(p, call(6, 11, "t1", "sonnet").done()) }, 0},
		{"calls of two tenants today", func() {
			l.add(p, call(8, 11, "t4", "sonnet").fail("rate_limited").done(), call(8, 11, "t6", "gpt-4o").done())
		}, 2},
		{"a rebuild", l.rebuild, 6},
		{"t5's calls of today gone from the raw attempts, then a rebuild", func() {
			exec(`DELETE FROM attempts a USING series s WHERE a.project_id = $1 AND s.project_id = $1 AND s.id = a.series_id
				AND s.tenant = 't5' AND a.started_at >= '2026-10-08'`)
			l.rebuild()
		}, 5},
	}
	for _, st := range steps {
		st.change()
		n, err := s.TodayChanged(ctx, month, analytics.ByTenant)
		if err != nil {
			t.Fatal(err)
		}
		if n != st.changed {
			t.Errorf("%s: %d groups to read again, want %d", st.name, n, st.changed)
		}
		if same, fresh := answers(s), answers(l.service(now)); same != fresh {
			t.Errorf("%s: the same Service's answers\n%s\na new one's\n%s", st.name, same, fresh)
		}
	}
	// Reads at once, while calls come in, share what is kept.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 3 {
				for _, q := range questions {
					if _, err := s.Summary(ctx, q.f, q.groupBy...); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	for i := range 3 {
		l.add(p, call(8, 11, fmt.Sprintf("t%d", i+7), "sonnet").done())
	}
	wg.Wait()
	if same, fresh := answers(s), answers(l.service(now)); same != fresh {
		t.Errorf("after reads at once: the same Service's answers\n%s\na new one's\n%s", same, fresh)
	}
	// And the answer is the raw attempts'.
	for _, q := range questions {
		got, err := s.Summary(ctx, q.f, q.groupBy...)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := s.SummaryRaw(ctx, q.f, q.groupBy...)
		if err != nil {
			t.Fatal(err)
		}
		if js(got) != js(raw) {
			t.Errorf("%v: kept\n%s\nraw\n%s", q.groupBy, js(got), js(raw))
		}
	}
}
