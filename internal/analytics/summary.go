package analytics

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"golang.org/x/sync/errgroup"

	"github.com/ledgerd/ledgerd/internal/rollup"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/schema"
)

// The dimensions Summary groups by. Day is the local day in the Service's timezone, hour the UTC
// hour, minute the UTC minute (or the Filter's Step of minutes); at most one of the three.
const (
	ByModel     = "model"
	ByService   = "service"
	ByOperation = "operation"
	ByTenant    = "tenant"
	ByProvider  = "provider"
	ByDay       = "day"
	ByHour      = "hour"
	ByMinute    = "minute"
)

// dimSQL is the whitelist of group-by columns: each dimension's column, of the series but for day
// and hour, which are the rollup rows'. No other text from a request reaches a statement.
var dimSQL = map[string]string{
	ByModel: "model", ByService: "service", ByOperation: "operation", ByTenant: "tenant",
	ByProvider: "provider", ByDay: "day", ByHour: "hour", ByMinute: "minute",
}

// timeDim tells whether d is a dimension of time, read from the rows rather than their series.
func timeDim(d string) bool { return d == ByDay || d == ByHour || d == ByMinute }

// MaxHourRange is the longest range a summary grouped by hour may span.
const MaxHourRange = 31 * 24 * time.Hour

// MaxMinuteRange is the longest range a summary grouped by minute may span: minutes are counted
// from the raw attempts (rollup.RawRowsSQL), which a few hours of keep fast to read.
const MaxMinuteRange = 24 * time.Hour

// Steps a summary grouped by minute may take (Filter.Step): 1 or 5 minutes.
var minuteSteps = []time.Duration{time.Minute, 5 * time.Minute}

// Summary is the answer to "what did these attempts cost and how reliable were they", in total and
// per group. From and To are the effective range, rounded outward to whole hours.
type Summary struct {
	From     time.Time `json:"from"`
	To       time.Time `json:"to"`
	Timezone string    `json:"timezone"`
	GroupBy  []string  `json:"group_by"`
	Total    Stats     `json:"total"`
	Groups   []Group   `json:"groups"`
	// GroupsTotal is how many groups there were before Top kept the costliest (absent: all kept).
	GroupsTotal *int `json:"groups_total,omitempty"`
}

// Top keeps the n groups that cost most (an unpriced group's priced part counts; ties in key
// order), costliest first, and records how many there were: the top 20 of 10,000 tenants, say.
func (s *Summary) Top(n int) {
	total := len(s.Groups)
	s.GroupsTotal = &total
	cost := func(g Group) money.Nanos {
		if g.CostUSD == nil {
			return 0
		}
		return *g.CostUSD
	}
	slices.SortStableFunc(s.Groups, func(a, b Group) int { return cmp.Compare(cost(b), cost(a)) })
	s.Groups = s.Groups[:min(n, total)]
}

// Group is the statistics of one group of a Summary.
type Group struct {
	Key Key `json:"key"`
	Stats
}

// Key identifies a group by the dimensions the summary was grouped by; the others are nil. When
// grouping by model or provider, Fallback is always set and FallbackFrom is set on fallback groups
// (it may be "" when the clients did not say which model the fallback stood in for).
type Key struct {
	Day          string     `json:"day,omitempty"`
	Hour         *time.Time `json:"hour,omitempty"`
	Minute       *time.Time `json:"minute,omitempty"`
	Service      *string    `json:"service,omitempty"`
	Operation    *string    `json:"operation,omitempty"`
	Tenant       *string    `json:"tenant,omitempty"`
	Provider     *string    `json:"provider,omitempty"`
	Model        *string    `json:"model,omitempty"`
	Fallback     *bool      `json:"fallback,omitempty"`
	FallbackFrom *string    `json:"fallback_from,omitempty"`
}

// Stats are the figures of a group of attempts; the package documentation defines each. Ratios and
// amounts that have no meaning for the group (no attempts, everything unpriced) are nil.
type Stats struct {
	Attempts             int64            `json:"attempts"`
	Requests             int64            `json:"requests"`
	AttemptsPerCall      *float64         `json:"attempts_per_call"`
	Succeeded            int64            `json:"succeeded"`
	CostUSD              *money.Nanos     `json:"cost_usd"`
	UnpricedAttempts     int64            `json:"unpriced_attempts"`
	UsageUnknownAttempts int64            `json:"usage_unknown_attempts"`
	InputTokens          int64            `json:"input_tokens"`
	OutputTokens         int64            `json:"output_tokens"`
	CacheWriteTokens     int64            `json:"cache_write_tokens"`
	CacheWrite1hTokens   int64            `json:"cache_write_1h_tokens"`
	CacheReadTokens      int64            `json:"cache_read_tokens"`
	ReasoningTokens      int64            `json:"reasoning_tokens"`
	CacheHitRatio        *float64         `json:"cache_hit_ratio"`
	CacheSavingsUSD      *money.Nanos     `json:"cache_savings_usd"`
	ErrorRate            *float64         `json:"error_rate"`
	Errors               map[string]int64 `json:"errors"`
	Cancelled            int64            `json:"cancelled"`
	RateLimitedShare     *float64         `json:"rate_limited_share"`
	FallbackShare        *float64         `json:"fallback_share"`
	WastedUSD            *money.Nanos     `json:"wasted_usd"`
	LatencyMS            *Latency         `json:"latency_ms"`
	ClientCostMismatches int64            `json:"client_cost_mismatches"`
	// CallsByAttempts and MaxAttempts are given when the summary was asked WithAttempts
	// (attempts.go): the logical calls by their number of attempts, and the most any took.
	CallsByAttempts []AttemptCount `json:"calls_by_attempts,omitempty"`
	MaxAttempts     int            `json:"max_attempts,omitempty"`
}

// Latency is the latency of succeeded attempts in milliseconds: percentiles from the merged
// histograms (within 2.2%) and the exact mean.
type Latency struct {
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Mean float64 `json:"mean"`
}

// The columns of rollup.Sums a summary's figures read, by position: a summary adds up every one.
var (
	cAttempts     = rollup.Index(rollup.Sums, "attempts")
	cRequests     = rollup.Index(rollup.Sums, "requests")
	cInput        = rollup.Index(rollup.Sums, "input_tokens")
	cOutput       = rollup.Index(rollup.Sums, "output_tokens")
	cCacheWrite   = rollup.Index(rollup.Sums, "cache_write_tokens")
	cCacheWrite1h = rollup.Index(rollup.Sums, "cache_write_1h_tokens")
	cCacheRead    = rollup.Index(rollup.Sums, "cache_read_tokens")
	cReasoning    = rollup.Index(rollup.Sums, "reasoning_tokens")
	cCost         = rollup.Index(rollup.Sums, "cost_nanos")
	cNoCache      = rollup.Index(rollup.Sums, "nocache_cost_nanos")
	cUnpriced     = rollup.Index(rollup.Sums, "unpriced_attempts")
	cUsageUnknown = rollup.Index(rollup.Sums, "usage_unknown_attempts")
	cMismatch     = rollup.Index(rollup.Sums, "cost_mismatch_attempts")
	cLatencySum   = rollup.Index(rollup.Sums, "latency_sum_ms")
)

// sumCols are the rollup columns a summary adds up, in the order the statements return them.
var sumCols = rollup.Cols(rollup.Sums)

// sourceSQL is the rollup rows of an effective range: rollup_daily for the whole local days
// [@day_from, @day_to) and rollup_hourly for the edge hours [@edge0_from, @edge0_to) and
// [@edge1_from, @edge1_to), with the local day (in timezone @tz) and hour of each row. %[1]s is the
// column list, %[2]s an extra condition. Its parameters are those of source.args.
const sourceSQL = `
	SELECT series_id, fallback, status, error_class, bucket AS day, NULL::timestamptz AS hour, %[1]s
	FROM rollup_daily WHERE project_id = @project AND bucket >= @day_from AND bucket < @day_to%[2]s
	UNION ALL
	SELECT series_id, fallback, status, error_class, (bucket AT TIME ZONE @tz)::date, bucket, %[1]s
	FROM rollup_hourly WHERE project_id = @project AND bucket >= @edge0_from AND bucket < @edge0_to%[2]s
	UNION ALL
	SELECT series_id, fallback, status, error_class, (bucket AT TIME ZONE @tz)::date, bucket, %[1]s
	FROM rollup_hourly WHERE project_id = @project AND bucket >= @edge1_from AND bucket < @edge1_to%[2]s`

// seriesFilter narrows series s to the filter's service, model, tenant, operation and provider
// (filterArgs; an empty one matches any).
const seriesFilter = `(@service = '' OR s.service = @service) AND (@model = '' OR s.model = @model)
		AND (@tenant = '' OR s.tenant = @tenant) AND (@operation = '' OR s.operation = @operation)
		AND (@provider = '' OR s.provider = @provider)`

// narrowSourceSQL is sourceSQL with whole days from a narrow daily rollup (%[3]s): the rows carry
// the series columns it keeps (%[4]s, a list) instead of the series id, the edge hours the same
// columns of their series. Its parameters are sourceSQL's.
const narrowSourceSQL = `
	SELECT %[4]s, fallback, status, error_class, bucket AS day, NULL::timestamptz AS hour, %[1]s
	FROM %[3]s WHERE project_id = @project AND bucket >= @day_from AND bucket < @day_to%[2]s
	UNION ALL
	SELECT s.%[5]s, h.fallback, h.status, h.error_class, (h.bucket AT TIME ZONE @tz)::date, h.bucket, %[1]s
	FROM rollup_hourly h JOIN series s ON s.project_id = @project AND s.id = h.series_id
	WHERE h.project_id = @project AND h.bucket >= @edge0_from AND h.bucket < @edge0_to%[2]s
	UNION ALL
	SELECT s.%[5]s, h.fallback, h.status, h.error_class, (h.bucket AT TIME ZONE @tz)::date, h.bucket, %[1]s
	FROM rollup_hourly h JOIN series s ON s.project_id = @project AND s.id = h.series_id
	WHERE h.project_id = @project AND h.bucket >= @edge1_from AND h.bucket < @edge1_to%[2]s`

// keptSourceSQL is narrowSourceSQL for a narrow daily rollup whose columns a narrow hourly rollup
// (%[5]s) keeps too: its edge hours come from that rollup, which keeps every hour, however old.
const keptSourceSQL = `
	SELECT %[4]s, fallback, status, error_class, bucket AS day, NULL::timestamptz AS hour, %[1]s
	FROM %[3]s WHERE project_id = @project AND bucket >= @day_from AND bucket < @day_to%[2]s
	UNION ALL
	SELECT %[4]s, fallback, status, error_class, (bucket AT TIME ZONE @tz)::date, bucket, %[1]s
	FROM %[5]s WHERE project_id = @project AND bucket >= @edge0_from AND bucket < @edge0_to%[2]s
	UNION ALL
	SELECT %[4]s, fallback, status, error_class, (bucket AT TIME ZONE @tz)::date, bucket, %[1]s
	FROM %[5]s WHERE project_id = @project AND bucket >= @edge1_from AND bucket < @edge1_to%[2]s`

// rawEdgesSQL is the edge hours of sourceSQL counted from the raw attempts, for the rows that keep
// the tenant, which no hourly rollup does: %[1]s are the sums (rawCols), %[2]s an extra condition,
// %[3]s the series columns kept (a list, of s) and %[4]s the GROUP BY ordinals. Each hour is its
// own group, so the rows are those an hourly rollup by these columns would hold.
const rawEdgesSQL = `
	SELECT %[3]s, a.fallback, a.status, a.error_class, ` + dayOfAttempt + ` AS day, ` + rollup.HourBucketExpr + ` AS hour, %[1]s
	FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id
	WHERE a.project_id = @project AND a.started_at >= @edge0_from AND a.started_at < @edge0_to%[2]s
	GROUP BY %[4]s
	UNION ALL
	SELECT %[3]s, a.fallback, a.status, a.error_class, ` + dayOfAttempt + `, ` + rollup.HourBucketExpr + `, %[1]s
	FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id
	WHERE a.project_id = @project AND a.started_at >= @edge1_from AND a.started_at < @edge1_to%[2]s
	GROUP BY %[4]s`

// dayOfAttempt is the local day (in timezone @tz) of an attempt's hour, as sourceSQL gives an
// hourly row's: an hour belongs to the day it begins in.
const dayOfAttempt = "(" + rollup.HourBucketExpr + " AT TIME ZONE @tz)::date"

// tenantSourceSQL is narrowSourceSQL for a narrow daily rollup that keeps the tenant: whole days
// from it, the edge hours from the raw attempts (rawEdgesSQL). Its parameters are sourceSQL's.
const tenantSourceSQL = `
	SELECT %[4]s, fallback, status, error_class, bucket AS day, NULL::timestamptz AS hour, %[1]s
	FROM %[3]s WHERE project_id = @project AND bucket >= @day_from AND bucket < @day_to%[2]s
	UNION ALL
	%[5]s`

// tenantBlocksSQL is tenantSourceSQL with the whole days read as the fewest blocks that tile them
// (rollup.SpendBlocks, @spans and @starts): the days from rollup_daily_tenant, the blocks of 8 and
// 64 days from rollup_tenant_blocks. Its rows carry no day: it answers the tenant questions that
// group by no time, a month by tenant in some nine blocks a tenant instead of thirty days. %[1]s
// and %[2]s are tenantSourceSQL's, %[3]s the edges (rawEdgesSQL).
const tenantBlocksSQL = `
	SELECT tenant, fallback, status, error_class, NULL::date AS day, NULL::timestamptz AS hour, %[1]s
	FROM rollup_daily_tenant WHERE project_id = @project
		AND bucket = ANY(ARRAY(SELECT b.bucket FROM unnest(@spans::int2[], @starts::date[]) AS b(span, bucket) WHERE b.span = 1))%[2]s
	UNION ALL
	SELECT t.tenant, t.fallback, t.status, t.error_class, NULL::date, NULL::timestamptz, %[1]s
	FROM rollup_tenant_blocks t JOIN unnest(@spans::int2[], @starts::date[]) AS b(span, bucket) ON t.span = b.span AND t.bucket = b.bucket
	WHERE t.project_id = @project%[2]s
	UNION ALL
	%[3]s`

// rawCols are the sums of the columns cols (a list of sumCols, or "latency_hist", the histogram)
// over raw attempts, named by their columns.
func rawCols(cols string) string {
	if cols == "latency_hist" {
		return rollup.LatencyHistExpr + " AS latency_hist"
	}
	return rollup.RawSums(strings.Split(cols, ", ")...)
}

// rawEdges is rawEdgesSQL for the rows keeping the series columns keep.
func rawEdges(cols, where string, keep []string) string {
	return fmt.Sprintf(rawEdgesSQL, rawCols(cols), where, "s."+strings.Join(keep, ", s."), rollup.Ordinals(len(keep)+5))
}

// filterCols are the series columns a filter narrows, each also the name of its parameter.
var filterCols = []string{"service", "model", "tenant", "operation", "provider"}

// filterValues are a filter's values of filterCols, in order.
func filterValues(f Filter) []string {
	return []string{f.Service, f.Model, f.Tenant, f.Operation, f.Provider}
}

// filterArgs are the parameters of seriesFilter and narrowFilter: the filter's value of each of
// filterCols, named after it.
func filterArgs(f Filter) pgx.NamedArgs {
	args := pgx.NamedArgs{}
	for i, v := range filterValues(f) {
		args[filterCols[i]] = v
	}
	return args
}

// narrowFilter is seriesFilter over the rows r of narrowSourceSQL: a parameter whose column the
// rows do not keep must be empty.
func narrowFilter(keep map[string]bool) string {
	var out []string
	for _, c := range filterCols {
		if keep[c] {
			out = append(out, fmt.Sprintf("(@%[1]s = '' OR r.%[1]s = @%[1]s)", c))
		} else {
			out = append(out, fmt.Sprintf("@%s::text = ''", c))
		}
	}
	return strings.Join(out, " AND ")
}

// plan is a pair of statements answering a summary: one adds up the rows of the range per group
// (%[1]s: the group's columns, each followed by a comma), fallback flag, status and error class;
// the other returns the latency histogram of every succeeded row with its group, for merging.
// keep are the series columns the plan's rows hold (nil: all, on the series s); raw plans read
// every hour of the range from the raw attempts; hours says where the others read the hours at
// the edges of their range (see rangeOf).
type plan struct {
	sums, latency string
	// rows is sums without the summing, for a read whose rows are few or already one a group
	// (a day of a daily rollup): adding them up in Go takes a fraction of the server's time.
	rows string
	// cost yields the cost of the plan's rows with their group's columns and fallback flag, to be
	// added up per group: what SummaryTop ranks by.
	cost string
	keep map[string]bool
	// daily is the narrow daily rollup the plan reads whole days from (no Table: none).
	daily rollup.Narrow
	raw   bool
	hours hourSource
	// untimed, when set, answers the plan's questions that group by no time from fewer rows.
	untimed *plan
}

// hourSource is where a plan reads hours.
type hourSource int

const (
	// hoursRaw: from the raw attempts (the tenant plans, which no hourly rollup keeps).
	hoursRaw hourSource = iota
	// hoursShape: from rollup_hourly, which keeps them rollup.HourlyKeep only.
	hoursShape
	// hoursKept: from a narrow hourly rollup, which keeps every hour.
	hoursKept
)

// seriesCols are the series columns, in the order the raw plan keeps them.
var seriesCols = []string{"tenant", "service", "operation", "provider", "model", "fallback_from"}

// narrowPlan is the plan reading whole days from the narrow rows of src (a function of the
// columns summed and an extra condition), which keep the series columns keep.
func narrowPlan(keep []string, src func(cols, where string) string, raw bool) plan {
	kept := map[string]bool{}
	for _, c := range keep {
		kept[c] = true
	}
	sums, rows := sumStatements("("+src(strings.Join(sumCols, ", "), "")+") r", narrowFilter(kept))
	return plan{keep: kept, raw: raw, sums: sums, rows: rows,
		cost: `SELECT %[1]s r.fallback, r.cost_nanos
	FROM (` + src("cost_nanos", "") + `) r
	WHERE ` + narrowFilter(kept),
		latency: `SELECT %[1]s r.fallback, r.latency_hist::text
	FROM (` + src("latency_hist", " AND status = 'ok'") + `) r
	WHERE ` + narrowFilter(kept),
	}
}

var (
	// bySeries reads rollup_daily and rollup_hourly, with their series s: it answers every summary
	// but those naming a tenant, as those rollups keep the series' shapes.
	bySeries = func() plan {
		p := seriesPlan(fmt.Sprintf(sourceSQL, strings.Join(sumCols, ", "), ""),
			fmt.Sprintf(sourceSQL, "latency_hist", " AND status = 'ok'"))
		p.hours = hoursShape
		return p
	}()

	// narrowPlans read whole days from a narrow daily rollup each (rollup.DailyBy, in order), about
	// a tenth of rollup_daily's rows; those that keep the tenant read their edge hours from the raw
	// attempts, as no hourly rollup keeps tenants.
	narrowPlans = func() []plan {
		var out []plan
		for _, d := range rollup.DailyBy {
			src := func(cols, where string) string {
				return fmt.Sprintf(narrowSourceSQL, cols, where, d.Table, strings.Join(d.Keep, ", "), strings.Join(d.Keep, ", s."))
			}
			if d.Tenant() {
				src = func(cols, where string) string {
					return fmt.Sprintf(tenantSourceSQL, cols, where, d.Table, strings.Join(d.Keep, ", "), rawEdges(cols, where, d.Keep))
				}
			}
			h := hourlyFor(d)
			if h != "" {
				src = func(cols, where string) string {
					return fmt.Sprintf(keptSourceSQL, cols, where, d.Table, strings.Join(d.Keep, ", "), h)
				}
			}
			p := narrowPlan(d.Keep, src, false)
			p.daily = d
			if slices.Equal(d.Keep, rollup.SpendKeep) {
				p.cost, p.untimed = spendCostSQL, &tenantBlocks
			}
			switch {
			case h != "":
				p.hours = hoursKept
			case !d.Tenant():
				p.hours = hoursShape
			}
			out = append(out, p)
		}
		return out
	}()
	// tenantBlocks is the plan of rollup_daily_tenant's questions that group by no time: whole days
	// in blocks (tenantBlocksSQL), the edge hours from the raw attempts, the ranking by
	// rollup_tenant_spend as the tenant plan's.
	tenantBlocks = func() plan {
		p := narrowPlan(rollup.SpendKeep, func(cols, where string) string {
			return fmt.Sprintf(tenantBlocksSQL, cols, where, rawEdges(cols, where, rollup.SpendKeep))
		}, false)
		p.cost = spendCostSQL
		p.daily = rollup.DailyBy[slices.IndexFunc(rollup.DailyBy, func(d rollup.Narrow) bool { return slices.Equal(d.Keep, rollup.SpendKeep) })]
		return p
	}()
	// rawPlan reads the raw attempts, by hour: it answers every summary, and is the plan of the
	// tenant questions no rollup keeps the columns of (a tenant's services, say).
	rawPlan = narrowPlan(seriesCols, func(cols, where string) string { return rawEdges(cols, where, seriesCols) }, true)
)

// hourlyFor is the narrow hourly rollup that keeps the same series columns as the daily d, or "".
func hourlyFor(d rollup.Narrow) string {
	for _, h := range rollup.HourlyBy {
		if slices.Equal(h.Keep, d.Keep) {
			return h.Table
		}
	}
	return ""
}

// byMinute5 reads a summary grouped by 5 minutes from rollup_minute5 where it holds them, else
// from the raw attempts (rollup.Minute5RowsSQL), with their series s: it answers those that name no
// tenant, which the rollup does not keep (it keeps series shapes). byMinute reads the raw attempts
// only, counted per @step-minute bucket with the rollups' expressions (rollup.RawRowsSQL): the
// summaries by the minute, and those naming a tenant.
var (
	byMinute5 = seriesPlan(rollup.Minute5RowsSQL())
	byMinute  = func() plan {
		bucket, where := rollup.MinuteBucketSQL("@step::interval", "started_at"), "project_id = @project AND started_at >= @raw_from AND started_at < @raw_to"
		return seriesPlan(rollup.RawRowsSQL(bucket, where), rollup.RawHistSQL(bucket, where))
	}()
)

// seriesPlan is the plan over rows keyed by series id, joined to their series s: sums yields the
// rows with sumCols, hists the succeeded rows' latency histograms.
func seriesPlan(sums, hists string) plan {
	summedSQL, rows := sumStatements("("+sums+`) r
	JOIN series s ON s.project_id = @project AND s.id = r.series_id`, seriesFilter)
	return plan{sums: summedSQL, rows: rows,
		cost: `SELECT %[1]s r.fallback, r.cost_nanos
	FROM (` + sums + `) r
	JOIN series s ON s.project_id = @project AND s.id = r.series_id
	WHERE ` + seriesFilter,
		latency: `SELECT %[1]s r.fallback, r.latency_hist::text
	FROM (` + hists + `) r
	JOIN series s ON s.project_id = @project AND s.id = r.series_id
	WHERE ` + seriesFilter,
	}
}

// sumStatements is a plan's sums statement over the rows aliased r of from (a FROM item and its
// joins) that where selects, and its rows statement: the same rows unsummed.
func sumStatements(from, where string) (sums, rows string) {
	sel := `SELECT %[1]s r.fallback, r.status::text, r.error_class::text, `
	body := `
	FROM ` + from + `
	WHERE ` + where
	return sel + sumsOf("r") + body + `
	GROUP BY %[1]s r.fallback, r.status, r.error_class`, sel + "r." + strings.Join(sumCols, ", r.") + body
}

// seriesAlias is where the plan's series columns are read: the narrow rollup itself (r), or the
// series dictionary joined to rollup_daily (s).
func (p plan) seriesAlias() string {
	if p.keep == nil {
		return "s"
	}
	return "r"
}

// planFor picks the plan of a summary: the first narrow plan that keeps every series column the
// grouping and the filter name (its untimed plan when the grouping has no time), else bySeries,
// which keeps every series column but the tenant, else the raw attempts.
func planFor(g grouping, f Filter) plan {
	var need []string
	for _, d := range g.dims {
		if !timeDim(d) {
			need = append(need, dimSQL[d])
		}
	}
	if g.fallback {
		need = append(need, "fallback_from")
	}
	for i, v := range filterValues(f) {
		if v != "" {
			need = append(need, filterCols[i])
		}
	}
	if g.minute {
		if f.Step == 5*time.Minute && !slices.Contains(need, "tenant") {
			return byMinute5
		}
		return byMinute
	}
next:
	for _, p := range narrowPlans {
		for _, c := range need {
			if !p.keep[c] {
				continue next
			}
		}
		if p.untimed != nil && !slices.ContainsFunc(g.dims, timeDim) {
			return *p.untimed
		}
		return p
	}
	if slices.Contains(need, "tenant") {
		return rawPlan
	}
	return bySeries
}

// sumsOf is the sum of each of sumCols over the rows aliased r, as bigint, named by its column.
func sumsOf(r string) string {
	out := make([]string, len(sumCols))
	for i, c := range sumCols {
		out[i] = fmt.Sprintf("sum8(%[1]s.%[2]s) AS %[2]s", r, c)
	}
	return strings.Join(out, ", ")
}

// source is where the rows of an effective range come from: whole local days from rollup_daily,
// the edges from rollup_hourly. Empty parts are empty ranges.
type source struct {
	dayFrom, dayTo time.Time // dates, as UTC midnights
	edges          [2][2]time.Time
}

// split plans the rows of an effective range [from, to): daily rows where whole local days fit
// and meet hourly rows on whole UTC hours, hourly rows elsewhere; hourly rows only when
// hourlyOnly. A range that is not hour-aligned is whole local days (see window): daily rows only.
func (s *Service) split(from, to time.Time, hourlyOnly bool) source {
	src := source{dayFrom: from, dayTo: from, edges: [2][2]time.Time{{from, to}, {to, to}}}
	if hourlyOnly {
		return src
	}
	d0 := dateOf(from, s.tz)
	if d0.start(s.tz).Before(from) {
		d0 = d0.addDays(1)
	}
	d1 := dateOf(to, s.tz)
	if !d0.before(d1) {
		return src
	}
	s0, s1 := d0.start(s.tz), d1.start(s.tz)
	switch {
	case !hourAligned(from) || !hourAligned(to):
		src.edges = [2][2]time.Time{{from, from}, {to, to}}
	case !hourAligned(s0) || !hourAligned(s1):
		return src
	default:
		src.edges = [2][2]time.Time{{from, s0}, {s1, to}}
	}
	src.dayFrom, src.dayTo = d0.civil(), d1.civil()
	return src
}

// args are the parameters of sourceSQL (and narrowSourceSQL) and the filter's (filterArgs).
func (s *Service) args(f Filter, src source) pgx.NamedArgs {
	args := filterArgs(f)
	args["project"], args["tz"] = f.ProjectID, s.tz.String()
	args["day_from"], args["day_to"] = src.dayFrom, src.dayTo
	var spans []int16
	var starts []time.Time
	for _, b := range rollup.SpendBlocks(src.dayFrom, src.dayTo) {
		spans, starts = append(spans, int16(b.Span)), append(starts, b.Start)
	}
	args["spans"], args["starts"] = spans, starts
	args["edge0_from"], args["edge0_to"] = src.edges[0][0], src.edges[0][1]
	args["edge1_from"], args["edge1_to"] = src.edges[1][0], src.edges[1][1]
	return args
}

// window applies the default range (the last 7 local days, today included: up to the end of
// today, so a default question reads whole days) and rounds [from, to) outward to whole UTC hours,
// unless both ends are local midnights and hourly is false (in a timezone whose days do not begin
// on whole UTC hours, India's say, whole days stay exact that way).
func (s *Service) window(from, to time.Time, hourly bool) (time.Time, time.Time, error) {
	if to.IsZero() {
		to = dateOf(s.now(), s.tz).addDays(1).start(s.tz)
	}
	if from.IsZero() {
		from = dateOf(to.Add(-time.Nanosecond), s.tz).addDays(-6).start(s.tz)
	}
	from, to = from.UTC(), to.UTC()
	if hourly || !s.dayStart(from) || !s.dayStart(to) {
		from, to = from.Truncate(time.Hour), ceilHour(to)
	}
	if !from.Before(to) {
		return time.Time{}, time.Time{}, badParam("to", "must be after from")
	}
	if to.Sub(from) > MaxRange {
		return time.Time{}, time.Time{}, badParam("from", "the range may span at most %d days", int(MaxRange/(24*time.Hour)))
	}
	return from, to, nil
}

// rangeOf is the effective range of a summary not grouped by minute (window), and the plan that
// answers it, p unless p reads hours rollup_hourly no longer keeps.
//
// Hourly detail by series shape is kept for rollup.HourlyKeep (rollup.Prune). A question that is not
// grouped by hour and whose plan reads its hours from rollup_hourly or the raw attempts (the
// question's own plan, planFor, so that every plan answers the same range) has the ends of its range
// older than that rounded outward to local midnights: the range of 30 days back from an hour then
// reads 30 whole days, never a day of raw attempts at its start. The Summary's From says so.
// Grouped by hour, such a question reads the raw attempts of its range instead.
func (s *Service) rangeOf(g grouping, f Filter, p plan) (plan, time.Time, time.Time, error) {
	from, to, err := s.window(f.From, f.To, g.hourly)
	if err != nil {
		return p, from, to, err
	}
	if g.hourly && to.Sub(from) > MaxHourRange {
		return p, from, to, badParam("group_by", "hour needs a range of at most %d days", int(MaxHourRange/(24*time.Hour)))
	}
	horizon := s.now().Add(-rollup.HourlyKeep)
	if !from.Before(horizon) {
		return p, from, to, nil
	}
	if g.hourly {
		if p.hours == hoursShape {
			p = rawPlan
		}
		return p, from, to, nil
	}
	if q := planFor(g, f); q.hours == hoursKept || q.raw {
		return p, from, to, nil
	}
	from = dateOf(from, s.tz).start(s.tz).UTC()
	if to.Before(horizon) || !hourAligned(from) {
		// Both ends at midnights where days do not begin on whole UTC hours (split reads whole
		// days only there).
		if !s.dayStart(to) {
			to = dateOf(to, s.tz).addDays(1).start(s.tz).UTC()
		}
	}
	return p, from, to, nil
}

// minuteArgs are the effective range of a summary grouped by minute (f's range rounded outward to
// whole steps; the last hour by default) and the parameters of byMinute.
func (s *Service) minuteArgs(f Filter) (from, to time.Time, args pgx.NamedArgs, err error) {
	step := f.Step
	if step == 0 {
		step = time.Minute
	}
	if !slices.Contains(minuteSteps, step) {
		return from, to, nil, badParam("step", "want 1m or 5m")
	}
	to = f.To
	if to.IsZero() {
		to = s.now()
	}
	from = f.From
	if from.IsZero() {
		from = to.Add(-time.Hour)
	}
	from, to = from.UTC().Truncate(step), to.UTC().Add(step-time.Nanosecond).Truncate(step)
	if !from.Before(to) {
		return from, to, nil, badParam("to", "must be after from")
	}
	if to.Sub(from) > MaxMinuteRange {
		return from, to, nil, badParam("group_by", "minute needs a range of at most %d hours", int(MaxMinuteRange/time.Hour))
	}
	args = filterArgs(f)
	args["project"], args["raw_from"], args["raw_to"], args["step"] = f.ProjectID, from, to,
		fmt.Sprintf("%d minutes", step/time.Minute)
	return from, to, args, nil
}

// dayStart tells whether t is the first instant of a local day.
func (s *Service) dayStart(t time.Time) bool { return dateOf(t, s.tz).start(s.tz).Equal(t) }

func ceilHour(t time.Time) time.Time {
	t = t.UTC()
	if h := t.Truncate(time.Hour); !h.Equal(t) {
		return h.Add(time.Hour)
	}
	return t
}

// gkey identifies a group while rows are folded.
type gkey struct {
	service, operation, tenant, provider, model, fallbackFrom string
	day                                                       date
	hour                                                      int64
	fallback                                                  bool
}

// grouping is a validated list of dimensions.
type grouping struct {
	dims     []string
	fallback bool // model or provider: fallback attempts form their own groups
	hourly   bool
	minute   bool
}

func parseGrouping(dims []string) (grouping, error) {
	g := grouping{dims: []string{}}
	seen := map[string]bool{}
	for _, d := range dims {
		if _, ok := dimSQL[d]; !ok {
			return g, badParam("group_by", "unknown dimension %q: want model, service, operation, tenant, provider, day, hour or minute", truncate(d))
		}
		if seen[d] {
			return g, badParam("group_by", "%s given twice", d)
		}
		seen[d] = true
		g.dims = append(g.dims, d)
	}
	if n := boolInt(seen[ByDay]) + boolInt(seen[ByHour]) + boolInt(seen[ByMinute]); n > 1 {
		return g, badParam("group_by", "day, hour and minute cannot be combined")
	}
	g.fallback = seen[ByModel] || seen[ByProvider]
	g.hourly = seen[ByHour]
	g.minute = seen[ByMinute]
	return g, nil
}

// columns is the SQL list of the grouping's columns, each followed by a comma; series columns are
// read from the relation named series (s, or r where the rows hold them).
func (g grouping) columns(series string) string {
	var b strings.Builder
	for _, d := range g.dims {
		from := series
		if timeDim(d) {
			from = "r"
		}
		b.WriteString(from + "." + dimSQL[d] + ", ")
	}
	if g.fallback {
		b.WriteString(series + ".fallback_from, ")
	}
	return b.String()
}

// scanTargets returns the scan destinations of the grouping's columns and a function that turns
// what was scanned, with the row's fallback flag, into the group's key.
func (g grouping) scanTargets() ([]any, func(fallback bool) gkey) {
	var (
		str   = make([]string, len(g.dims)+1)
		times = make([]time.Time, len(g.dims))
		dst   []any
	)
	for i, d := range g.dims {
		if timeDim(d) {
			dst = append(dst, &times[i])
		} else {
			dst = append(dst, &str[i])
		}
	}
	if g.fallback {
		dst = append(dst, &str[len(g.dims)])
	}
	return dst, func(fallback bool) gkey {
		var k gkey
		for i, d := range g.dims {
			switch d {
			case ByModel:
				k.model = str[i]
			case ByService:
				k.service = str[i]
			case ByOperation:
				k.operation = str[i]
			case ByTenant:
				k.tenant = str[i]
			case ByProvider:
				k.provider = str[i]
			case ByDay:
				k.day = date{times[i].Year(), times[i].Month(), times[i].Day()}
			case ByHour, ByMinute:
				k.hour = times[i].Unix()
			}
		}
		if g.fallback {
			k.fallback, k.fallbackFrom = fallback, str[len(g.dims)]
		}
		return k
	}
}

// key turns a group's internal key into the published one.
func (g grouping) key(k gkey, tz *time.Location) Key {
	var out Key
	for _, d := range g.dims {
		switch d {
		case ByModel:
			out.Model = &k.model
		case ByService:
			out.Service = &k.service
		case ByOperation:
			out.Operation = &k.operation
		case ByTenant:
			out.Tenant = &k.tenant
		case ByProvider:
			out.Provider = &k.provider
		case ByDay:
			out.Day = k.day.String()
		case ByHour:
			h := time.Unix(k.hour, 0).In(tz)
			out.Hour = &h
		case ByMinute:
			m := time.Unix(k.hour, 0).In(tz)
			out.Minute = &m
		}
	}
	if g.fallback {
		out.Fallback = &k.fallback
		if k.fallback {
			out.FallbackFrom = &k.fallbackFrom
		}
	}
	return out
}

// compare orders groups by their dimensions in grouping order, then own traffic before fallbacks.
func (g grouping) compare(a, b gkey) int {
	for _, d := range g.dims {
		var c int
		switch d {
		case ByModel:
			c = strings.Compare(a.model, b.model)
		case ByService:
			c = strings.Compare(a.service, b.service)
		case ByOperation:
			c = strings.Compare(a.operation, b.operation)
		case ByTenant:
			c = strings.Compare(a.tenant, b.tenant)
		case ByProvider:
			c = strings.Compare(a.provider, b.provider)
		case ByDay:
			c = a.day.civil().Compare(b.day.civil())
		case ByHour, ByMinute:
			c = cmp.Compare(a.hour, b.hour)
		}
		if c != 0 {
			return c
		}
	}
	if a.fallback != b.fallback {
		if a.fallback {
			return 1
		}
		return -1
	}
	return strings.Compare(a.fallbackFrom, b.fallbackFrom)
}

// acc accumulates the rollup rows of one group.
type acc struct {
	sums           []int64 // rollup.Sums' columns
	ok, okFallback int64
	okLatencySum   int64
	failed         int64
	failedCost     int64
	failedUnpriced int64
	cancelled      int64
	errors         []classCount
	hist           histogram
}

// classCount is the attempts of one error class. A group's classes are few (schema.ErrorClasses),
// so they are kept in a slice searched in order: a map a group cost a tenth of a month by
// 10,000 tenants' CPU in allocating, hashing and iterating.
type classCount struct {
	class string
	n     int64
}

// addError adds n attempts of error class class.
func (a *acc) addError(class string, n int64) {
	for i := range a.errors {
		if a.errors[i].class == class {
			a.errors[i].n += n
			return
		}
	}
	a.errors = append(a.errors, classCount{class, n})
}

// add folds one summed row with its fallback flag, status and error class.
func (a *acc) add(fallback bool, status, class string, sums []int64) {
	if a.sums == nil {
		a.sums = make([]int64, len(sums))
	}
	for i, v := range sums {
		a.sums[i] += v
	}
	n := sums[cAttempts]
	switch schema.Status(status) {
	case schema.StatusOK:
		a.ok += n
		a.okLatencySum += sums[cLatencySum]
		if fallback {
			a.okFallback += n
		}
		return
	case schema.StatusError:
		a.addError(class, n)
	case schema.StatusCancelled:
		a.cancelled += n
	}
	a.failed += n
	a.failedCost += sums[cCost]
	a.failedUnpriced += sums[cUnpriced]
}

func (a *acc) merge(b *acc) {
	if a.sums == nil {
		a.sums = make([]int64, len(sumCols))
	}
	for i, v := range b.sums {
		a.sums[i] += v
	}
	a.ok += b.ok
	a.okFallback += b.okFallback
	a.okLatencySum += b.okLatencySum
	a.failed += b.failed
	a.failedCost += b.failedCost
	a.failedUnpriced += b.failedUnpriced
	a.cancelled += b.cancelled
	for _, e := range b.errors {
		a.addError(e.class, e.n)
	}
	a.hist.merge(&b.hist)
}

func ratio(num, den int64) *float64 {
	if den == 0 {
		return nil
	}
	r := float64(num) / float64(den)
	return &r
}

// amount is v, or nil when all n attempts it covers are unpriced.
func amount(v money.Nanos, n, unpriced int64) *money.Nanos {
	if n > 0 && unpriced == n {
		return nil
	}
	return &v
}

func (a *acc) stats() Stats {
	s := a.sums
	if s == nil {
		s = make([]int64, len(sumCols))
	}
	st := Stats{
		Attempts: s[cAttempts], Requests: s[cRequests], Succeeded: a.ok,
		UnpricedAttempts: s[cUnpriced] - s[cUsageUnknown], UsageUnknownAttempts: s[cUsageUnknown],
		InputTokens: s[cInput], OutputTokens: s[cOutput], CacheWriteTokens: s[cCacheWrite],
		CacheWrite1hTokens: s[cCacheWrite1h], CacheReadTokens: s[cCacheRead], ReasoningTokens: s[cReasoning],
		Errors: make(map[string]int64, len(a.errors)), Cancelled: a.cancelled, ClientCostMismatches: s[cMismatch],
	}
	st.AttemptsPerCall = ratio(s[cAttempts], s[cRequests])
	st.CostUSD = amount(money.Nanos(s[cCost]), s[cAttempts], s[cUnpriced])
	st.CacheSavingsUSD = amount(money.Nanos(s[cNoCache]-s[cCost]), s[cAttempts], s[cUnpriced])
	st.WastedUSD = amount(money.Nanos(a.failedCost), a.failed, a.failedUnpriced)
	st.CacheHitRatio = ratio(s[cCacheRead], s[cInput]+s[cCacheWrite]+s[cCacheRead])
	var errs, limited int64
	for _, e := range a.errors {
		st.Errors[e.class] = e.n
		errs += e.n
		if e.class == string(schema.ErrorRateLimited) {
			limited = e.n
		}
	}
	st.ErrorRate = ratio(errs, s[cAttempts])
	st.RateLimitedShare = ratio(limited, s[cAttempts])
	st.FallbackShare = ratio(a.okFallback, a.ok)
	if n := a.hist.total(); a.ok > 0 && n > 0 {
		h := &a.hist
		st.LatencyMS = &Latency{P50: h.quantile(500, n), P95: h.quantile(950, n), P99: h.quantile(990, n),
			Mean: float64(a.okLatencySum) / float64(a.ok)}
	}
	return st
}

// Summary answers for the attempts f selects, in total and grouped by the given dimensions (none:
// the total only). See the package documentation for what each figure means.
func (s *Service) Summary(ctx context.Context, f Filter, groupBy ...string) (Summary, error) {
	return s.summary(ctx, f, planFor, groupBy)
}

// summary is Summary with the plan chosen by choose.
func (s *Service) summary(ctx context.Context, f Filter, choose func(grouping, Filter) plan, groupBy []string) (Summary, error) {
	g, err := parseGrouping(groupBy)
	if err != nil {
		return Summary{}, err
	}
	p := choose(g, f)
	var from, to time.Time
	var args pgx.NamedArgs
	if g.minute {
		if from, to, args, err = s.minuteArgs(f); err != nil {
			return Summary{}, err
		}
	} else {
		if p, from, to, err = s.rangeOf(g, f, p); err != nil {
			return Summary{}, err
		}
		return s.answer(ctx, g, p, f, from, to)
	}
	return s.collect(ctx, g, p, f, from, to, args)
}

// collect answers a summary grouped as g with plan p over the effective range [from, to) (the
// plan's parameters args).
func (s *Service) collect(ctx context.Context, g grouping, p plan, f Filter, from, to time.Time, args pgx.NamedArgs) (Summary, error) {
	groups, numbers, err := s.gather(ctx, g, p, f, from, to, args)
	if err != nil {
		return Summary{}, err
	}
	return s.build(g, f, from, to, groups, numbers), nil
}

// gather adds up the rows of plan p with the parameters args per group of g, each group's
// latency histogram merged, and, when f asks for them, the groups' calls by number of attempts.
func (s *Service) gather(ctx context.Context, g grouping, p plan, f Filter, from, to time.Time, args pgx.NamedArgs) (map[gkey]*acc, map[gkey]map[int]int64, error) {
	if f.WithAttempts {
		args["raw_from"], args["raw_to"], args["tz"] = from, to, s.tz.String()
		if _, ok := args["step"]; !ok {
			args["step"] = "1 minutes"
		}
	}
	// The sums and the latency histograms (and the attempt numbers) are read at once, on two (three)
	// connections.
	var (
		groups map[gkey]*acc
		hists  map[gkey]*histogram
	)
	series := p.seriesAlias()
	eg, ectx := errgroup.WithContext(ctx)
	eg.Go(func() (err error) {
		groups, err = s.sums(ectx, g, fmt.Sprintf(p.sums, g.columns(series)), args)
		return err
	})
	eg.Go(func() (err error) {
		hists, err = s.latencies(ectx, g, fmt.Sprintf(p.latency, g.columns(series)), args)
		return err
	})
	var numbers map[gkey]map[int]int64
	if f.WithAttempts {
		eg.Go(func() (err error) {
			numbers, err = s.attemptNumbers(ectx, g, args)
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, nil, err
	}
	for k, h := range hists {
		if a, ok := groups[k]; ok {
			a.hist = *h
		}
	}
	return groups, numbers, nil
}

// frame is a Summary grouped as g over the effective range [from, to), without figures.
func (s *Service) frame(g grouping, from, to time.Time) Summary {
	return Summary{From: from.In(s.tz), To: to.In(s.tz), Timezone: s.tz.String(), GroupBy: g.dims}
}

// build is the Summary of groups (and their calls by number of attempts, when f asks for them)
// over the effective range [from, to).
func (s *Service) build(g grouping, f Filter, from, to time.Time, groups map[gkey]*acc, numbers map[gkey]map[int]int64) Summary {
	out := s.frame(g, from, to)
	var keys []gkey
	keys, out.Groups, out.Total = figuresOf(g, s.tz, groups)
	if f.WithAttempts {
		all := map[int]int64{}
		for _, byNo := range numbers {
			for no, n := range byNo {
				all[no] += n
			}
		}
		out.Total.CallsByAttempts, out.Total.MaxAttempts = callsByAttempts(all)
		for i := range out.Groups {
			out.Groups[i].CallsByAttempts, out.Groups[i].MaxAttempts = callsByAttempts(numbers[keys[i]])
		}
	}
	return out
}

// figuresOf returns the keys of groups in key order, the figures of each in that order (none when
// g has no dimensions) and the figures of their total.
func figuresOf(g grouping, tz *time.Location, groups map[gkey]*acc) ([]gkey, []Group, Stats) {
	keys := slices.SortedFunc(maps.Keys(groups), g.compare)
	out := make([]Group, 0, len(keys))
	if len(g.dims) > 0 {
		for _, k := range keys {
			out = append(out, Group{Key: g.key(k, tz), Stats: groups[k].stats()})
		}
	}
	return keys, out, totalOf(groups).stats()
}

// totalOf is the sum of groups.
func totalOf(groups map[gkey]*acc) *acc {
	var total acc
	for _, a := range groups {
		total.merge(a)
	}
	return &total
}

// SummaryTop is Summary keeping only the n costliest groups (Summary.Top). Grouped by one of
// tenant, service or operation, it first ranks the groups by their cost, then reads the figures
// of those n groups only, and the total on its own: the top 20 of 10,000 tenants merges 20
// tenants' histograms and sends 20 groups, not 10,000.
func (s *Service) SummaryTop(ctx context.Context, f Filter, n int, groupBy ...string) (Summary, error) {
	g, err := parseGrouping(groupBy)
	if err != nil {
		return Summary{}, err
	}
	if len(g.dims) != 1 || !slices.Contains([]string{ByTenant, ByService, ByOperation}, g.dims[0]) || f.WithAttempts {
		sum, err := s.summary(ctx, f, planFor, groupBy)
		if err == nil {
			sum.Top(n)
		}
		return sum, err
	}
	col := dimSQL[g.dims[0]]
	p, from, to, err := s.rangeOf(g, f, planFor(g, f))
	if err != nil {
		return Summary{}, err
	}
	args := s.planArgs(f, g, p, from, to)
	// The total of every group, the same range asked ungrouped, is read meanwhile.
	var (
		sum, all Summary
		groups   int
	)
	eg, ectx := errgroup.WithContext(ctx)
	eg.Go(func() (err error) {
		ungrouped := grouping{dims: []string{}}
		all, err = s.answer(ectx, ungrouped, planFor(ungrouped, f), f, from, to)
		return err
	})
	eg.Go(func() (err error) {
		var keys []string
		if keys, groups, err = s.rank(ectx, g, p, f, from, to, n); err != nil {
			return fmt.Errorf("summary: rank groups: %w", err)
		}
		// The figures of the n groups: the plan's statements restricted to their keys, which
		// PostgreSQL pushes down to the rollup's rows.
		args["top"] = keys
		only := func(q string) string { return `SELECT * FROM (` + q + `) x WHERE x.` + col + ` = ANY(@top::text[])` }
		top := p
		top.sums, top.latency = only(p.sums), only(p.latency)
		sum, err = s.collect(ectx, g, top, f, from, to, args)
		return err
	})
	if err := eg.Wait(); err != nil {
		return Summary{}, err
	}
	sum.Total = all.Total
	sum.Top(n)
	sum.GroupsTotal = &groups
	return sum, nil
}

// rank returns the keys of the n costliest groups of a summary grouped as g by one series column
// with plan p over the effective range [from, to), ties in key order as Top breaks them, and how
// many groups there are. Each group's cost comes from the plan's cost statement, over readSpans
// where the plan keepsSpans: at 10,000 tenants the month's whole days before today are some
// 90,000 rows of spend blocks, today's 10,000.
func (s *Service) rank(ctx context.Context, g grouping, p plan, f Filter, from, to time.Time, n int) ([]string, int, error) {
	query := fmt.Sprintf(`SELECT x.%[1]s::text, sum8(x.cost_nanos) FROM (%[2]s) x GROUP BY 1`,
		dimSQL[g.dims[0]], fmt.Sprintf(p.cost, g.columns(p.seriesAlias())))
	read := func(ctx context.Context, args pgx.NamedArgs, _ *source) (map[string]int64, error) {
		out := map[string]int64{}
		var (
			k    string
			cost int64
		)
		err := s.read(ctx, query, args, []any{&k, &cost}, func() error {
			out[k] += cost
			return nil
		})
		return out, err
	}
	var parts []map[string]int64
	if keepsSpans(g, p, f) {
		var err error
		if parts, err = readSpans(ctx, s, &s.costs, summaryKey(g, p, f, p.cost), f, from, to, read,
			func(m map[string]int64) int { return len(m) }); err != nil {
			return nil, 0, err
		}
	} else {
		costs, err := read(ctx, s.planArgs(f, g, p, from, to), nil)
		if err != nil {
			return nil, 0, err
		}
		parts = append(parts, costs)
	}
	costs := parts[0]
	if len(parts) > 1 {
		costs = maps.Clone(costs)
		for k, c := range parts[1] {
			costs[k] += c
		}
	}
	keys := slices.Collect(maps.Keys(costs))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(costs[b], costs[a]), strings.Compare(a, b)) })
	return keys[:min(n, len(keys))], len(costs), nil
}

// answer is the summary grouped as g with plan p over the effective range [from, to): over
// readSpans where the plan keepsSpans.
func (s *Service) answer(ctx context.Context, g grouping, p plan, f Filter, from, to time.Time) (Summary, error) {
	if keepsSpans(g, p, f) {
		return s.collectKept(ctx, g, p, f, from, to)
	}
	return s.collect(ctx, g, p, f, from, to, s.planArgs(f, g, p, from, to))
}

// spendCostSQL is the cost statement (plan.cost) of the plan of rollup_daily_tenant: each
// tenant's cost from rollup_tenant_spend's blocks @spans and @starts (rollup.SpendBlocks of the
// range's whole days) and the edge hours' raw attempts. At 10,000 tenants a month is some ten rows
// a tenant, where rollup_daily_tenant has a row per tenant, day, status and error class.
var spendCostSQL = `SELECT %[1]s r.fallback, r.cost_nanos FROM (
		SELECT t.tenant, false AS fallback, t.cost_nanos FROM rollup_tenant_spend t
		JOIN unnest(@spans::int2[], @starts::date[]) AS b(span, bucket) ON t.span = b.span AND t.bucket = b.bucket
		WHERE t.project_id = @project
		UNION ALL
		SELECT e.tenant, e.fallback, e.cost_nanos FROM (` + rawEdges("cost_nanos", "", []string{"tenant"}) + `) e
	) r
	WHERE ` + narrowFilter(map[string]bool{"tenant": true})

// planArgs are the parameters of plan p answering the summary grouped as g over the effective
// range [from, to): hours only when grouped by hour or read raw.
func (s *Service) planArgs(f Filter, g grouping, p plan, from, to time.Time) pgx.NamedArgs {
	return s.args(f, s.split(from, to, g.hourly || p.raw))
}

// sums adds up the rollup rows of each group with query, a plan's sums statement.
func (s *Service) sums(ctx context.Context, g grouping, query string, args pgx.NamedArgs) (map[gkey]*acc, error) {
	keyDst, keyOf := g.scanTargets()
	var (
		fallback      bool
		status, class string
		sums          = make([]int64, len(sumCols))
	)
	dst := append(keyDst, &fallback, &status, &class)
	for i := range sums {
		dst = append(dst, &sums[i])
	}
	groups := map[gkey]*acc{}
	if err := s.read(ctx, query, args, dst, func() error {
		k := keyOf(fallback)
		a, ok := groups[k]
		if !ok {
			a = &acc{}
			groups[k] = a
		}
		a.add(fallback, status, class, sums)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("summary: %w", err)
	}
	return groups, nil
}

// latencies merges the latency histograms of each group's succeeded attempts, read with query, a
// plan's latency statement.
func (s *Service) latencies(ctx context.Context, g grouping, query string, args pgx.NamedArgs) (map[gkey]*histogram, error) {
	keyDst, keyOf := g.scanTargets()
	var (
		fallback bool
		h        pgtype.UndecodedBytes
		buf      []int64
	)
	hists := map[gkey]*histogram{}
	if err := s.read(ctx, query, args, append(keyDst, &fallback, &h), func() error {
		k := keyOf(fallback)
		m, ok := hists[k]
		if !ok {
			m = &histogram{}
			hists[k] = m
		}
		var err error
		buf, err = m.addText(h, buf)
		return err
	}); err != nil {
		return nil, fmt.Errorf("summary latency: %w", err)
	}
	return hists, nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
