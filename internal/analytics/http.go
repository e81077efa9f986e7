package analytics

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ledgerd/ledgerd/internal/server"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/schema"
)

// Mount adds the query API to the server's authenticated /v1 group; each answer covers the
// project of the request's API key only:
//
//	GET /v1/summary?from=&to=&group_by=&step=&attempts=&service=&model=&tenant=&operation=&provider=
//	GET /v1/projection?month=YYYY-MM&service=
//	GET /v1/cache?from=&to=&min_calls=&service=&model=&tenant=&operation=&provider=
//	GET /v1/prices
//	GET /v1/cost-mismatches?from=&to=
//	GET /v1/peaks?from=&to=&group_by=&org=&provider=&model=&service= (peaks.go)
//	GET /v1/incidents?from=&to= (incidents.go)
//
// from and to are RFC 3339 times or YYYY-MM-DD local dates (the start of that day); to is
// exclusive; both default to the last 7 local days, today included (to is then the end of today).
// group_by is a comma-separated
// list of model, service, operation, tenant, provider and day, hour or minute; step (1m or 5m,
// with minute only) is the width of a minute group; attempts=true adds each group's calls by
// number of attempts (read from the raw attempts). A bad or unknown parameter is answered 400
// naming it.
func (s *Service) Mount(srv *server.Server) {
	g := srv.API
	g.GET("/summary", s.getSummary)
	g.GET("/projection", s.getProjection)
	g.GET("/cache", s.getCache)
	g.GET("/prices", s.getPrices)
	g.GET("/cost-mismatches", s.getMismatches)
	g.GET("/peaks", s.getPeaks)
	g.GET("/incidents", s.getIncidents)
}

func (s *Service) getIncidents(c echo.Context) error {
	var bad paramErrors
	q := bad.queryParams(c.QueryParams(), []string{"from", "to", "open"})
	f := bad.parseFilter(q, s.tz)
	open := bad.parseBool(q, "open")
	if err := bad.err(); err != nil {
		return fail(err)
	}
	f.ProjectID = server.ProjectOf(c).ID
	list, err := s.incidents(c.Request().Context(), f, DefaultIncidentParams, open)
	if err != nil {
		return fail(err)
	}
	return c.JSON(http.StatusOK, list)
}

// Query parameters each endpoint takes.
var (
	filterParams     = []string{"from", "to", "service", "model", "tenant", "operation", "provider"}
	summaryParams    = append([]string{"group_by", "step", "attempts", "top"}, filterParams...)
	cacheParams      = append([]string{"min_calls"}, filterParams...)
	projectionParams = []string{"month", "service"}
)

// CacheAnswer is the body of GET /v1/cache.
type CacheAnswer struct {
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	MinCalls int       `json:"min_calls"`
	// BrokenCaches counts the models with a broken cache, each once (BrokenCaches).
	BrokenCaches int        `json:"broken_caches"`
	Rows         []CacheRow `json:"rows"`
}

func (s *Service) getSummary(c echo.Context) error {
	var bad paramErrors
	q := bad.queryParams(c.QueryParams(), summaryParams)
	f := bad.parseFilter(q, s.tz)
	dims, err := parseGroupBy(q["group_by"])
	bad.add(err)
	top, err := parseTop(q["top"])
	bad.add(err)
	f.WithAttempts = bad.parseBool(q, "attempts")
	if v, ok := q["step"]; ok {
		f.Step, err = parseStep(v, dims)
		bad.add(err)
	}
	if err := bad.err(); err != nil {
		return fail(err)
	}
	f.ProjectID = server.ProjectOf(c).ID
	var sum Summary
	if top > 0 {
		sum, err = s.SummaryTop(c.Request().Context(), f, top, dims...)
	} else {
		sum, err = s.Summary(c.Request().Context(), f, dims...)
	}
	if err != nil {
		return fail(err)
	}
	return c.JSONBlob(http.StatusOK, sum.encode())
}

// parseTop reads the top parameter: how many groups, the costliest, a summary keeps (0: all).
func parseTop(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 100_000 {
		return 0, badParam("top", "want a whole number from 1 to 100000, got %q", truncate(v))
	}
	return n, nil
}

func (s *Service) getProjection(c echo.Context) error {
	var bad paramErrors
	q := bad.queryParams(c.QueryParams(), projectionParams)
	month := s.now().In(s.tz)
	if v, ok := q["month"]; ok {
		var err error
		month, err = parseMonth(v)
		bad.add(err)
	}
	if err := bad.err(); err != nil {
		return fail(err)
	}
	p, err := s.Projection(c.Request().Context(), server.ProjectOf(c).ID, month, q["service"])
	if err != nil {
		return fail(err)
	}
	return c.JSON(http.StatusOK, p)
}

func (s *Service) getCache(c echo.Context) error {
	var bad paramErrors
	q := bad.queryParams(c.QueryParams(), cacheParams)
	f := bad.parseFilter(q, s.tz)
	minCalls, err := parseMinCalls(q["min_calls"])
	bad.add(err)
	if err := bad.err(); err != nil {
		return fail(err)
	}
	f.ProjectID = server.ProjectOf(c).ID
	// The effective range, fixed once so the answer echoes exactly the range it covers.
	if f.From, f.To, err = s.window(f.From, f.To, true); err != nil {
		return fail(err)
	}
	rows, err := s.Cache(c.Request().Context(), f, minCalls)
	if err != nil {
		return fail(err)
	}
	if rows == nil {
		rows = []CacheRow{}
	}
	a := CacheAnswer{From: f.From.In(s.tz), To: f.To.In(s.tz), MinCalls: minCalls, BrokenCaches: BrokenCaches(rows), Rows: rows}
	return c.JSONBlob(http.StatusOK, a.encode())
}

// paramErrors collects every bad parameter of a request, so that one answer names them all
// rather than the first.
type paramErrors []*ParamError

// add keeps err when it is a bad parameter; other errors cannot come from parsing.
func (b *paramErrors) add(err error) {
	var pe *ParamError
	if errors.As(err, &pe) {
		*b = append(*b, pe)
	}
}

// err is the first bad parameter, carrying the others (ParamError.Others), or nil.
func (b paramErrors) err() error {
	if len(b) == 0 {
		return nil
	}
	first := *b[0]
	first.Others = b[1:]
	return &first
}

// fail maps an error to its HTTP answer: 400 for a bad parameter, 404 for an unknown project, 503
// when the database is unreachable; anything else is a 500 the server logs.
func fail(err error) error {
	var pe *ParamError
	switch {
	case errors.As(err, &pe):
		return echo.NewHTTPError(http.StatusBadRequest, pe.Error())
	case errors.Is(err, store.ErrNotFound):
		return echo.NewHTTPError(http.StatusNotFound, err.Error())
	case store.IsUnavailable(err):
		return echo.NewHTTPError(http.StatusServiceUnavailable, "database unavailable").SetInternal(err)
	}
	return err
}

// queryParams returns the allowed parameters of q given once, adding an error for each unknown
// or repeated one.
func (b *paramErrors) queryParams(q url.Values, allowed []string) map[string]string {
	names := make([]string, 0, len(q))
	for n := range q {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make(map[string]string, len(q))
	for _, n := range names {
		if !slices.Contains(allowed, n) {
			name := truncate(n)
			if name == "" {
				name = `""`
			}
			b.add(badParam(name, "unknown parameter (this endpoint takes %s)", strings.Join(allowed, ", ")))
			continue
		}
		if len(q[n]) > 1 {
			b.add(badParam(n, "given more than once"))
			continue
		}
		out[n] = q[n][0]
	}
	return out
}

// parseBool reads the boolean parameter name, false when absent, adding an error when it is not
// one.
func (b *paramErrors) parseBool(q map[string]string, name string) bool {
	v, ok := q[name]
	if !ok {
		return false
	}
	t, err := strconv.ParseBool(v)
	if err != nil {
		b.add(badParam(name, "want true or false, got %q", truncate(v)))
	}
	return t
}

// parseFilter reads a Filter (without its project) from query parameters, adding an error for
// each bad one; absent times are zero, which Summary and Cache take as their defaults.
func (b *paramErrors) parseFilter(q map[string]string, tz *time.Location) Filter {
	var f Filter
	var err error
	if v, ok := q["from"]; ok {
		f.From, err = parseTime("from", v, tz)
		b.add(err)
	}
	if v, ok := q["to"]; ok {
		f.To, err = parseTime("to", v, tz)
		b.add(err)
	}
	for _, p := range []struct {
		name string
		dst  *string
	}{{"service", &f.Service}, {"model", &f.Model}, {"tenant", &f.Tenant}, {"operation", &f.Operation}, {"provider", &f.Provider}} {
		v := q[p.name]
		if len(v) > schema.MaxNameLen {
			b.add(badParam(p.name, "longer than %d bytes", schema.MaxNameLen))
			continue
		}
		*p.dst = v
	}
	return f
}

// parseTime reads an RFC 3339 time or a YYYY-MM-DD local date (meaning the start of that day in tz).
func parseTime(name, v string, tz *time.Location) (time.Time, error) {
	if len(v) == len(time.DateOnly) {
		d, err := time.Parse(time.DateOnly, v)
		if err == nil {
			return date{d.Year(), d.Month(), d.Day()}.start(tz), nil
		}
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, badParam(name, "want an RFC 3339 time or a YYYY-MM-DD date, got %q", truncate(v))
	}
	if t.Year() < 2000 || t.Year() > 9000 {
		return time.Time{}, badParam(name, "%q is out of range", truncate(v))
	}
	return t, nil
}

// parseMonth reads YYYY-MM.
func parseMonth(v string) (time.Time, error) {
	t, err := time.Parse("2006-01", v)
	if err != nil || t.Year() < 2000 {
		return time.Time{}, badParam("month", "want YYYY-MM, got %q", truncate(v))
	}
	return t, nil
}

// parseGroupBy splits a comma-separated list of dimensions and checks it.
func parseGroupBy(v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	dims := strings.Split(v, ",")
	for i := range dims {
		dims[i] = strings.TrimSpace(dims[i])
	}
	if _, err := parseGrouping(dims); err != nil {
		return nil, err
	}
	return dims, nil
}

func parseMinCalls(v string) (int, error) {
	if v == "" {
		return DefaultMinCalls, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1_000_000_000 {
		return 0, badParam("min_calls", "want a whole number from 1 to 1000000000, got %q", truncate(v))
	}
	return n, nil
}

// parseStep reads the width of a summary's minute groups: 1m or 5m, with group_by minute only.
func parseStep(v string, dims []string) (time.Duration, error) {
	if !slices.Contains(dims, ByMinute) {
		return 0, badParam("step", "applies to group_by=minute only")
	}
	d, err := time.ParseDuration(v)
	if err != nil || !slices.Contains(minuteSteps, d) {
		return 0, badParam("step", "want 1m or 5m, got %q", truncate(v))
	}
	return d, nil
}
