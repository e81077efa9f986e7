package web

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/sync/errgroup"

	"github.com/ledgerd/ledgerd/alerts"
	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/numfmt"
	"github.com/ledgerd/ledgerd/internal/server"
	"github.com/ledgerd/ledgerd/schema"
)

// bucket is one rate-limit bucket: the limits a provider sets are an organization's, per model.
type bucket struct {
	Org, Provider, Model string
}

// label names a bucket for people.
func (b bucket) label() string {
	org := b.Org
	if org == "" {
		org = "(no org)"
	}
	return org + " · " + b.Provider + " / " + b.Model
}

// loadData is what the Load page shows: one bucket's minutes on one day against its reported
// limits, the week's daily peaks, and every bucket of the week.
type loadData struct {
	Day     string // the local day shown, YYYY-MM-DD
	Week    string // the first day of the week that ends on Day
	Bucket  bucket
	Buckets []bucketRow
	// Peak is the bucket's peaks of Day (nil: no load that day).
	Peak       *analytics.PeakGroup
	Requests   chartSpec
	Tokens     chartSpec
	DailyPeaks chartSpec
	// Busiest are the day's busiest minutes, for the table under the charts.
	Busiest []analytics.LoadMinute
	TZ      *time.Location
}

// bucketRow is a bucket's peaks over the week, with the link that shows it.
type bucketRow struct {
	bucket
	Peak analytics.PeakGroup
	Link string
}

// topServices is how many services the requests chart draws apart from their sum.
const topServices = 4

// load shows an organization's peak load against its provider's rate limits: requests and tokens
// per minute of one bucket (org, provider, model) on one day, every service summed, against the
// limit the provider reported; the bucket's daily peaks over the week; and which service took the
// largest share of the peak minute.
func (h *Handler) load(c echo.Context) error {
	v, err := h.parseView(c)
	if err != nil {
		return err
	}
	q := c.QueryParams()
	today, _ := time.Parse(time.DateOnly, v.Today)
	dayT, err := dateParam(q.Get("day"), today, "day")
	if err != nil {
		return err
	}
	sel := bucket{Org: q.Get("org"), Provider: q.Get("provider"), Model: q.Get("model")}
	for _, s := range []string{sel.Org, sel.Provider, sel.Model} {
		if len(s) > schema.MaxNameLen {
			return echo.NewHTTPError(http.StatusBadRequest, "org, provider and model are at most 128 bytes")
		}
	}
	tz := h.opt.Timezone
	d := loadData{Day: dayT.Format(time.DateOnly), Week: dayT.AddDate(0, 0, -6).Format(time.DateOnly), TZ: tz}
	project := server.ProjectOf(c).ID
	ctx := c.Request().Context()
	week := analytics.PeakFilter{ProjectID: project, From: dayStart(dayT.AddDate(0, 0, -6), tz), To: dayStart(dayT.AddDate(0, 0, 1), tz)}
	buckets, err := h.opt.Analytics.Peaks(ctx, week, analytics.ByOrg, analytics.ByProvider, analytics.ByModel)
	if err != nil {
		return h.dataError(err)
	}
	for _, g := range buckets.Groups {
		b := bucket{Org: deref(g.Key.Org), Provider: deref(g.Key.Provider), Model: deref(g.Key.Model)}
		d.Buckets = append(d.Buckets, bucketRow{bucket: b, Peak: g, Link: loadLink(d.Day, b)})
	}
	// The busiest bucket of the week first: the one to look at when none is chosen.
	slices.SortStableFunc(d.Buckets, func(a, b bucketRow) int {
		return cmp.Or(cmp.Compare(b.Peak.Requests.Peak, a.Peak.Requests.Peak), strings.Compare(a.label(), b.label()))
	})
	if sel == (bucket{}) && len(d.Buckets) > 0 {
		sel = d.Buckets[0].bucket
	}
	d.Bucket = sel
	f := analytics.PeakFilter{ProjectID: project, From: week.From, To: week.To, Org: sel.Org, Provider: sel.Provider, Model: sel.Model}
	var daily analytics.Peaks
	var minutes []analytics.LoadMinute
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		daily, err = h.opt.Analytics.Peaks(gctx, f, analytics.ByOrg, analytics.ByProvider, analytics.ByModel, analytics.ByDay)
		return err
	})
	g.Go(func() (err error) { minutes, err = h.opt.Analytics.LoadMinutes(gctx, f, d.Day); return err })
	if err := g.Wait(); err != nil {
		return h.dataError(err)
	}
	for i := range daily.Groups {
		if daily.Groups[i].Key.Day == d.Day {
			d.Peak = &daily.Groups[i]
		}
	}
	d.Requests, d.Tokens = minuteCharts(dayStart(dayT, tz), tz, minutes)
	d.DailyPeaks = dailyPeakChart(dayT, tz, daily.Groups)
	d.Busiest = slices.Clone(minutes)
	slices.SortStableFunc(d.Busiest, func(a, b analytics.LoadMinute) int { return cmp.Compare(b.Requests, a.Requests) })
	d.Busiest = d.Busiest[:min(len(d.Busiest), 10)]
	fr := h.page(c, "Load")
	fr.Filter = v
	return h.render(c, 200, loadView(fr, d))
}

// loadLink is the Load page of a bucket on a day.
func loadLink(day string, b bucket) string {
	q := url.Values{"day": {day}, "org": {b.Org}, "provider": {b.Provider}, "model": {b.Model}}
	return "/load?" + q.Encode()
}

// minuteCharts draws one day's minutes from start: requests per minute, all services summed and
// the busiest few apart, and tokens per minute, each against the limit reported in the minute
// (dashed, across minutes that reported none).
func minuteCharts(start time.Time, tz *time.Location, minutes []analytics.LoadMinute) (requests, tokens chartSpec) {
	end := start.AddDate(0, 0, 1)
	n := int(end.Sub(start) / time.Minute) // 1,380 to 1,500 on the days clocks change
	newSpec := func() chartSpec {
		c := chartSpec{Kind: "lines", Unit: "count", TZ: tz.String(), Step: 60, X: make([]int64, n)}
		for i := range c.X {
			c.X[i] = start.Add(time.Duration(i) * time.Minute).Unix()
		}
		return c
	}
	requests, tokens = newSpec(), newSpec()
	series := func(label string, join bool) chartSeries {
		s := chartSeries{Label: label, Values: make([]any, n), Text: make([]string, n), Join: join}
		for i := range s.Text {
			if !join {
				s.Values[i], s.Text[i] = 0, "0"
			} else {
				s.Text[i] = "–"
			}
		}
		return s
	}
	if len(minutes) == 0 {
		requests.X, tokens.X = nil, nil
		return requests, tokens
	}
	totals := map[string]int64{}
	for _, m := range minutes {
		for s, r := range m.ByService {
			totals[s] += r
		}
	}
	services := topLabels(totals, cmpInt64)
	services = services[:min(len(services), topServices)]
	all, tok := series("All services", false), series("All services", false)
	reqLimit, tokLimit := series("Reported limit", true), series("Reported limit", true)
	apart := make([]chartSeries, len(services))
	for i, s := range services {
		apart[i] = series(s, false)
	}
	for _, m := range minutes {
		i := int(m.Minute.Sub(start) / time.Minute)
		if i < 0 || i >= n {
			continue
		}
		all.Values[i], all.Text[i] = m.Requests, numfmt.Count(m.Requests)
		if m.RateLimited > 0 {
			all.Text[i] += " (" + numfmt.Count(m.RateLimited) + " refused, 429)"
		}
		t := m.InputTokens + m.OutputTokens
		tok.Values[i], tok.Text[i] = t, numfmt.Count(t)
		for j, s := range services {
			apart[j].Values[i], apart[j].Text[i] = m.ByService[s], numfmt.Count(m.ByService[s])
		}
		if m.RequestsLimit > 0 {
			reqLimit.Values[i], reqLimit.Text[i] = m.RequestsLimit, numfmt.Count(m.RequestsLimit)
		}
		if m.TokensLimit > 0 {
			tokLimit.Values[i], tokLimit.Text[i] = m.TokensLimit, numfmt.Count(m.TokensLimit)
		}
	}
	requests.Series = append(append([]chartSeries{all}, apart...), reqLimit)
	tokens.Series = []chartSeries{tok, tokLimit}
	return requests, tokens
}

// dailyPeakChart draws the week ending on day: each day's peak requests per minute, and the
// limit of the day's lowest headroom.
func dailyPeakChart(day time.Time, tz *time.Location, groups []analytics.PeakGroup) chartSpec {
	c := chartSpec{Kind: "lines", Unit: "count", TZ: tz.String(), Step: 86400}
	peaks := chartSeries{Label: "Peak requests per minute"}
	limits := chartSeries{Label: "Reported limit", Join: true}
	byDay := map[string]analytics.PeakGroup{}
	for _, g := range groups {
		byDay[g.Key.Day] = g
	}
	for i := 6; i >= 0; i-- {
		d := day.AddDate(0, 0, -i)
		date := d.Format(time.DateOnly)
		c.X = append(c.X, dayStart(d, tz).Unix())
		c.Days = append(c.Days, date)
		g, ok := byDay[date]
		if !ok {
			peaks.Values, peaks.Text = append(peaks.Values, 0), append(peaks.Text, "0")
			limits.Values, limits.Text = append(limits.Values, nil), append(limits.Text, "–")
			continue
		}
		text := numfmt.Count(g.Requests.Peak) + " at " + g.Requests.Minute.In(tz).Format("15:04")
		peaks.Values, peaks.Text = append(peaks.Values, g.Requests.Peak), append(peaks.Text, text)
		if h := g.Headroom.Requests; h != nil {
			limits.Values, limits.Text = append(limits.Values, h.Limit), append(limits.Text, numfmt.Count(h.Limit))
		} else {
			limits.Values, limits.Text = append(limits.Values, nil), append(limits.Text, "–")
		}
	}
	c.Series = []chartSeries{peaks, limits}
	return c
}

// headroomText writes a reported headroom: "12 of 500 left (2.4%)", or "–" when none was reported.
func headroomText(h *analytics.Headroom) string {
	if h == nil {
		return "–"
	}
	share := h.Share
	return numfmt.Count(h.Remaining) + " of " + numfmt.Count(h.Limit) + " left (" + percent(&share) + ")"
}

// topShare writes the service that took the largest share of a peak minute.
func topShare(g *analytics.PeakGroup) string {
	if g == nil || len(g.Services) == 0 {
		return "–"
	}
	s := g.Services[0]
	share := s.Share
	return s.Service + " (" + numfmt.Count(s.Requests) + ", " + percent(&share) + ")"
}

// minuteOf writes a peak minute in the page's zone.
func minuteOf(t time.Time, tz *time.Location) string {
	if t.IsZero() {
		return "–"
	}
	return t.In(tz).Format("Mon 2 Jan 15:04")
}

// lowHeadroom tells whether a headroom is under the headroom alert's default (10%).
func lowHeadroom(h *analytics.Headroom) bool {
	limit, _ := alerts.DefaultMinHeadroom().Float64()
	return h != nil && h.Share < limit
}

// servicesText lists a minute's requests per service, largest first: "support-bot 300, search 180".
func servicesText(m analytics.LoadMinute) string {
	var parts []string
	for _, s := range topLabels(m.ByService, cmpInt64) {
		parts = append(parts, s+" "+numfmt.Count(m.ByService[s]))
	}
	return strings.Join(parts, ", ")
}
