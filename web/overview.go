package web

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/sync/errgroup"

	"github.com/ledgerd/ledgerd/alerts"
	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/server"
	"github.com/ledgerd/ledgerd/money"
)

// topN is how many services and operations the overview lists.
const topN = 5

// overviewData is what the overview shows.
type overviewData struct {
	View view
	// Month is today's month: spend so far, today's, and the projection.
	Month analytics.Projection
	// Total covers the view's range and filters.
	Total      analytics.Stats
	Services   []spender
	Operations []spender
	Spend      chartSpec
	MonthChart chartSpec
	Firing     []alerts.AlertView
	// Open are the incidents going on now; IncidentOf links a firing alert (by fingerprint) to
	// its incident.
	Open       []analytics.Incident
	IncidentOf map[string]string
}

// overview is the Monday-morning page: what today and the month cost and where the month is
// heading, daily spend by model, the top spenders, and the signs of trouble.
func (h *Handler) overview(c echo.Context) error {
	v, err := h.parseView(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	p := server.ProjectOf(c)
	f := v.filter(p.ID)
	d := overviewData{View: v}
	var byDay, byOp analytics.Summary
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		d.Month, err = h.opt.Analytics.Projection(gctx, p.ID, h.now().In(h.opt.Timezone), v.Service)
		return err
	})
	g.Go(func() (err error) {
		byDay, err = h.opt.Analytics.Summary(gctx, f, v.timeDim(), analytics.ByModel)
		return err
	})
	g.Go(func() (err error) {
		byOp, err = h.opt.Analytics.Summary(gctx, f, analytics.ByService, analytics.ByOperation)
		return err
	})
	g.Go(func() (err error) { d.Firing, err = h.firing(gctx, p.ID); return err })
	g.Go(func() (err error) { d.Open, err = h.openIncidents(c, p.ID); return err })
	if err := g.Wait(); err != nil {
		return h.dataError(err)
	}
	d.Total = byDay.Total
	d.IncidentOf = alertLinks(d.Firing, d.Open, h.now())
	d.Services = topSpenders(byOp.Groups, topN, func(k analytics.Key) (string, string) {
		return deref(k.Service), v.link("/services", "service", deref(k.Service))
	})
	d.Operations = topSpenders(byOp.Groups, topN, func(k analytics.Key) (string, string) {
		return deref(k.Service) + " / " + deref(k.Operation),
			v.link("/services", "service", deref(k.Service), "operation", deref(k.Operation))
	})
	d.Spend = spendChart(v, byDay.Groups, modelLabel)
	d.MonthChart = monthChart(d.Month, h.opt.Timezone)
	fr := h.page(c, "Overview")
	fr.Filter = v
	return h.render(c, 200, overviewView(fr, d))
}

// topBySpend returns the n groups that cost most (unpriced attempts break ties), biggest first.
func topBySpend(groups []analytics.Group, n int) []analytics.Group {
	out := slices.Clone(groups)
	slices.SortStableFunc(out, func(a, b analytics.Group) int {
		if c := cmp.Compare(costOf(b.Stats), costOf(a.Stats)); c != 0 {
			return c
		}
		return cmp.Compare(b.UnpricedAttempts, a.UnpricedAttempts)
	})
	return out[:min(n, len(out))]
}

// spender is one row of a table of top spenders.
type spender struct {
	Label, Link string
	// Cost is the spend of the priced attempts; nil when every attempt was unpriced.
	Cost     *money.Nanos
	Unpriced int64
	// Unknown counts the attempts whose answer carried no usage.
	Unknown int64
	Calls   int64
}

// topSpenders adds up groups by their name (a service from its operations, say) and returns the n
// that cost most, unpriced attempts breaking ties. Amounts and counts add up exactly.
func topSpenders(groups []analytics.Group, n int, name func(analytics.Key) (label, link string)) []spender {
	byLabel := map[string]*spender{}
	var out []*spender
	for _, g := range groups {
		label, link := name(g.Key)
		s, ok := byLabel[label]
		if !ok {
			s = &spender{Label: label, Link: link}
			byLabel[label] = s
			out = append(out, s)
		}
		if g.CostUSD != nil {
			c := costOf(g.Stats)
			if s.Cost != nil {
				c += *s.Cost
			}
			s.Cost = &c
		}
		s.Unpriced += g.UnpricedAttempts
		s.Unknown += g.UsageUnknownAttempts
		s.Calls += g.Requests
	}
	slices.SortStableFunc(out, func(a, b *spender) int {
		if c := cmp.Compare(costOrZero(b.Cost), costOrZero(a.Cost)); c != 0 {
			return c
		}
		return cmp.Compare(b.Unpriced, a.Unpriced)
	})
	top := make([]spender, 0, min(n, len(out)))
	for _, s := range out[:min(n, len(out))] {
		top = append(top, *s)
	}
	return top
}

func costOrZero(c *money.Nanos) money.Nanos {
	if c == nil {
		return 0
	}
	return *c
}

// monthChart draws the month: cumulative spend day by day up to today, the projection from today
// to the month's end with its range, and the budget.
func monthChart(p analytics.Projection, tz *time.Location) chartSpec {
	first, _ := time.Parse("2006-01", p.Month)
	c := chartSpec{Kind: "lines", Unit: "usd", TZ: tz.String(), Step: 86400}
	for i := range p.DaysInMonth {
		d := first.AddDate(0, 0, i)
		c.X = append(c.X, dayStart(d, tz).Unix())
		c.Days = append(c.Days, d.Format(time.DateOnly))
	}
	n := len(c.X)
	// Days lists every day of the month up to today (all of them once the month is over).
	spent := chartSeries{Label: "Spent", Values: make([]any, n), Text: blanks(n)}
	var sum money.Nanos
	for i, dc := range p.Days[:min(len(p.Days), n)] {
		sum += dc.CostUSD
		spent.Values[i], spent.Text[i] = sum.String(), sum.USD()
	}
	last := len(p.Days) - 1
	c.Series = append(c.Series, spent)
	if !p.Complete && last >= 0 && last < n-1 {
		for _, pr := range []struct {
			label string
			end   money.Nanos
		}{{"Projected", p.ProjectedUSD}, {"Projected low", p.ProjectedLowUSD}, {"Projected high", p.ProjectedHighUSD}} {
			s := chartSeries{Label: pr.label, Values: make([]any, n), Text: blanks(n), Join: true}
			s.Values[last], s.Text[last] = p.MonthToDateUSD.String(), p.MonthToDateUSD.USD()
			s.Values[n-1], s.Text[n-1] = pr.end.String(), pr.end.USD()
			c.Series = append(c.Series, s)
		}
	}
	if p.BudgetUSD != nil {
		s := chartSeries{Label: "Budget", Values: make([]any, n), Text: blanks(n)}
		for i := range n {
			s.Values[i], s.Text[i] = p.BudgetUSD.String(), p.BudgetUSD.USD()
		}
		c.Series = append(c.Series, s)
	}
	return c
}

func blanks(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = "–"
	}
	return s
}

// overBudget tells whether the month is over its budget, or heading there.
func overBudget(p analytics.Projection) bool {
	return p.BudgetUSD != nil && (p.BudgetExceeded || p.ProjectedUSD > *p.BudgetUSD)
}

// basisText names the days the run rate of a projection averages: "the last 7 days", or, on a
// ledger younger than a week, as many as it has ("1 day so far", or today alone).
func basisText(n int) string {
	switch {
	case n == 0:
		return "today so far"
	case n == 1:
		return "1 complete day"
	case n < analytics.BasisDays:
		return strconv.Itoa(n) + " complete days (a young ledger)"
	}
	return "the last " + strconv.Itoa(n) + " complete days"
}

// daysLeftText writes the days left in a month to one decimal: "11.4 days".
func daysLeftText(d float64) string {
	return strconv.FormatFloat(d, 'f', 1, 64) + " days"
}
