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
// local days, or the last hour, 6 hours or 24 hours (Last), and optionally one service,
// operation, model and tenant. The project is always the logged-in one and never comes from the
// URL.
type view struct {
	// From and To are the first and last local days shown (YYYY-MM-DD), both included.
	From, To                          string
	Service, Operation, Model, Tenant string
	// Last is "1h", "6h" or "24h" for a range ending now, "" for a range of days.
	Last string
	// Today is the local date now, for the range presets.
	Today string
	now   time.Time

	from, to time.Time // the range as [from, to)
	// exact holds from and to as the URL gave them when they were times (RFC 3339), not dates:
	// the range around an incident.
	exact [2]string
	step  time.Duration
	tz    *time.Location
}

// filterParams are the query parameters a view reads, in the order its URLs write them.
var filterParams = []string{"from", "to", "last", "service", "operation", "model", "tenant"}

// lastRanges are the ranges ending now a view may show (the "last" parameter), with their length.
var lastRanges = []struct {
	Param, Label string
	Span         time.Duration
}{
	{"1h", "Last hour", time.Hour},
	{"6h", "Last 6 hours", 6 * time.Hour},
	{"24h", "Last 24 hours", 24 * time.Hour},
}

// Steps of a chart: the resolution follows the range.
const (
	stepMinute  = time.Minute
	stepMinute5 = 5 * time.Minute
	stepHour    = time.Hour
	stepDay     = 24 * time.Hour
	// maxHourSteps is the longest range drawn by the hour: three days (72 points).
	maxHourSteps = 3 * 24 * time.Hour
)

// stepFor is the distance between a chart's points over a range of length span: a minute up to an
// hour, five minutes up to six hours, an hour up to three days (a one-day range is 24 hourly
// points), and a day beyond.
func stepFor(span time.Duration) time.Duration {
	switch {
	case span <= time.Hour:
		return stepMinute
	case span <= 6*time.Hour:
		return stepMinute5
	case span <= maxHourSteps:
		return stepHour
	}
	return stepDay
}

// parseView reads the filter of a request: missing dates give the last defaultDays days.
func (h *Handler) parseView(c echo.Context) (view, error) {
	tz := h.opt.Timezone
	now := h.now().In(tz)
	today := civil(now)
	v := view{Today: today.Format(time.DateOnly), tz: tz, now: now}
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
	if f, t := q.Get("from"), q.Get("to"); len(f) > len(time.DateOnly) && len(t) > len(time.DateOnly) {
		if err := v.setTimes(f, t); err != nil {
			return view{}, err
		}
		return v, nil
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
	if l := q.Get("last"); l != "" {
		if err := v.setLast(l, now); err != nil {
			return view{}, err
		}
	}
	v.step = stepFor(v.to.Sub(v.from))
	return v, nil
}

// nowTime is the moment the view was read.
func (v view) nowTime() time.Time { return v.now }

// setTimes makes the view's range [f, t), two RFC 3339 times.
func (v *view) setTimes(f, t string) error {
	from, err1 := time.Parse(time.RFC3339, f)
	to, err2 := time.Parse(time.RFC3339, t)
	if err1 != nil || err2 != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "from and to must be dates written YYYY-MM-DD or times in RFC 3339")
	}
	if !from.Before(to) || to.Sub(from) > 31*24*time.Hour {
		return echo.NewHTTPError(http.StatusBadRequest, "from must be before to, at most 31 days apart")
	}
	v.exact = [2]string{f, t}
	v.from, v.to = from, to
	v.From, v.To = civil(from.In(v.tz)).Format(time.DateOnly), civil(to.Add(-time.Nanosecond).In(v.tz)).Format(time.DateOnly)
	v.step = stepFor(to.Sub(from))
	if v.step < stepDay {
		// Points are whole steps: the range is widened to them.
		v.from, v.to = from.Truncate(v.step), to.Add(v.step-time.Nanosecond).Truncate(v.step)
	} else {
		// By day, the range is the days it touches.
		first, _ := time.Parse(time.DateOnly, v.From)
		last, _ := time.Parse(time.DateOnly, v.To)
		v.from, v.to = dayStart(first, v.tz), dayStart(last.AddDate(0, 0, 1), v.tz)
	}
	return nil
}

// setLast makes the view's range the last hour, 6 hours or 24 hours (l) up to now, its end
// rounded up to a whole step of the range, so the points are whole minutes or hours.
func (v *view) setLast(l string, now time.Time) error {
	for _, r := range lastRanges {
		if r.Param == l {
			step := stepFor(r.Span)
			v.Last = l
			v.to = now.Add(step - time.Nanosecond).Truncate(step)
			v.from = v.to.Add(-r.Span)
			v.From, v.To = civil(v.from.In(v.tz)).Format(time.DateOnly), civil(v.to.Add(-time.Nanosecond).In(v.tz)).Format(time.DateOnly)
			return nil
		}
	}
	return echo.NewHTTPError(http.StatusBadRequest, "last must be 1h, 6h or 24h")
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
	f := analytics.Filter{ProjectID: projectID, From: v.from, To: v.to, Service: v.Service,
		Operation: v.Operation, Model: v.Model, Tenant: v.Tenant}
	if v.step < time.Hour {
		f.Step = v.step
	}
	return f
}

// timeDim is the summary dimension a chart of the view groups by: day, hour or minute.
func (v view) timeDim() string {
	switch {
	case v.step >= stepDay:
		return analytics.ByDay
	case v.step >= stepHour:
		return analytics.ByHour
	}
	return analytics.ByMinute
}

// points lists the points of the range's charts, each with the instant it starts and its label:
// local days, or the hours or minutes (of the view's step) in the range.
func (v view) points() []point {
	var out []point
	if v.step >= stepDay {
		first, _ := time.Parse(time.DateOnly, v.From)
		last, _ := time.Parse(time.DateOnly, v.To)
		for d := first; !d.After(last); d = d.AddDate(0, 0, 1) {
			out = append(out, point{Label: d.Format(time.DateOnly), Start: dayStart(d, v.tz)})
		}
		return out
	}
	layout := "2006-01-02 15:04"
	for t := v.from; t.Before(v.to); t = t.Add(v.step) {
		out = append(out, point{Label: t.In(v.tz).Format(layout), Start: t})
	}
	return out
}

// per names the view's step, as a chart's title says it: "per day", "per hour", ...
func (v view) per() string {
	switch v.step {
	case stepDay:
		return "per day"
	case stepHour:
		return "per hour"
	case stepMinute5:
		return "per 5 minutes"
	}
	return "per minute"
}

// point is one point of a chart: a local day, an hour or a minute.
type point struct {
	Label string
	Start time.Time
}

// pointOf is the label of the point a group of the view's time dimension falls on.
func (v view) pointOf(k analytics.Key) string {
	var t *time.Time
	switch {
	case k.Day != "":
		return k.Day
	case k.Hour != nil:
		t = k.Hour
	case k.Minute != nil:
		t = k.Minute
	default:
		return ""
	}
	return t.In(v.tz).Format("2006-01-02 15:04")
}

// values are the view's query parameters, empty ones left out: a range ending now leaves out the
// dates.
func (v view) values() url.Values {
	q := url.Values{}
	from, to := v.From, v.To
	switch {
	case v.Last != "":
		from, to = "", ""
	case v.exact[0] != "":
		from, to = v.exact[0], v.exact[1]
	}
	for i, val := range []string{from, to, v.Last, v.Service, v.Operation, v.Model, v.Tenant} {
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

// preset is a quick choice of range: the last hours (Last) or local days.
type preset struct {
	Label, From, To, Last string
}

// link is the URL of path with the view's filter over the preset's range.
func (p preset) link(v view, path string) string {
	if p.Last != "" {
		return v.link(path, "from", "", "to", "", "last", p.Last)
	}
	return v.link(path, "from", p.From, "to", p.To, "last", "")
}

// presets are the usual ranges, ending now or today.
func (v view) presets() []preset {
	today, _ := time.Parse(time.DateOnly, v.Today)
	f := func(t time.Time) string { return t.Format(time.DateOnly) }
	monthStart := time.Date(today.Year(), today.Month(), 1, 0, 0, 0, 0, time.UTC)
	var out []preset
	for _, r := range lastRanges {
		out = append(out, preset{Label: r.Label, Last: r.Param})
	}
	return append(out, []preset{
		{"Today", f(today), f(today), ""},
		{"7 days", f(today.AddDate(0, 0, -6)), f(today), ""},
		{"30 days", f(today.AddDate(0, 0, -29)), f(today), ""},
		{"90 days", f(today.AddDate(0, 0, -89)), f(today), ""},
		{"This month", f(monthStart), f(today), ""},
		{"Last month", f(monthStart.AddDate(0, -1, 0)), f(monthStart.AddDate(0, 0, -1)), ""},
	}...)
}
