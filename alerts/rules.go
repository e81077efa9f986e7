package alerts

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/internal/numfmt"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/money"
)

// sample is one scope a rule finds in breach at one evaluation: the scope's labels (service,
// model...), the figures behind it and the words a person reads.
type sample struct {
	group       map[string]string
	figures     map[string]string
	summary     string
	description string
}

// seriesFields are the series columns (and prompt hash) a rule groups by.
type seriesFields struct {
	service, operation, model, provider, tenant, promptHash, org, errorClass string
}

func (f seriesFields) get(name string) string {
	switch name {
	case "service":
		return f.service
	case "operation":
		return f.operation
	case "model":
		return f.model
	case "provider":
		return f.provider
	case "tenant":
		return f.tenant
	case "org":
		return f.org
	case "error_class":
		return f.errorClass
	default:
		return f.promptHash
	}
}

// groupOf returns the key and labels of the scope f falls in under groupBy.
func groupOf(groupBy []string, f seriesFields) (string, map[string]string) {
	labels := make(map[string]string, len(groupBy))
	parts := make([]string, len(groupBy))
	for i, g := range groupBy {
		parts[i] = f.get(g)
		labels[g] = parts[i]
	}
	return strings.Join(parts, "\x00"), labels
}

// scopeText names a scope for a person: "router/classify on claude-haiku-5-5", "model gpt-4o".
func scopeText(labels map[string]string) string {
	var parts []string
	add := func(first, later, v string) {
		if len(parts) == 0 {
			parts = append(parts, first+v)
		} else {
			parts = append(parts, later+v)
		}
	}
	s, o := labels["service"], labels["operation"]
	switch {
	case s != "" && o != "":
		parts = append(parts, s+"/"+o)
	case s != "":
		parts = append(parts, s)
	case o != "":
		parts = append(parts, "operation "+o)
	}
	if m := labels["model"]; m != "" {
		add("model ", "on ", m)
	}
	if p := labels["provider"]; p != "" {
		add("provider ", "via ", p)
	}
	if o, ok := labels["org"]; ok {
		add("org ", "for org ", or(o, "(none)"))
	}
	if t, ok := labels["tenant"]; ok {
		add("tenant ", "for tenant ", or(t, "(none)"))
	}
	if h := labels["prompt_hash"]; h != "" {
		add("prompt ", "prompt ", h)
	}
	return strings.Join(parts, " ")
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// window is a period ending now, split so that whole UTC hours come from rollup_hourly (or
// rollup_cache_hourly) and only the ragged edges from the raw attempts table (all of it for rules
// grouped by tenant, which those rollups do not keep): [lo, flo) and
// [fhi, hi) are read raw, [flo, fhi) from hour buckets. The result is exact to the microsecond
// whatever the window, and the raw scan never covers more than two hours.
type window struct {
	lo, flo, fhi, hi time.Time
}

func splitWindow(now time.Time, d time.Duration) window {
	w := window{lo: now.Add(-d), hi: now}
	w.flo = w.lo.Truncate(time.Hour)
	if w.flo.Before(w.lo) {
		w.flo = w.flo.Add(time.Hour)
	}
	w.fhi = w.hi.Truncate(time.Hour)
	if !w.flo.Before(w.fhi) {
		w.flo, w.fhi = w.hi, w.hi
	}
	return w
}

// rawWindow is the window read wholly from the raw attempts: for rules grouped by tenant, as the
// hourly rollups keep series shapes, not tenants (migration 00011).
func rawWindow(now time.Time, d time.Duration) window {
	return window{lo: now.Add(-d), flo: now, fhi: now, hi: now}
}

// windowFor is the window of rule r: split between rollups and raw edges, or all raw when r groups
// by tenant.
func windowFor(r *Rule, now time.Time) window {
	if byTenant(r) {
		return rawWindow(now, r.Window)
	}
	return splitWindow(now, r.Window)
}

// byTenant tells whether r groups by tenant, which only the raw attempts and the tenant rollups
// keep.
func byTenant(r *Rule) bool { return slices.Contains(r.GroupBy, "tenant") }

func (w window) args(projectID int64) []any {
	return []any{projectID, w.lo, w.flo, w.fhi, w.hi}
}

// rawRange selects raw attempts in the window's edges ($2..$5 from window.args).
const rawRange = `(started_at >= $2 AND started_at < $3 OR started_at >= $4 AND started_at < $5)`

// retrySQL counts attempts and logical calls per series and error class over a window. Fallback
// attempts are left out: they belong to another model's path and would count as attempts of a
// call that model never received.
const retrySQL = `
WITH w AS (
	SELECT series_id, error_class, sum(attempts)::int8 AS attempts, sum(requests)::int8 AS requests
	FROM rollup_hourly
	WHERE project_id = $1 AND bucket >= $3 AND bucket < $4 AND NOT fallback
	GROUP BY series_id, error_class
	UNION ALL
	SELECT series_id, error_class, count(*), count(*) FILTER (WHERE attempt_no = 1)
	FROM attempts
	WHERE project_id = $1 AND NOT fallback AND ` + rawRange + `
	GROUP BY series_id, error_class
)
SELECT s.service, s.operation, s.model, s.provider, s.tenant, w.error_class::text,
	sum(w.attempts)::int8, sum(w.requests)::int8
FROM w JOIN series s ON s.project_id = $1 AND s.id = w.series_id
GROUP BY 1, 2, 3, 4, 5, 6`

// cacheCTE gathers cache activity per series and prompt hash over a window, from
// rollup_cache_hourly and the raw edges (the same attempts rollup_cache_hourly counts). Prompt
// hashes used once in their month are on the series' empty-hash rows of the rollup, counted by
// single_use; on the raw edges every hash is its own group.
const cacheCTE = `
WITH w AS (
	SELECT series_id, prompt_hash, calls, cache_write_calls, cache_read_calls, cache_write_tokens,
		cost_nanos, nocache_cost_nanos, unpriced_attempts, single_use
	FROM rollup_cache_hourly
	WHERE project_id = $1 AND bucket >= $3 AND bucket < $4
	UNION ALL
	SELECT series_id, coalesce(prompt_hash, ''), count(*), count(*) FILTER (WHERE cache_write_tokens > 0),
		count(*) FILTER (WHERE cache_read_tokens > 0), sum(cache_write_tokens), coalesce(sum(cost_nanos), 0),
		coalesce(sum(nocache_cost_nanos), 0), count(*) FILTER (WHERE cost_nanos IS NULL), 0
	FROM attempts
	WHERE project_id = $1 AND ` + rawRange + `
		AND (cache_write_tokens > 0 OR cache_read_tokens > 0 OR prompt_hash IS NOT NULL)
	GROUP BY series_id, coalesce(prompt_hash, '')
)`

// cacheSums are the columns both cache queries return after the series fields.
const cacheSums = `sum(w.calls)::int8, sum(w.cache_write_calls)::int8, sum(w.cache_read_calls)::int8,
	sum(w.cache_write_tokens)::int8, sum(w.cost_nanos)::int8, sum(w.nocache_cost_nanos)::int8,
	sum(w.unpriced_attempts)::int8`

// cacheBySeriesSQL sums cache activity per series, counting distinct prompt hashes (a single-use
// hash of the rollup seen again on a raw edge counts twice).
const cacheBySeriesSQL = cacheCTE + `
SELECT s.service, s.operation, s.model, s.provider, s.tenant, '', ` + cacheSums + `,
	(count(DISTINCT nullif(w.prompt_hash, '')) + sum(w.single_use))::int8
FROM w JOIN series s ON s.project_id = $1 AND s.id = w.series_id
GROUP BY 1, 2, 3, 4, 5`

// cacheByPromptSQL keeps prompt hashes apart, for rules that group by prompt_hash: the
// empty-hash group holds the calls without a hash and those whose hash was used once.
const cacheByPromptSQL = cacheCTE + `
SELECT s.service, s.operation, s.model, s.provider, s.tenant, w.prompt_hash, ` + cacheSums + `,
	CASE WHEN w.prompt_hash <> '' THEN 1 ELSE sum(w.single_use) END::int8
FROM w JOIN series s ON s.project_id = $1 AND s.id = w.series_id
GROUP BY 1, 2, 3, 4, 5, 6`

// dailySQL sums the local day's spend per series shape from rollup_daily, whose buckets are dates
// in the ledger's timezone.
const dailySQL = `
SELECT s.service, s.operation, s.model, s.provider, s.tenant, sum(r.cost_nanos)::int8,
	sum(r.unpriced_attempts)::int8
FROM rollup_daily r JOIN series s ON s.project_id = r.project_id AND s.id = r.series_id
WHERE r.project_id = $1 AND r.bucket = $2::date
GROUP BY 1, 2, 3, 4, 5`

// dailyByTenantSQL is dailySQL per series, tenant included, from the raw attempts of the day
// [$2, $3): for rules grouped by tenant.
const dailyByTenantSQL = `
SELECT s.service, s.operation, s.model, s.provider, s.tenant, coalesce(sum(a.cost_nanos), 0)::int8,
	count(*) FILTER (WHERE a.cost_nanos IS NULL)
FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id
WHERE a.project_id = $1 AND a.started_at >= $2 AND a.started_at < $3
GROUP BY 1, 2, 3, 4, 5`

// evalContext is what a rule evaluation needs besides the rule.
type evalContext struct {
	pool    *pgxpool.Pool
	tz      *time.Location
	project store.Project
	now     time.Time
	// budget is the project's stored monthly budget (nil: none).
	budget *money.Nanos
}

// evaluate runs one rule for one project and returns the scopes in breach.
func evaluate(ctx context.Context, ec evalContext, r *Rule) ([]sample, error) {
	switch r.Kind {
	case KindAttemptsPerCall:
		return evalRetries(ctx, ec, r)
	case KindCacheBroken:
		return evalCache(ctx, ec, r)
	case KindDailySpend:
		return evalDaily(ctx, ec, r)
	case KindMonthlyBudget:
		return evalBudget(ctx, ec, r)
	case KindHeadroom:
		return evalHeadroom(ctx, ec, r)
	case KindErrors:
		return evalErrors(ctx, ec, r)
	}
	return nil, fmt.Errorf("rule %s: unknown kind %q", r.Name, r.Kind)
}

type retryGroup struct {
	labels             map[string]string
	attempts, requests int64
	failed             map[string]int64
}

func evalRetries(ctx context.Context, ec evalContext, r *Rule) ([]sample, error) {
	w := windowFor(r, ec.now)
	rows, err := ec.pool.Query(ctx, retrySQL, w.args(ec.project.ID)...)
	if err != nil {
		return nil, fmt.Errorf("count attempts: %w", err)
	}
	groups := map[string]*retryGroup{}
	var order []string
	var f seriesFields
	var class string
	var attempts, requests int64
	_, err = pgx.ForEachRow(rows, []any{&f.service, &f.operation, &f.model, &f.provider, &f.tenant, &class, &attempts, &requests}, func() error {
		key, labels := groupOf(r.GroupBy, f)
		g := groups[key]
		if g == nil {
			g = &retryGroup{labels: labels, failed: map[string]int64{}}
			groups[key] = g
			order = append(order, key)
		}
		g.attempts += attempts
		g.requests += requests
		if class != "none" {
			g.failed[class] += attempts
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count attempts: %w", err)
	}
	slices.Sort(order)
	var out []sample
	for _, key := range order {
		g := groups[key]
		if g.requests < r.MinRequests {
			continue
		}
		ratio := big.NewRat(g.attempts, g.requests)
		if ratio.Cmp(r.Threshold) <= 0 {
			continue
		}
		out = append(out, retrySample(r, g, ratio))
	}
	return out, nil
}

func retrySample(r *Rule, g *retryGroup, ratio *big.Rat) sample {
	var failedTotal int64
	type classCount struct {
		class string
		n     int64
	}
	var classes []classCount
	for c, n := range g.failed {
		failedTotal += n
		classes = append(classes, classCount{c, n})
	}
	slices.SortFunc(classes, func(a, b classCount) int {
		if a.n != b.n {
			return int(b.n - a.n)
		}
		return strings.Compare(a.class, b.class)
	})
	var parts []string
	for _, c := range classes {
		parts = append(parts, fmt.Sprintf("%s %s", c.class, numfmt.Count(c.n)))
	}
	scope := scopeText(g.labels)
	if scope == "" {
		scope = "all services"
	}
	per := ratio.FloatString(2)
	figures := map[string]string{
		"attempts":          strconv.FormatInt(g.attempts, 10),
		"requests":          strconv.FormatInt(g.requests, 10),
		"attempts_per_call": per,
		"threshold":         ratFloat(r.Threshold),
		"failed_attempts":   strconv.FormatInt(failedTotal, 10),
		"window":            human(r.Window),
	}
	for _, c := range classes {
		figures["failed_"+c.class] = strconv.FormatInt(c.n, 10)
	}
	var d strings.Builder
	fmt.Fprintf(&d, "In the last %s, %s logical calls made %s attempts: %s per call, above the %s threshold.",
		human(r.Window), numfmt.Count(g.requests), numfmt.Count(g.attempts), per, ratFloat(r.Threshold))
	if len(parts) > 0 {
		fmt.Fprintf(&d, " Failed attempts by error class: %s.", strings.Join(parts, ", "))
	}
	d.WriteString(" Retries are multiplying: an SDK that retries inside the service's own retry loop turns" +
		" 4 attempts into 12. Check the SDK's max_retries (0 when the service retries itself), cap the" +
		" service's retries, and honour Retry-After on rate_limited and overloaded errors.")
	return sample{
		group:       g.labels,
		figures:     figures,
		summary:     fmt.Sprintf("%s attempts per call on %s (threshold %s)", per, scope, ratFloat(r.Threshold)),
		description: d.String(),
	}
}

type cacheGroup struct {
	labels                                map[string]string
	calls, writeCalls, readCalls, written int64
	cost, nocache                         money.Nanos
	unpriced, hashes                      int64
}

func evalCache(ctx context.Context, ec evalContext, r *Rule) ([]sample, error) {
	w := windowFor(r, ec.now)
	q := cacheBySeriesSQL
	if slices.Contains(r.GroupBy, "prompt_hash") {
		q = cacheByPromptSQL
	}
	rows, err := ec.pool.Query(ctx, q, w.args(ec.project.ID)...)
	if err != nil {
		return nil, fmt.Errorf("sum cache activity: %w", err)
	}
	groups := map[string]*cacheGroup{}
	var order []string
	var f seriesFields
	var c cacheGroup
	_, err = pgx.ForEachRow(rows, []any{&f.service, &f.operation, &f.model, &f.provider, &f.tenant, &f.promptHash,
		&c.calls, &c.writeCalls, &c.readCalls, &c.written, &c.cost, &c.nocache, &c.unpriced, &c.hashes}, func() error {
		key, labels := groupOf(r.GroupBy, f)
		g := groups[key]
		if g == nil {
			g = &cacheGroup{labels: labels}
			groups[key] = g
			order = append(order, key)
		}
		g.calls += c.calls
		g.writeCalls += c.writeCalls
		g.readCalls += c.readCalls
		g.written += c.written
		g.cost += c.cost
		g.nocache += c.nocache
		g.unpriced += c.unpriced
		g.hashes += c.hashes
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sum cache activity: %w", err)
	}
	slices.Sort(order)
	var out []sample
	for _, key := range order {
		g := groups[key]
		if g.writeCalls < r.MinCalls || g.readCalls > 0 {
			continue
		}
		out = append(out, cacheSample(r, g))
	}
	return out, nil
}

func cacheSample(r *Rule, g *cacheGroup) sample {
	extra := g.cost - g.nocache
	scope := scopeText(g.labels)
	if scope == "" {
		scope = "all services"
	}
	figures := map[string]string{
		"calls":                  strconv.FormatInt(g.calls, 10),
		"cache_write_calls":      strconv.FormatInt(g.writeCalls, 10),
		"cache_read_calls":       "0",
		"cache_write_tokens":     strconv.FormatInt(g.written, 10),
		"cost_usd":               g.cost.String(),
		"nocache_cost_usd":       g.nocache.String(),
		"extra_cost_usd":         extra.String(),
		"distinct_prompt_hashes": strconv.FormatInt(g.hashes, 10),
		"unpriced_calls":         strconv.FormatInt(g.unpriced, 10),
		"window":                 human(r.Window),
	}
	var d strings.Builder
	fmt.Fprintf(&d, "In the last %s, %s calls wrote %s tokens to the prompt cache and none read it back.",
		human(r.Window), numfmt.Count(g.writeCalls), numfmt.Count(g.written))
	switch {
	case extra > 0:
		fmt.Fprintf(&d, " Caching made these calls cost %s more than no caching at all (%s paid, %s without caching).",
			extra.USDFine(), g.cost.USDFine(), g.nocache.USDFine())
	case g.unpriced == g.calls:
		d.WriteString(" These calls have no price in the catalog, so the extra cost is unknown.")
	}
	switch {
	case g.hashes > 1 && g.hashes*2 >= g.writeCalls:
		fmt.Fprintf(&d, " The calls carried %s different prompt hashes: the cached prefix changes on every call."+
			" Something that differs per call (a timestamp, a request id, a user name) sits before the cached"+
			" part of the prompt; move it after the last cache breakpoint.", numfmt.Count(g.hashes))
	case g.hashes == 1:
		d.WriteString(" The prompt hash is the same on every call, so the prefix is stable: the calls come further" +
			" apart than the cache lifetime (5 minutes unless a 1-hour cache is asked for), or something that" +
			" changes per call sits before the cached part without changing the hash you send.")
	default:
		d.WriteString(" Likely cause: something that changes on every call (a timestamp, a request id, a user" +
			" name) sits before the cached part of the prompt, so each call writes a new cache entry instead" +
			" of reading the last one; move it after the last cache breakpoint. Sending prompt_hash with each" +
			" record lets ledgerd confirm it.")
	}
	return sample{
		group:       g.labels,
		figures:     figures,
		summary:     fmt.Sprintf("Prompt cache written %s times and never read on %s", numfmt.Count(g.writeCalls), scope),
		description: d.String(),
	}
}

type spendGroup struct {
	labels   map[string]string
	spend    money.Nanos
	unpriced int64
	parts    map[string]money.Nanos // spend by "service/operation on model"
}

// dayBounds returns the start of now's day in tz and the day's length (23 to 25 hours across DST
// changes).
func dayBounds(now time.Time, tz *time.Location) (time.Time, time.Duration) {
	l := now.In(tz)
	start := time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, tz)
	return start, start.AddDate(0, 0, 1).Sub(start)
}

// project scales spend so far to a whole period: spend × length ÷ elapsed, exactly, rounded half
// away from zero.
func project(spend money.Nanos, elapsed, length time.Duration) money.Nanos {
	if elapsed <= 0 {
		return spend
	}
	r := new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(int64(spend)), big.NewInt(int64(length))), big.NewInt(int64(elapsed)))
	q := money.RoundRat(r)
	if !q.IsInt64() {
		return money.Nanos(1<<63 - 1)
	}
	return money.Nanos(q.Int64())
}

func evalDaily(ctx context.Context, ec evalContext, r *Rule) ([]sample, error) {
	start, length := dayBounds(ec.now, ec.tz)
	elapsed := ec.now.Sub(start)
	q, args := dailySQL, []any{ec.project.ID, start.Format(time.DateOnly)}
	if byTenant(r) {
		q, args = dailyByTenantSQL, []any{ec.project.ID, start, start.Add(length)}
	}
	rows, err := ec.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sum daily spend: %w", err)
	}
	groups := map[string]*spendGroup{}
	var order []string
	var f seriesFields
	var spend money.Nanos
	var unpriced int64
	_, err = pgx.ForEachRow(rows, []any{&f.service, &f.operation, &f.model, &f.provider, &f.tenant, &spend, &unpriced}, func() error {
		key, labels := groupOf(r.GroupBy, f)
		g := groups[key]
		if g == nil {
			g = &spendGroup{labels: labels, parts: map[string]money.Nanos{}}
			groups[key] = g
			order = append(order, key)
		}
		g.spend += spend
		g.unpriced += unpriced
		g.parts[f.service+"/"+f.operation+" on "+f.model] += spend
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sum daily spend: %w", err)
	}
	slices.Sort(order)
	var out []sample
	for _, key := range order {
		g := groups[key]
		projected := project(g.spend, elapsed, length)
		useProjection := r.Projection && elapsed >= r.ProjectionAfter
		switch {
		case g.spend > r.ThresholdUSD:
			out = append(out, dailySample(r, ec, g, start, elapsed, length, projected, useProjection, "actual"))
		case useProjection && projected > r.ThresholdUSD:
			out = append(out, dailySample(r, ec, g, start, elapsed, length, projected, true, "projected"))
		}
	}
	return out, nil
}

func dailySample(r *Rule, ec evalContext, g *spendGroup, start time.Time, elapsed, length time.Duration,
	projected money.Nanos, showProjection bool, basis string) sample {
	scope := scopeText(g.labels)
	where := "project " + ec.project.Name
	if scope != "" {
		where = scope + " (project " + ec.project.Name + ")"
	}
	figures := map[string]string{
		"spend_usd":     g.spend.String(),
		"threshold_usd": r.ThresholdUSD.String(),
		"basis":         basis,
		"day":           start.Format(time.DateOnly),
		"timezone":      ec.tz.String(),
		"day_elapsed":   percent(elapsed, length),
	}
	if showProjection {
		figures["projected_usd"] = projected.String()
	}
	if g.unpriced > 0 {
		figures["unpriced_attempts"] = strconv.FormatInt(g.unpriced, 10)
	}
	var d strings.Builder
	fmt.Fprintf(&d, "Spend since midnight (%s) is %s at %s, %s of the day", ec.tz.String(), g.spend.USD(),
		ec.now.In(ec.tz).Format("15:04"), percent(elapsed, length))
	if showProjection {
		fmt.Fprintf(&d, "; at this rate the day ends at %s", projected.USD())
	}
	fmt.Fprintf(&d, ". The threshold is %s a day.", r.ThresholdUSD.USD())
	if top := topParts(g.parts, 3); top != "" {
		fmt.Fprintf(&d, " Most of it: %s.", top)
	}
	if g.unpriced > 0 {
		fmt.Fprintf(&d, " %s attempts have no price and are not counted.", numfmt.Count(g.unpriced))
	}
	summary := fmt.Sprintf("Daily spend %s is over %s for %s", g.spend.USD(), r.ThresholdUSD.USD(), where)
	if basis == "projected" {
		summary = fmt.Sprintf("Daily spend heading for %s, over %s, for %s (%s so far)", projected.USD(),
			r.ThresholdUSD.USD(), where, g.spend.USD())
	}
	return sample{group: g.labels, figures: figures, summary: summary, description: d.String()}
}

// topParts lists the n largest contributions, largest first.
func topParts(parts map[string]money.Nanos, n int) string {
	type part struct {
		name  string
		spend money.Nanos
	}
	var all []part
	for k, v := range parts {
		if v > 0 {
			all = append(all, part{k, v})
		}
	}
	slices.SortFunc(all, func(a, b part) int {
		if a.spend != b.spend {
			if a.spend > b.spend {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	var out []string
	for i, p := range all {
		if i == n {
			break
		}
		out = append(out, p.name+" "+p.spend.USD())
	}
	return strings.Join(out, ", ")
}

// ratFloat writes r with as many decimals as it needs (up to 6).
func ratFloat(r *big.Rat) string {
	s := r.FloatString(6)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// percent writes part/whole as a whole percentage, rounded down.
func percent(part, whole time.Duration) string {
	return strconv.FormatInt(int64(part)*100/int64(whole), 10) + "%"
}

// human writes a duration without trailing zero units: 15m, 1h, 1h30m.
func human(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
