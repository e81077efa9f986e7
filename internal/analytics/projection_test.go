package analytics_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/schema"
)

// spend is a record costing usd whole dollars under testPrice (input tokens at 100 nano-dollars).
func spend(at time.Time, usd int64, service string) *rec {
	return newRec(at, "sonnet").service(service, "answer").tokens(usd*10_000_000, 0)
}

// TestProjection checks the projection of a known daily pattern in New York, with the clock at
// 15 October 2026 12:00 EDT: $10 on even days and $20 on odd days from 20 September to 14
// October, and $5 so far today. Month to date: $70 + $140 + $5 = $215. The last 7 complete days
// (8 to 14 October) average $100/7 = $14.285714286 with a sample deviation of $5.345224838; 16.5
// days remain (half of today and 16 whole days).
func TestProjection(t *testing.T) {
	t.Parallel()
	ny := mustZone(t, "America/New_York")
	l := newLedger(t, ny)
	acme, beta, fresh := l.project("acme"), l.project("beta"), l.project("fresh")
	var acmeRecs, betaRecs []schema.Attempt
	for d := time.Date(2026, 9, 20, 12, 0, 0, 0, ny); d.Before(time.Date(2026, 10, 15, 0, 0, 0, 0, ny)); d = d.AddDate(0, 0, 1) {
		usd := int64(10)
		if d.Day()%2 == 1 {
			usd = 20
		}
		acmeRecs = append(acmeRecs, spend(d, usd, "chat").done())
		betaRecs = append(betaRecs, spend(d, 2, "old").done())
		if d.Day() >= 12 && d.Month() == time.October {
			betaRecs = append(betaRecs, spend(d, 1, "new-svc").done()) // a service that started on 12 October
		}
	}
	l.add(acme, append(acmeRecs, spend(time.Date(2026, 10, 15, 8, 0, 0, 0, ny), 5, "chat").done())...)
	l.add(beta, betaRecs...)
	l.add(fresh, spend(time.Date(2026, 10, 15, 3, 0, 0, 0, ny), 6, "chat").done()) // its first spend ever
	now := time.Date(2026, 10, 15, 12, 0, 0, 0, ny)
	s := l.service(now)
	october, september := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)

	type want struct {
		mtd, projected, low, high, rate, stddev string
		basis                                   int
		complete                                bool
		remaining                               float64
		budget                                  string // "" for none
		crossed                                 string // "" for nil
		exceeded                                bool
		days                                    int
	}
	cases := []struct {
		name    string
		project int64
		month   time.Time
		service string
		budget  string
		want    want
	}{
		// The pattern above, no budget.
		{"month in progress", acme, october, "", "", want{mtd: "215", projected: "450.714285719",
			low: "362.518075892", high: "538.910495546", rate: "14.285714286", stddev: "5.345224838",
			basis: 7, remaining: 16.5, days: 15}},
		// A $300 budget: $222.14 by the end of today, then $14.29 a day: crossed on 21 October.
		{"budget ahead", acme, october, "", "300", want{mtd: "215", projected: "450.714285719",
			low: "362.518075892", high: "538.910495546", rate: "14.285714286", stddev: "5.345224838",
			basis: 7, remaining: 16.5, budget: "300", crossed: "2026-10-21", days: 15}},
		// A $200 budget was already reached on 13 October ($200 exactly).
		{"budget exceeded", acme, october, "", "200", want{mtd: "215", projected: "450.714285719",
			low: "362.518075892", high: "538.910495546", rate: "14.285714286", stddev: "5.345224838",
			basis: 7, remaining: 16.5, budget: "200", crossed: "2026-10-13", exceeded: true, days: 15}},
		// A budget the projection never reaches this month.
		{"budget out of reach", acme, october, "", "1000", want{mtd: "215", projected: "450.714285719",
			low: "362.518075892", high: "538.910495546", rate: "14.285714286", stddev: "5.345224838",
			basis: 7, remaining: 16.5, budget: "1000", days: 15}},
		// A past month is its actual total: 6×$10 + 5×$20, spread over its 30 days.
		{"past month", acme, september, "", "", want{mtd: "160", projected: "160", low: "160", high: "160",
			rate: "5.333333333", stddev: "7.760791522", basis: 30, complete: true, days: 30}},
		// One service, which started on 12 October: its basis is the 3 days it existed, not 7.
		{"new service", beta, october, "new-svc", "", want{mtd: "3", projected: "19.5", low: "19.5", high: "19.5",
			rate: "1", stddev: "0", basis: 3, remaining: 16.5, days: 15}},
		// A project whose first spend is today: the rate is today's spend scaled to a whole day.
		{"first day", fresh, october, "", "", want{mtd: "6", projected: "204", low: "204", high: "204",
			rate: "12", stddev: "0", basis: 0, remaining: 16.5, days: 15}},
	}
	for _, c := range cases {
		var budget *money.Nanos
		if c.budget != "" {
			b := nanos(t, c.budget)
			budget = &b
		}
		name := map[int64]string{acme: "acme", beta: "beta", fresh: "fresh"}[c.project]
		if err := analytics.SetBudget(context.Background(), l.st, name, budget); err != nil {
			t.Fatal(err)
		}
		got, err := s.Projection(context.Background(), c.project, c.month, c.service)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		w := c.want
		for _, m := range []struct {
			field string
			got   money.Nanos
			want  string
		}{{"month_to_date", got.MonthToDateUSD, w.mtd}, {"projected", got.ProjectedUSD, w.projected},
			{"low", got.ProjectedLowUSD, w.low}, {"high", got.ProjectedHighUSD, w.high},
			{"run rate", got.RunRateUSD, w.rate}, {"stddev", got.RunRateStddevUSD, w.stddev}} {
			if m.got != nanos(t, m.want) {
				t.Errorf("%s: %s = %s, want %s", c.name, m.field, m.got, m.want)
			}
		}
		if got.BasisDays != w.basis || got.Complete != w.complete || got.DaysRemaining != w.remaining || len(got.Days) != w.days {
			t.Errorf("%s: basis %d complete %v remaining %v days %d; want %d %v %v %d", c.name,
				got.BasisDays, got.Complete, got.DaysRemaining, len(got.Days), w.basis, w.complete, w.remaining, w.days)
		}
		if (got.BudgetUSD == nil) != (w.budget == "") || got.BudgetUSD != nil && *got.BudgetUSD != nanos(t, w.budget) {
			t.Errorf("%s: budget %v, want %q", c.name, got.BudgetUSD, w.budget)
		}
		crossed := ""
		if got.BudgetCrossedOn != nil {
			crossed = *got.BudgetCrossedOn
		}
		if crossed != w.crossed || got.BudgetExceeded != w.exceeded {
			t.Errorf("%s: crossed on %q (exceeded %v), want %q (%v)", c.name, crossed, got.BudgetExceeded, w.crossed, w.exceeded)
		}
	}
}

// TestProjectionErrors checks a month that has not begun (a parameter error) and an unknown
// project or budget target.
func TestProjectionErrors(t *testing.T) {
	t.Parallel()
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	s := l.service(time.Date(2026, 10, 15, 12, 0, 0, 0, time.UTC))
	_, err := s.Projection(context.Background(), p, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), "")
	var pe *analytics.ParamError
	if !errors.As(err, &pe) || pe.Param != "month" {
		t.Errorf("next month: %v, want a ParamError on month", err)
	}
	if _, err := s.Projection(context.Background(), p+1000, time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown project: %v, want ErrNotFound", err)
	}
	b := money.Nanos(-1)
	if err := analytics.SetBudget(context.Background(), l.st, "acme", &b); err == nil {
		t.Error("a negative budget was accepted")
	}
	if err := analytics.SetBudget(context.Background(), l.st, "nobody", nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("budget of an unknown project: %v, want ErrNotFound", err)
	}
}
