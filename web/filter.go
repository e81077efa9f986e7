package web

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/schema"
)

// defaultDays is the range a page shows when the URL names none: the last 30 local days, today
// included.
const defaultDays = 30

// view is a page's filter as its URL carries it, so that a view can be shared: a range of whole
// local days and optionally one service, operation, model and tenant. The project is always the
// logged-in one and never comes from the URL.
type view struct {
	// From and To are the first and last local days shown (YYYY-MM-DD), both included.
	From, To                          string
	Service, Operation, Model, Tenant string
	// Today is the local date now, for the range presets.
	Today string

	from, to time.Time // the range as [from, to)
	tz       *time.Location
}

// filterParams are the query parameters a view reads, in the order its URLs write them.
var filterParams = []string{"from", "to", "service", "operation", "model", "tenant"}

// parseView reads the filter of a request: missing dates give the last defaultDays days.
func (h *Handler) parseView(c echo.Context) (view, error) {
	tz := h.opt.Timezone
	now := h.now().In(tz)
	today := civil(now)
	v := view{Today: today.Format(time.DateOnly), tz: tz}
	q := c.QueryParams()
	for _, p := range []struct {
		name string
		dst  *string
	}{{"service", &v.Service}, {"operation", &v.Operation}, {"model", &v.Model}, {"tenant", &v.Tenant}} {
		*p.dst = strings.TrimSpace(q.Get(p.name))
		if len(*p.dst) > schema.MaxNameLen {
			return view{}, echo.NewHTTPError(http.StatusBadRequest, p.name+" is longer than any name the ledger stores")
		}
	}
	last, err := dateParam(q.Get("to"), today, "to")
	if err != nil {
		return view{}, err
	}
	first, err := dateParam(q.Get("from"), last.AddDate(0, 0, -(defaultDays-1)), "from")
	if err != nil {
		return view{}, err
	}
	if first.After(last) {
		return view{}, echo.NewHTTPError(http.StatusBadRequest, "from must be on or before to")
	}
	v.From, v.To = first.Format(time.DateOnly), last.Format(time.DateOnly)
	v.from = dayStart(first, tz)
	v.to = dayStart(last.AddDate(0, 0, 1), tz)
	return v, nil
}

// dateParam parses a YYYY-MM-DD query value; empty gives def.
func dateParam(s string, def time.Time, name string) (time.Time, error) {
	if s == "" {
		return def, nil
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return time.Time{}, echo.NewHTTPError(http.StatusBadRequest, name+" must be a date written YYYY-MM-DD")
	}
	return t, nil
}

// civil is t's local calendar day as a UTC midnight, the form view dates are computed in.
func civil(t time.Time) time.Time {
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// dayStart is the first instant of the calendar day d (a UTC midnight) in tz.
func dayStart(d time.Time, tz *time.Location) time.Time {
	return time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, tz)
}

// filter is the analytics filter of the view for a project.
func (v view) filter(projectID int64) analytics.Filter {
	return analytics.Filter{ProjectID: projectID, From: v.from, To: v.to, Service: v.Service,
		Operation: v.Operation, Model: v.Model, Tenant: v.Tenant}
}

// days lists the local days of the range, with the instant each starts, for chart axes.
func (v view) days() []day {
	var out []day
	first, _ := time.Parse(time.DateOnly, v.From)
	last, _ := time.Parse(time.DateOnly, v.To)
	for d := first; !d.After(last); d = d.AddDate(0, 0, 1) {
		out = append(out, day{Date: d.Format(time.DateOnly), Start: dayStart(d, v.tz)})
	}
	return out
}

// day is one local day of a range.
type day struct {
	Date  string
	Start time.Time
}

// values are the view's query parameters, empty ones left out.
func (v view) values() url.Values {
	q := url.Values{}
	for i, val := range []string{v.From, v.To, v.Service, v.Operation, v.Model, v.Tenant} {
		if val != "" {
			q.Set(filterParams[i], val)
		}
	}
	return q
}

// link returns path with the view's filter, changed by pairs of parameter and value ("" removes
// the parameter): the URL of a drill-down or of another page with the same filter.
func (v view) link(path string, change ...string) string {
	q := v.values()
	for i := 0; i+1 < len(change); i += 2 {
		if change[i+1] == "" {
			q.Del(change[i])
		} else {
			q.Set(change[i], change[i+1])
		}
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// preset is a quick choice of range.
type preset struct {
	Label, From, To string
}

// presets are the usual ranges, ending today.
func (v view) presets() []preset {
	today, _ := time.Parse(time.DateOnly, v.Today)
	f := func(t time.Time) string { return t.Format(time.DateOnly) }
	monthStart := time.Date(today.Year(), today.Month(), 1, 0, 0, 0, 0, time.UTC)
	return []preset{
		{"Today", f(today), f(today)},
		{"7 days", f(today.AddDate(0, 0, -6)), f(today)},
		{"30 days", f(today.AddDate(0, 0, -29)), f(today)},
		{"90 days", f(today.AddDate(0, 0, -89)), f(today)},
		{"This month", f(monthStart), f(today)},
		{"Last month", f(monthStart.AddDate(0, -1, 0)), f(monthStart.AddDate(0, 0, -1))},
	}
}
