package analytics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/analytics"
)

// TestSummaryKeptSpans checks that a Service reads a summary's whole days before today once and
// keeps them, and the costs it ranks the top groups by, while no row of rollup_days among them is
// written again: a change to the tenant rollups of a past day or of today behind its back goes
// unseen by it (and is seen by a new Service), and a late record, a call on a day that had none
// and a rebuild write the days' rows again, so the same Service answers as a new one, for every
// grouping.
func TestSummaryKeptSpans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	call := func(d, h int, tenant string) *rec {
		return newRec(oct(d, h, 0), "sonnet").tenant(tenant).tokens(200, 100)
	}
	l.add(p, call(5, 10, "t1").done(), call(5, 11, "t2").done(), call(6, 9, "t1").latency(3000).done(),
		call(6, 10, "t2").fail("overloaded").done(), call(8, 9, "t1").done())
	now := oct(8, 12, 0)
	// The month's range ends after today; the past's ends before it, so all its days are kept.
	month := analytics.Filter{ProjectID: p, From: oct(4, 0, 0), To: oct(9, 0, 0)}
	past := analytics.Filter{ProjectID: p, From: oct(4, 0, 0), To: oct(7, 0, 0)}
	groupings := [][]string{{analytics.ByTenant}, {analytics.ByDay, analytics.ByModel}, nil}

	// t1's attempts in the month and the past, and the month's costliest tenant.
	type figures struct {
		month, past int64
		top         string
	}
	t1 := func(s *analytics.Service) figures {
		t.Helper()
		var out [2]int64
		for i, f := range []analytics.Filter{month, past} {
			sum, err := s.Summary(ctx, f, analytics.ByTenant)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range sum.Groups {
				if *g.Key.Tenant == "t1" {
					out[i] = g.Stats.Attempts
				}
			}
		}
		top, err := s.SummaryTop(ctx, month, 1, analytics.ByTenant)
		if err != nil {
			t.Fatal(err)
		}
		return figures{out[0], out[1], *top.Groups[0].Key.Tenant}
	}
	answers := func(s *analytics.Service) string {
		t.Helper()
		var out string
		for _, f := range []analytics.Filter{month, past, {ProjectID: p, From: oct(4, 0, 0), To: oct(9, 0, 0), Tenant: "t1"}} {
			for _, g := range groupings {
				sum, err := s.Summary(ctx, f, g...)
				if err != nil {
					t.Fatal(err)
				}
				out += js(sum) + "\n"
			}
			top, err := s.SummaryTop(ctx, f, 1, analytics.ByTenant)
			if err != nil {
				t.Fatal(err)
			}
			out += js(top) + "\n"
		}
		return out
	}
	exec := func(sql string) { t.Helper(); l.exec(sql, p) }
	bump := func(day string, n int) func() {
		return func() {
			exec(`UPDATE rollup_daily_tenant SET attempts = attempts + ` + fmt.Sprint(n) +
				` WHERE project_id = $1 AND bucket = '` + day + `' AND tenant = 't1'`)
		}
	}
	spend := func(n int64) func() {
		return func() {
			exec(`UPDATE rollup_tenant_spend SET cost_nanos = cost_nanos + ` + fmt.Sprint(n) +
				` WHERE project_id = $1 AND span = 1 AND bucket = '2026-10-05' AND tenant = 't2'`)
		}
	}
	s := l.service(now)
	if got, want := t1(s), (figures{3, 2, "t1"}); got != want {
		t.Fatalf("at first: %+v, want %+v", got, want)
	}
	_ = answers(s)

	steps := []struct {
		name   string
		change func()
		// want is what the Service that read before the change answers after it, fresh what a new
		// one does; behind tells a change the Service cannot see, so its answers differ.
		want, fresh figures
		behind      bool
	}{
		{"the 5th changed behind its back", bump("2026-10-05", 100), figures{3, 2, "t1"}, figures{103, 102, "t1"}, true},
		{"and changed back", bump("2026-10-05", -100), figures{3, 2, "t1"}, figures{3, 2, "t1"}, false},
		{"t2's spend of the 5th changed behind its back", spend(1e12), figures{3, 2, "t1"}, figures{3, 2, "t2"}, true},
		{"and changed back", spend(-1e12), figures{3, 2, "t1"}, figures{3, 2, "t1"}, false},
		// Today's rows kept are read again when the day's row of rollup_days changes (today.go).
		{"today changed behind its back", bump("2026-10-08", 100), figures{3, 2, "t1"}, figures{103, 2, "t1"}, true},
		{"and changed back", bump("2026-10-08", -100), figures{3, 2, "t1"}, figures{3, 2, "t1"}, false},
		{"a late call on the 5th", func() { l.add(p, call(5, 20, "t1").latency(9000).done()) }, figures{4, 3, "t1"}, figures{4, 3, "t1"}, false},
		{"a call today", func() { l.add(p, call(8, 10, "t1").done()) }, figures{5, 3, "t1"}, figures{5, 3, "t1"}, false},
		{"a call on the 7th, which had none", func() { l.add(p, call(7, 1, "t1").fail("rate_limited").done()) },
			figures{6, 3, "t1"}, figures{6, 3, "t1"}, false},
		{"a call of the 6th gone from the raw attempts, then a rebuild", func() {
			exec(`DELETE FROM attempts WHERE project_id = $1 AND started_at = '2026-10-06 09:00:00+00'`)
			l.rebuild()
		}, figures{5, 2, "t1"}, figures{5, 2, "t1"}, false},
	}
	for _, st := range steps {
		st.change()
		if got := t1(s); got != st.want {
			t.Errorf("%s: the same Service answers %+v, want %+v", st.name, got, st.want)
		}
		fresh := l.service(now)
		if got := t1(fresh); got != st.fresh {
			t.Errorf("%s: a new Service answers %+v, want %+v", st.name, got, st.fresh)
		}
		if same, new := answers(s), answers(fresh); (same == new) == st.behind {
			t.Errorf("%s: the same Service's answers\n%s\na new one's\n%s", st.name, same, new)
		}
	}
}
