package grafana_test

import (
	"context"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ledgerd/ledgerd/grafana"
	"github.com/ledgerd/ledgerd/schema"
)

// result is what one panel query returned.
type result struct {
	cols []string
	rows [][]any
}

// col returns the values of the named column.
func (r result) col(t *testing.T, name string) []any {
	t.Helper()
	i := slices.Index(r.cols, name)
	if i < 0 {
		t.Fatalf("no column %q in %v", name, r.cols)
	}
	out := make([]any, len(r.rows))
	for j, row := range r.rows {
		out[j] = row[i]
	}
	return out
}

// env returns the Grafana environment of a dashboard on the ledger: the range, the interval, and
// each variable resolved by running its query (as Grafana does on load), with chosen values for
// the variables in picks and All for the others.
func (l *ledger) env(t *testing.T, from, to time.Time, interval string, vars []grafana.Variable, picks map[string][]string) grafanaEnv {
	t.Helper()
	e := grafanaEnv{from: from, to: to, interval: interval, vars: map[string]varValue{}}
	for _, v := range vars {
		q, err := e.expand(v.Query)
		if err != nil {
			t.Fatalf("variable %s: %v", v.Name, err)
		}
		res := l.query(t, q)
		i := slices.Index(res.cols, "__value")
		if i < 0 {
			i = 0
		}
		var options []string
		for _, row := range res.rows {
			options = append(options, fmt.Sprint(row[i]))
		}
		if pick, ok := picks[v.Name]; ok {
			for _, p := range pick {
				if !slices.Contains(options, p) {
					t.Fatalf("variable %s offers %q, not %q", v.Name, options, p)
				}
			}
			e.vars[v.Name] = varValue{values: pick}
		} else {
			e.vars[v.Name] = varValue{values: options, all: true, allValue: v.AllValue}
		}
	}
	return e
}

func (l *ledger) query(t *testing.T, sql string) result {
	t.Helper()
	rows, err := l.pool.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("query: %v\n%s", err, sql)
	}
	defer rows.Close()
	var res result
	for _, f := range rows.FieldDescriptions() {
		res.cols = append(res.cols, f.Name)
	}
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			t.Fatalf("read row: %v\n%s", err, sql)
		}
		res.rows = append(res.rows, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("query: %v\n%s", err, sql)
	}
	return res
}

// run expands and runs every query of the dashboard, checking what Grafana needs of a time series
// result, and returns the results by panel title.
func (l *ledger) run(t *testing.T, d grafana.Dashboard, e grafanaEnv) map[string]result {
	t.Helper()
	out := map[string]result{}
	for _, p := range d.Panels {
		if len(p.Queries) != 1 {
			t.Fatalf("%s / %s: %d queries, want 1", d.Title, p.Title, len(p.Queries))
		}
		q := p.Queries[0]
		sql, err := e.expand(q.SQL)
		if err != nil {
			t.Fatalf("%s / %s: %v", d.Title, p.Title, err)
		}
		res := l.query(t, sql)
		if q.Format == grafana.FormatTimeSeries {
			i := slices.Index(res.cols, "time")
			if i < 0 {
				t.Errorf("%s / %s: time series without a time column: %v", d.Title, p.Title, res.cols)
			} else {
				for j := 1; j < len(res.rows); j++ {
					if timeOf(t, res.rows[j][i]).Before(timeOf(t, res.rows[j-1][i])) {
						t.Errorf("%s / %s: rows not sorted by time", d.Title, p.Title)
						break
					}
				}
			}
		}
		out[p.Title] = res
	}
	return out
}

// timeOf reads a time column: a timestamp, or epoch seconds as $__timeGroup gives them.
func timeOf(t *testing.T, v any) time.Time {
	t.Helper()
	switch x := v.(type) {
	case time.Time:
		return x
	case pgtype.Numeric:
		f, err := x.Float64Value()
		if err != nil {
			t.Fatal(err)
		}
		return time.Unix(int64(f.Float64), 0)
	}
	t.Fatalf("time column of type %T", v)
	return time.Time{}
}

// rat reads a numeric, float or integer value exactly.
func rat(t *testing.T, v any) *big.Rat {
	t.Helper()
	switch x := v.(type) {
	case nil:
		return nil
	case pgtype.Numeric:
		r := new(big.Rat).SetInt(x.Int)
		exp := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(x.Exp))), nil))
		if x.Exp < 0 {
			return r.Quo(r, exp)
		}
		return r.Mul(r, exp)
	case float64:
		return new(big.Rat).SetFloat64(x)
	case int64:
		return big.NewRat(x, 1)
	}
	t.Fatalf("value of type %T is not a number", v)
	return nil
}

func abs(n int32) int32 {
	if n < 0 {
		return -n
	}
	return n
}

// near reports whether got is within one part in 1e12 of want (for divisions PostgreSQL rounds).
func near(got, want *big.Rat) bool {
	if got == nil || want == nil {
		return got == want
	}
	diff := new(big.Rat).Sub(got, want)
	tol := new(big.Rat).Mul(new(big.Rat).Abs(want), big.NewRat(1, 1_000_000_000_000))
	return new(big.Rat).Abs(diff).Cmp(tol) <= 0
}

func dollarsOf(nanos int64) *big.Rat { return big.NewRat(nanos, 1_000_000_000) }

// wantColumns lists the columns of every PostgreSQL panel: a panel missing here fails the test, so
// a new panel's result shape is always checked.
var wantColumns = map[string][]string{
	"LLM cost/Spend":                                 {"spend"},
	"LLM cost/Month to date":                         {"month_to_date"},
	"LLM cost/Projected month":                       {"projected_month"},
	"LLM cost/Cost per call":                         {"cost_per_call"},
	"LLM cost/Unpriced attempts":                     {"unpriced_attempts"},
	"LLM cost/Spend by day and model":                {"time", "metric", "spend"},
	"LLM cost/Spend by service":                      {"time", "metric", "spend"},
	"LLM cost/Cost per call by model":                {"time", "metric", "cost_per_call"},
	"LLM cost/Spend by service and model":            {"service", "provider", "model", "calls", "attempts", "spend", "cost_per_call", "unpriced_attempts"},
	"LLM cost/Spend by tenant":                       {"tenant", "calls", "spend", "cost_per_call"},
	"Prompt cache/Cache read share":                  {"cache_read_share"},
	"Prompt cache/Saved by caching":                  {"saved"},
	"Prompt cache/Caches written, never read":        {"broken_caches"},
	"Prompt cache/Cache read share by model":         {"time", "metric", "cache_read_share"},
	"Prompt cache/Saved by caching, by service":      {"time", "metric", "saved"},
	"Prompt cache/Broken caches":                     {"service", "provider", "model", "prompt_hash", "write_calls", "written_tokens", "saved"},
	"Prompt cache/Cache use by service and model":    {"service", "provider", "model", "attempts", "write_calls", "read_calls", "cache_read_share", "saved"},
	"LLM reliability/Attempts per call":              {"attempts_per_call"},
	"LLM reliability/Error rate":                     {"error_rate"},
	"LLM reliability/Rate limited (429)":             {"rate_limited_share"},
	"LLM reliability/Fallback share":                 {"fallback_share"},
	"LLM reliability/Spend on failed attempts":       {"failed_spend"},
	"LLM reliability/Attempts per call by model":     {"time", "metric", "attempts_per_call"},
	"LLM reliability/Failed attempts by error class": {"time", "metric", "attempts"},
	"LLM reliability/Latency percentiles":            {"time", "p50", "p90", "p99"},
	"LLM reliability/By service and model":           {"service", "provider", "model", "calls", "attempts_per_call", "error_rate", "rate_limited_share", "p50_ms", "p90_ms", "p99_ms", "mean_ms"},
	"LLM reliability/Fallback paths":                 {"service", "fallback_from", "provider", "model", "attempts", "answered", "spend"},
}

func postgresDashboards() []grafana.Dashboard {
	var out []grafana.Dashboard
	for _, d := range grafana.Dashboards() {
		if d.Source == grafana.PostgresType {
			out = append(out, d)
		}
	}
	return out
}

// TestPanelsRunOnLedger runs every PostgreSQL panel's query, expanded as Grafana would, over
// several ranges and variable choices on a known ledger, and checks each result's columns.
func TestPanelsRunOnLedger(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	acme := strconv.FormatInt(l.projects["acme"], 10)
	end := day.AddDate(0, 0, 1)
	cases := []struct {
		name     string
		from, to time.Time
		interval string
		picks    map[string][]string
	}{
		{"one day by the hour", day, end, "1h", map[string][]string{"project": {acme}}},                                                           // the common view
		{"30 days by the day", end.AddDate(0, 0, -30), end, "1d", map[string][]string{"project": {acme}}},                                         // $__interval of days
		{"a month by 30 days", end.AddDate(0, -2, 0), end, "30d", map[string][]string{"project": {acme}}},                                         // intervals Go prints as 2.592e+06
		{"one service and model", day, end, "1h", map[string][]string{"project": {acme}, "service": {"checkout"}, "model": {"claude-haiku-5-5"}}}, // chosen values, quoted
		{"every project", day, end, "1h", nil}, // All on every variable
		{"empty range", day.AddDate(-1, 0, 0), day.AddDate(-1, 0, 1), "1h", map[string][]string{"project": {acme}}}, // no rows: NULL or zero, never an error
	}
	seen := map[string]bool{}
	for _, c := range cases {
		for _, d := range postgresDashboards() {
			res := l.run(t, d, l.env(t, c.from, c.to, c.interval, d.Variables, c.picks))
			for title, r := range res {
				key := d.Title + "/" + title
				seen[key] = true
				want, ok := wantColumns[key]
				if !ok {
					t.Errorf("%s: panel %q has no expected columns in wantColumns", c.name, key)
					continue
				}
				if !slices.Equal(r.cols, want) {
					t.Errorf("%s: %s columns %v, want %v", c.name, key, r.cols, want)
				}
			}
		}
	}
	for key := range wantColumns {
		if !seen[key] {
			t.Errorf("wantColumns lists %q, which no dashboard has", key)
		}
	}
}

// TestPanelFigures checks figures of each dashboard on the known ledger's day against totals
// computed from the records themselves.
func TestPanelFigures(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	acme := strconv.FormatInt(l.projects["acme"], 10)
	end := day.AddDate(0, 0, 1)
	results := map[string]map[string]result{}
	serviceResults := map[string]map[string]result{}
	monthResults := map[string]map[string]result{} // past 3 days: rollup_daily
	for _, d := range postgresDashboards() {
		results[d.Title] = l.run(t, d, l.env(t, day, end, "1h", d.Variables, map[string][]string{"project": {acme}}))
		monthResults[d.Title] = l.run(t, d, l.env(t, end.AddDate(0, 0, -30), end, "1h", d.Variables, map[string][]string{"project": {acme}}))
		serviceResults[d.Title] = l.run(t, d, l.env(t, day, end, "1h", d.Variables,
			map[string][]string{"project": {acme}, "service": {"checkout"}}))
	}
	one := func(dash, panel string, rs map[string]map[string]result) *big.Rat {
		r := rs[dash][panel]
		if len(r.rows) != 1 || len(r.cols) != 1 {
			t.Fatalf("%s / %s: %d rows of %v, want one figure", dash, panel, len(r.rows), r.cols)
		}
		return rat(t, r.rows[0][0])
	}

	all := func(entry) bool { return true }
	primary := func(e entry) bool { return onDay(e) && !e.a.Fallback }
	isFirst := func(a *schema.Attempt) int64 {
		if a.AttemptNo == 1 {
			return 1
		}
		return 0
	}
	spend := l.sum(onDay, cost)
	october := func(e entry) bool {
		d := e.a.StartedAt.In(ledgerTZ)
		return e.project == "acme" && d.Month() == time.October && !d.After(end)
	}
	mtd := l.sum(october, cost)
	week := func(e entry) bool {
		return e.project == "acme" && !e.a.StartedAt.Before(end.AddDate(0, 0, -7)) && e.a.StartedAt.Before(end)
	}
	remaining := time.Date(2026, 11, 1, 0, 0, 0, 0, ledgerTZ).Sub(end)
	projected := new(big.Rat).Add(dollarsOf(mtd), new(big.Rat).Mul(dollarsOf(l.sum(week, cost)),
		big.NewRat(int64(remaining), int64(7*24*time.Hour))))
	requests := l.sum(onDay, isFirst)
	primaryRequests := l.sum(primary, isFirst)
	primaryAttempts := l.sum(primary, count)
	status := func(keep func(schema.Attempt) bool) func(entry) bool {
		return func(e entry) bool { return primary(e) && keep(e.a) }
	}
	failed := l.sum(status(func(a schema.Attempt) bool { return a.Status != schema.StatusOK }), count)
	limited := l.sum(status(func(a schema.Attempt) bool { return a.ErrorClass == schema.ErrorRateLimited }), count)
	answeredByFallback := l.sum(func(e entry) bool { return onDay(e) && e.a.Fallback && e.a.Status == schema.StatusOK }, count)
	failedSpend := l.sum(func(e entry) bool { return onDay(e) && e.a.Status != schema.StatusOK }, cost)
	saved := l.sum(onDay, func(a *schema.Attempt) int64 { c := price(a); return int64(c.NoCache - c.Cost) })
	cacheRead := l.sum(onDay, func(a *schema.Attempt) int64 { return a.CacheReadTokens })
	inputAll := l.sum(onDay, func(a *schema.Attempt) int64 { return a.InputTokens + a.CacheWriteTokens + a.CacheReadTokens })
	checkout := l.sum(func(e entry) bool { return onDay(e) && e.a.Service == "checkout" }, cost)
	acmeAll := l.sum(func(e entry) bool { return e.project == "acme" }, cost)
	if l.sum(all, count) != int64(len(l.entries)) || spend == 0 || failed == 0 {
		t.Fatalf("known ledger lost its shape")
	}

	figures := []struct {
		name      string
		dash, pan string
		results   map[string]map[string]result
		want      *big.Rat
	}{
		{"the day's spend equals its records' cost", "LLM cost", "Spend", results, dollarsOf(spend)},
		{"a service filter keeps that service only", "LLM cost", "Spend", serviceResults, dollarsOf(checkout)},
		{"30 days come from whole local days", "LLM cost", "Spend", monthResults, dollarsOf(acmeAll)},
		{"month to date counts October's local days", "LLM cost", "Month to date", results, dollarsOf(mtd)},
		{"projection adds the week's rate for the rest of the month", "LLM cost", "Projected month", results, projected},
		{"cost per call divides by logical calls", "LLM cost", "Cost per call", results, new(big.Rat).Quo(dollarsOf(spend), big.NewRat(requests, 1))},
		{"unpriced attempts are counted", "LLM cost", "Unpriced attempts", results, big.NewRat(1, 1)},
		{"savings compare with caching off", "Prompt cache", "Saved by caching", results, dollarsOf(saved)},
		{"read share is of all input tokens", "Prompt cache", "Cache read share", results, big.NewRat(cacheRead, inputAll)},
		{"one prefix writes and never reads", "Prompt cache", "Caches written, never read", results, big.NewRat(1, 1)},
		{"attempts per call leave fallbacks out", "LLM reliability", "Attempts per call", results, big.NewRat(primaryAttempts, primaryRequests)},
		{"error rate of primary attempts", "LLM reliability", "Error rate", results, big.NewRat(failed, primaryAttempts)},
		{"429 share of primary attempts", "LLM reliability", "Rate limited (429)", results, big.NewRat(limited, primaryAttempts)},
		{"fallback share of logical calls", "LLM reliability", "Fallback share", results, big.NewRat(answeredByFallback, requests)},
		{"spend that bought no answer", "LLM reliability", "Spend on failed attempts", results, dollarsOf(failedSpend)},
	}
	for _, f := range figures {
		if got := one(f.dash, f.pan, f.results); !near(got, f.want) {
			t.Errorf("%s: %s / %s = %s, want %s", f.name, f.dash, f.pan, got.FloatString(12), f.want.FloatString(12))
		}
	}

	// The daily bars add up to the day's spend, all at the local midnight of the day.
	bars := results["LLM cost"]["Spend by day and model"]
	total := new(big.Rat)
	for i, v := range bars.col(t, "spend") {
		total.Add(total, rat(t, v))
		if got := timeOf(t, bars.rows[i][0]); !got.Equal(day) {
			t.Errorf("spend by day: bar at %v, want %v", got, day)
		}
	}
	if total.Cmp(dollarsOf(spend)) != 0 {
		t.Errorf("spend by day adds up to %s, want %s", total.FloatString(9), dollarsOf(spend).FloatString(9))
	}

	// Past 3 days the series have one point per local day, at its midnight.
	byService := monthResults["LLM cost"]["Spend by service"]
	total = new(big.Rat)
	for i, v := range byService.col(t, "spend") {
		total.Add(total, rat(t, v))
		at := timeOf(t, byService.rows[i][0]).In(ledgerTZ)
		if at.Hour() != 0 || at.Minute() != 0 {
			t.Errorf("spend by service over 30 days: point at %v, not a local midnight", at)
		}
	}
	points := map[string]bool{} // (local day, service) pairs of acme
	for _, e := range l.entries {
		if e.project == "acme" {
			points[e.a.StartedAt.In(ledgerTZ).Format(time.DateOnly)+"/"+e.a.Service] = true
		}
	}
	if total.Cmp(dollarsOf(acmeAll)) != 0 || len(byService.rows) != len(points) {
		t.Errorf("spend by service over 30 days: %d points adding up to %s, want %d adding up to %s",
			len(byService.rows), total.FloatString(9), len(points), dollarsOf(acmeAll).FloatString(9))
	}

	// The broken cache is search's prefix, written three times.
	broken := results["Prompt cache"]["Broken caches"]
	if len(broken.rows) != 1 || broken.rows[0][0] != "search" || broken.rows[0][3] != "p-broken" || rat(t, broken.rows[0][4]).Cmp(big.NewRat(3, 1)) != 0 {
		t.Errorf("broken caches %v, want search's p-broken written 3 times", broken.rows)
	}

	// Latency percentiles: nearest-rank on successful primary attempts, at the bucket midpoint.
	table := results["LLM reliability"]["By service and model"]
	var row []any
	for _, r := range table.rows {
		if r[0] == "checkout" {
			row = r
		}
	}
	var lat []int64
	for _, e := range l.entries {
		if primary(e) && e.a.Service == "checkout" && e.a.Status == schema.StatusOK {
			lat = append(lat, e.a.LatencyMS)
		}
	}
	slices.Sort(lat)
	for _, q := range []struct {
		col  string
		rank int
	}{{"p50_ms", (len(lat) + 1) / 2}, {"p99_ms", len(lat)}} {
		i := slices.Index(table.cols, q.col)
		want := bucketMidpoint(latencyBucket(lat[q.rank-1]))
		if got, ok := row[i].(float64); row == nil || !ok || math.Abs(got-want) > want*1e-12 {
			t.Errorf("checkout %s = %v, want %v (latency %d ms)", q.col, row, want, lat[q.rank-1])
		}
	}

	// The fallback is listed as a path from the model it stood in for, apart from primary figures.
	paths := results["LLM reliability"]["Fallback paths"]
	if len(paths.rows) != 1 || paths.rows[0][1] != "gpt-5-mini" || paths.rows[0][3] != "claude-haiku-5-5" || rat(t, paths.rows[0][5]).Cmp(big.NewRat(1, 1)) != 0 {
		t.Errorf("fallback paths %v, want gpt-5-mini answered once by claude-haiku-5-5", paths.rows)
	}
}
