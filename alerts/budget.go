package alerts

import (
	"context"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/numfmt"
	"github.com/ledgerd/ledgerd/money"
)

// evalBudget fires when the month's projected spend (analytics.Projection: month to date plus the
// run rate of the last complete days over the days left) passes the budget: the rule's budget_usd,
// or else the project's stored budget. A project with neither is not judged.
func evalBudget(ctx context.Context, ec evalContext, r *Rule) ([]sample, error) {
	budget := r.BudgetUSD
	if budget == 0 {
		if ec.budget == nil || *ec.budget <= 0 {
			return nil, nil
		}
		budget = *ec.budget
	}
	local := ec.now.In(ec.tz)
	month := time.Date(local.Year(), local.Month(), 1, 0, 0, 0, 0, ec.tz)
	// The projection is taken at the evaluation's instant, like every other rule.
	p, err := analytics.New(analytics.Options{Pool: ec.pool, Timezone: ec.tz, Now: func() time.Time { return ec.now }}).Projection(ctx, ec.project.ID, month, r.Service)
	if err != nil {
		return nil, fmt.Errorf("project month spend: %w", err)
	}
	if p.ProjectedUSD <= budget {
		return nil, nil
	}
	on, crossed := crossedOn(p, budget, ec.now, ec.tz)
	group := map[string]string{}
	scope := "project " + ec.project.Name
	if r.Service != "" {
		group["service"] = r.Service
		scope = r.Service + " (project " + ec.project.Name + ")"
	}
	figures := map[string]string{
		"month":             p.Month,
		"timezone":          p.Timezone,
		"budget_usd":        budget.String(),
		"month_to_date_usd": p.MonthToDateUSD.String(),
		"projected_usd":     p.ProjectedUSD.String(),
		"run_rate_usd":      p.RunRateUSD.String(),
		"basis_days":        strconv.Itoa(p.BasisDays),
	}
	if on != "" {
		figures["budget_crossed_on"] = on
	}
	if p.UnpricedAttempts > 0 {
		figures["unpriced_attempts"] = strconv.FormatInt(p.UnpricedAttempts, 10)
	}
	var d strings.Builder
	fmt.Fprintf(&d, "%s spend so far is %s (%s, to %s).", month.Format("January 2006"), p.MonthToDateUSD.USD(),
		p.Timezone, local.Format("2 Jan 15:04"))
	rate := "today's spend so far, scaled to a day"
	if p.BasisDays > 0 {
		rate = fmt.Sprintf("the mean of the last %d complete days", p.BasisDays)
	}
	fmt.Fprintf(&d, " At %s a day (%s) the month ends at %s, over the %s budget.", p.RunRateUSD.USD(), rate,
		p.ProjectedUSD.USD(), budget.USD())
	switch {
	case crossed:
		fmt.Fprintf(&d, " The budget was used up on %s.", on)
	case on != "":
		fmt.Fprintf(&d, " At this rate the budget runs out on %s.", on)
	}
	if p.UnpricedAttempts > 0 {
		fmt.Fprintf(&d, " %s attempts have no price and are not counted.", numfmt.Count(p.UnpricedAttempts))
	}
	summary := fmt.Sprintf("Month spend heading for %s, over the %s budget, for %s", p.ProjectedUSD.USD(), budget.USD(), scope)
	if on != "" {
		summary += "; budget reached " + on
	}
	return []sample{{group: group, figures: figures, summary: summary, description: d.String()}}, nil
}

// crossedOn is the local day the month's spend reached budget (crossed true), or the day it will
// at the projection's run rate, counting only what is left of today; "" when not this month.
func crossedOn(p analytics.Projection, budget money.Nanos, now time.Time, tz *time.Location) (string, bool) {
	var cum money.Nanos
	for _, d := range p.Days {
		cum += d.CostUSD
		if cum >= budget {
			return d.Day, true
		}
	}
	if p.RunRateUSD <= 0 {
		return "", false
	}
	start, length := dayBounds(now, tz)
	left := start.Add(length).Sub(now)
	need := big.NewRat(int64(budget-p.MonthToDateUSD), 1)
	rate := big.NewRat(int64(p.RunRateUSD), 1)
	restOfToday := new(big.Rat).Mul(rate, big.NewRat(int64(left), int64(length)))
	days := 0
	if need.Cmp(restOfToday) > 0 {
		after := new(big.Rat).Quo(new(big.Rat).Sub(need, restOfToday), rate)
		q, rem := new(big.Int).QuoRem(after.Num(), after.Denom(), new(big.Int))
		if rem.Sign() > 0 {
			q.Add(q, big.NewInt(1))
		}
		if !q.IsInt64() || q.Int64() > 31 {
			return "", false
		}
		days = int(q.Int64())
	}
	l := start.In(tz)
	day := time.Date(l.Year(), l.Month(), l.Day()+days, 0, 0, 0, 0, tz)
	if day.Month() != l.Month() {
		return "", false
	}
	return day.Format(time.DateOnly), false
}
