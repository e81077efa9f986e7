package web

import (
	"context"

	"github.com/labstack/echo/v4"
	"golang.org/x/sync/errgroup"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/server"
)

// statRow is one row of a breakdown table: a group's name, where it drills down to, and its
// figures.
type statRow struct {
	Label string
	// Link is the drill-down URL; "" when the row has none.
	Link string
	// Note qualifies the row, such as the model a fallback stood in for.
	Note  string
	Stats analytics.Stats
}

// breakdown is a table of groups with the charts of the same attempts.
type breakdown struct {
	ID, Caption, Head string
	Rows              []statRow
	// Hidden counts the smallest groups left out past maxRows.
	Hidden int
}

// maxRows bounds a breakdown table: a service with thousands of tenants lists its biggest.
const maxRows = 100

// breakdownData is what the models and services pages show.
type breakdownData struct {
	View   view
	Title  string
	Tables []breakdown
	Spend  chartSpec
	// SpendBy names what the spend chart is stacked by.
	SpendBy string
	Errors  chartSpec
	Total   analytics.Stats
}

// breakdownQuery is a page's summaries: its tables' groupings, and the dimension its spend chart
// is stacked by.
type breakdownQuery struct {
	tables [][]string
	spend  string
}

// summaries runs a breakdown's summaries at once: the tables', and the spend chart's (by the view's time dimension and
// q.spend), which also gives the errors per point and the total. Each summary costs a pass over the
// range's rollups, so a page asks for as few as it can.
func (h *Handler) summaries(ctx context.Context, v view, f analytics.Filter, q breakdownQuery) (tables []analytics.Summary, spend analytics.Summary, err error) {
	tables = make([]analytics.Summary, len(q.tables))
	g, gctx := errgroup.WithContext(ctx)
	for i, dims := range q.tables {
		g.Go(func() (err error) { tables[i], err = h.opt.Analytics.Summary(gctx, f, dims...); return err })
	}
	g.Go(func() (err error) {
		spend, err = h.opt.Analytics.Summary(gctx, f, v.timeDim(), q.spend)
		return err
	})
	err = g.Wait()
	return tables, spend, err
}

// models lists spend, tokens, cost per call, latency and errors per model, fallback traffic in
// rows of its own.
func (h *Handler) models(c echo.Context) error {
	v, err := h.parseView(c)
	if err != nil {
		return err
	}
	f := v.filter(server.ProjectOf(c).ID)
	tables, spend, err := h.summaries(c.Request().Context(), v, f,
		breakdownQuery{tables: [][]string{{analytics.ByProvider, analytics.ByModel}}, spend: analytics.ByModel})
	if err != nil {
		return h.dataError(err)
	}
	var rows []statRow
	for _, g := range topBySpend(tables[0].Groups, len(tables[0].Groups)) {
		r := statRow{Label: deref(g.Key.Provider) + " / " + deref(g.Key.Model), Stats: g.Stats,
			Link: v.link("/models", "model", deref(g.Key.Model))}
		if g.Key.Fallback != nil && *g.Key.Fallback {
			r.Note = "fallback"
			if from := deref(g.Key.FallbackFrom); from != "" {
				r.Note = "fallback for " + from
			}
		}
		rows = append(rows, r)
	}
	d := breakdownData{View: v, Title: "Models", Total: spend.Total, SpendBy: "model",
		Tables: []breakdown{capped(breakdown{ID: "models", Caption: "Models", Head: "Provider / model", Rows: rows})},
		Spend:  spendChart(v, spend.Groups, modelLabel),
		Errors: errorChart(v, spend.Groups),
	}
	fr := h.page(c, "Models")
	fr.Filter = v
	return h.render(c, 200, breakdownView(fr, d, "/models"))
}

// services lists the services; with a service chosen, its operations and tenants.
func (h *Handler) services(c echo.Context) error {
	v, err := h.parseView(c)
	if err != nil {
		return err
	}
	f := v.filter(server.ProjectOf(c).ID)
	q := breakdownQuery{tables: [][]string{{analytics.ByService}}, spend: analytics.ByService}
	if v.Service != "" {
		q = breakdownQuery{tables: [][]string{{analytics.ByOperation}, {analytics.ByTenant}}, spend: analytics.ByOperation}
	}
	tables, spend, err := h.summaries(c.Request().Context(), v, f, q)
	if err != nil {
		return h.dataError(err)
	}
	d := breakdownData{View: v, Title: "Services", Total: spend.Total, SpendBy: q.spend, Errors: errorChart(v, spend.Groups)}
	if v.Service == "" {
		d.Spend = spendChart(v, spend.Groups, func(k analytics.Key) string { return deref(k.Service) })
		d.Tables = []breakdown{capped(breakdown{ID: "services", Caption: "Services", Head: "Service",
			Rows: groupRows(tables[0].Groups, func(k analytics.Key) (string, string) {
				return deref(k.Service), v.link("/services", "service", deref(k.Service))
			})})}
	} else {
		d.Title = "Service " + v.Service
		if v.Operation != "" {
			d.Title += " / " + v.Operation
		}
		d.Spend = spendChart(v, spend.Groups, func(k analytics.Key) string { return deref(k.Operation) })
		d.Tables = []breakdown{
			capped(breakdown{ID: "operations", Caption: "Operations of " + v.Service, Head: "Operation",
				Rows: groupRows(tables[0].Groups, func(k analytics.Key) (string, string) {
					return deref(k.Operation), v.link("/services", "operation", deref(k.Operation))
				})}),
			capped(breakdown{ID: "tenants", Caption: "Tenants of " + v.Service, Head: "Tenant",
				Rows: groupRows(tables[1].Groups, func(k analytics.Key) (string, string) {
					if deref(k.Tenant) == "" {
						return "(no tenant)", ""
					}
					return deref(k.Tenant), v.link("/services", "tenant", deref(k.Tenant))
				})}),
		}
	}
	fr := h.page(c, d.Title)
	fr.Filter = v
	return h.render(c, 200, breakdownView(fr, d, "/services"))
}

// groupRows makes table rows of groups, biggest spender first, named and linked by name.
func groupRows(groups []analytics.Group, name func(analytics.Key) (label, link string)) []statRow {
	rows := make([]statRow, 0, len(groups))
	for _, g := range topBySpend(groups, len(groups)) {
		label, link := name(g.Key)
		rows = append(rows, statRow{Label: label, Link: link, Stats: g.Stats})
	}
	return rows
}

// capped keeps a table's first maxRows rows and counts the others.
func capped(b breakdown) breakdown {
	if len(b.Rows) > maxRows {
		b.Hidden = len(b.Rows) - maxRows
		b.Rows = b.Rows[:maxRows]
	}
	return b
}
