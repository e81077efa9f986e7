package rollup

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The statements of a rebuild, which recounts the rollups from the raw attempts with the
// expressions the writer uses (Sums, CacheSums), so a rebuilt rollup counts exactly what the writer
// counts. Parameters named covered are the ranges whose raw attempts exist, as two arrays: the
// starts and the ends.
var (
	coveredSQL = `SELECT 1 FROM unnest($1::timestamptz[], $2::timestamptz[]) AS c(lo, hi)
		WHERE %[1]s >= c.lo AND %[1]s < c.hi`

	// LostHoursSQL lists the hours whose raw attempts are gone ($1, $2: covered), from the narrow
	// hourly rollup, which keeps every hour rollup_hourly ever held.
	LostHoursSQL = `SELECT DISTINCT h.bucket FROM ` + HourlyBy[0].Table + ` h
		WHERE NOT EXISTS (` + fmt.Sprintf(coveredSQL, "h.bucket") + `) ORDER BY 1`

	deleteHourlySQL = `DELETE FROM rollup_hourly h WHERE EXISTS (` + fmt.Sprintf(coveredSQL, "h.bucket") + `)`
	deleteCacheSQL  = `DELETE FROM rollup_cache_hourly h WHERE EXISTS (` + fmt.Sprintf(coveredSQL, "h.bucket") + `)`
	// Months are covered whole or not at all (partitions are months).
	deletePrefixesSQL = `DELETE FROM cache_prefixes p WHERE EXISTS (` + fmt.Sprintf(coveredSQL, "p.month") + `)`

	// $1: days to keep.
	deleteDailySQL = `DELETE FROM rollup_daily d WHERE NOT (d.bucket = ANY($1::date[]))`

	// rollup_hourly is not recounted before the hours Prune removed.
	hourlySQL = countInsert("rollup_hourly", HourBucketExpr, "started_at >= "+PrunedBeforeSQL)

	// $1: the timezone; $2: local days not to count from raw attempts.
	dailySQL = countInsert("rollup_daily", DayBucketExpr("$1"), "NOT ("+DayBucketExpr("$1")+" = ANY($2::date[]))")

	// prefixesSQL counts every prompt_hash's calls per UTC month, with the series, hour and cache
	// sums of the hashes used once, as the fold leaves them (see cacheFoldCTEs).
	prefixesSQL = func() string {
		var cols, exprs []string
		for _, s := range CacheSums[1:] {
			cols = append(cols, s.Col)
			exprs = append(exprs, "CASE WHEN count(*) = 1 THEN "+s.Expr+" END")
		}
		return fmt.Sprintf(`INSERT INTO cache_prefixes (project_id, month, prompt_hash, calls, series_id, fallback, bucket, %s)
			SELECT a.project_id, %s, prompt_hash, count(*), CASE WHEN count(*) = 1 THEN min(s.shape_id) END,
				CASE WHEN count(*) = 1 THEN bool_or(fallback) END, CASE WHEN count(*) = 1 THEN min(%s) END, %s
			FROM attempts a `+seriesOfA+` WHERE prompt_hash IS NOT NULL GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
			strings.Join(cols, ", "), MonthOf("started_at"), HourBucketExpr, strings.Join(exprs, ", "))
	}()

	// cacheSQL counts rollup_cache_hourly: a hash used once in its month on the series' empty-hash
	// row.
	cacheSQL = fmt.Sprintf(`INSERT INTO rollup_cache_hourly (project_id, bucket, series_id, fallback, prompt_hash, %s, single_use)
			SELECT project_id, %s, shape_id, fallback, CASE WHEN prefix_calls >= 2 THEN prompt_hash ELSE '' END, %s,
				count(*) FILTER (WHERE prefix_calls = 1)
			FROM (SELECT a.*, p.calls AS prefix_calls, s.shape_id
				FROM attempts a `+seriesOfA+` LEFT JOIN cache_prefixes p ON p.project_id = a.project_id
					AND p.month = %s AND p.prompt_hash = a.prompt_hash) a
			WHERE %s GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2`, strings.Join(Cols(CacheSums), ", "), HourBucketExpr,
		strings.Join(Exprs(CacheSums), ", "), MonthOf("a.started_at"), CacheWhere)

	// dailyFromHourlySQL recounts the local days $2 (timezone $1) from the hourly rollups.
	dailyFromHourlySQL = fmt.Sprintf(`INSERT INTO rollup_daily (%s, %s, latency_hist)
			SELECT h.project_id, l.day, h.series_id, h.fallback, h.status, h.error_class, %s, hist_sum(h.latency_hist)
			FROM rollup_hourly h JOIN unnest($2::date[]) AS l(day) ON l.day = (h.bucket AT TIME ZONE $1)::date
			GROUP BY 1, 2, 3, 4, 5, 6`, strings.Join(Key, ", "), strings.Join(Cols(Sums), ", "),
		strings.Join(summed("h.", Sums), ", "))

	// narrowSQL sums rollup_daily into each narrow daily rollup that keeps no tenant, once
	// rollup_daily is recounted: they then agree by construction.
	narrowSQL = func() []Step {
		var out []Step
		for _, d := range DailyBy {
			if d.Tenant() {
				continue
			}
			out = append(out, Step{"clear " + d.Table, "DELETE FROM " + d.Table, nil},
				Step{"count " + d.Table, fmt.Sprintf(`INSERT INTO %[1]s (%[2]s, %[3]s, latency_hist)
				SELECT r.project_id, r.bucket, s.%[4]s, r.fallback, r.status, r.error_class, %[5]s, hist_sum(r.latency_hist)
				FROM rollup_daily r `+JoinSeries("r")+`
				GROUP BY %[6]s ORDER BY %[6]s`, d.Table, strings.Join(d.Key(), ", "), strings.Join(Cols(Sums), ", "),
					strings.Join(d.Keep, ", s."), strings.Join(summed("r.", Sums), ", "), Ordinals(len(d.Key()))), nil})
		}
		return out
	}()

	setTimezoneSQL = `INSERT INTO settings (key, value) VALUES ('timezone', $1)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`
	analyzeSQL = `ANALYZE series, rollup_hourly, rollup_daily, ` + NarrowTables() + `, rollup_cache_hourly, cache_prefixes,
		rollup_load_minute, rollup_load_peaks, rollup_tenant_spend, rollup_tenant_blocks, rollup_minute5,
		rollup_cache_daily, rollup_cache_days, rollup_model_minute`

	// CountSQL counts the rows of rollup_hourly, rollup_daily and rollup_cache_hourly.
	CountSQL = `SELECT (SELECT count(*) FROM rollup_hourly), (SELECT count(*) FROM rollup_daily),
		(SELECT count(*) FROM rollup_cache_hourly)`
)

// hourlyNarrowSteps recount each narrow hourly rollup from the raw attempts of the hours covered
// (the arguments of coveredSQL), not from rollup_hourly, which may have pruned them: their rows of
// hours whose raw attempts are gone are kept.
func hourlyNarrowSteps(covered []any) []Step {
	var out []Step
	for _, d := range HourlyBy {
		out = append(out, Step{"clear " + d.Table, `DELETE FROM ` + d.Table + ` h WHERE EXISTS (` + fmt.Sprintf(coveredSQL, "h.bucket") + `)`, covered},
			Step{"count " + d.Table, countNarrow(d, HourBucketExpr, "TRUE"), nil})
	}
	return out
}

// countNarrow counts the attempts matching where into the narrow rollup d, bucketed by bucket, in
// key order.
func countNarrow(d Narrow, bucket, where string) string {
	return fmt.Sprintf(`INSERT INTO %[1]s (%[2]s, %[3]s, latency_hist)
		SELECT a.project_id, %[4]s, s.%[5]s, fallback, status, error_class, %[6]s, %[7]s
		FROM attempts a %[8]s WHERE %[9]s GROUP BY %[10]s ORDER BY %[10]s`, d.Table, strings.Join(d.Key(), ", "),
		strings.Join(Cols(Sums), ", "), bucket, strings.Join(d.Keep, ", s."), strings.Join(Exprs(Sums), ", "),
		LatencyHistExpr, seriesOfA, where, Ordinals(len(d.Key())))
}

// countInsert counts the attempts matching where into table, per series shape, bucketed by bucket.
// Rows are written in (project, bucket) order, so the rows of a range sit on few pages, as the
// writer leaves them.
func countInsert(table, bucket, where string) string {
	return fmt.Sprintf(`INSERT INTO %s (%s, %s, latency_hist)
		SELECT a.project_id, %s, s.shape_id, fallback, status, error_class, %s, %s
		FROM attempts a %s WHERE %s GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2`, table, strings.Join(Key, ", "),
		strings.Join(Cols(Sums), ", "), bucket, strings.Join(Exprs(Sums), ", "), LatencyHistExpr, seriesOfA, where)
}

// tenantSQL recounts a narrow daily rollup that keeps the tenant from the raw attempts: no
// shape-keyed rollup holds its detail. Its rows of the local days keep are kept, the other rows
// cleared, and the days not in skip counted from the raw attempts in the timezone tz.
func tenantSQL(d Narrow, keep, skip []time.Time, tz string) []Step {
	day := DayBucketExpr("$2")
	return []Step{
		{"clear " + d.Table, "DELETE FROM " + d.Table + " WHERE NOT (bucket = ANY($1::date[]))", []any{nonNil(keep)}},
		{"count " + d.Table, countNarrow(d, day, "NOT ("+day+" = ANY($1::date[]))"),
			[]any{nonNil(skip), tz}},
	}
}

// nonNil is days, or an empty list for none: SQL's NULL array would match no day.
func nonNil(days []time.Time) []time.Time {
	if days == nil {
		return []time.Time{}
	}
	return days
}

// summed is sum(alias.col) of each of sums, in order.
func summed(alias string, sums []Sum) []string {
	out := make([]string, len(sums))
	for i, s := range sums {
		out[i] = "sum(" + alias + s.Col + ")"
	}
	return out
}

// Step is one statement of a rebuild.
type Step struct {
	What string
	SQL  string
	Args []any
}

// Recount says what a rebuild recounts.
type Recount struct {
	// CoveredFrom and CoveredTo are the ranges whose raw attempts exist: every rollup row inside
	// them is recounted, every one outside kept.
	CoveredFrom, CoveredTo []time.Time
	// Timezone counts the local days (an IANA name).
	Timezone string
	// KeepDays are local days (as UTC midnights) whose rollup_daily rows are kept; Partial the
	// kept days not to count from raw attempts, and FromHourly those recounted from rollup_hourly
	// instead.
	KeepDays, Partial, FromHourly []time.Time
}

// RebuildSteps are the statements of a rebuild that recounts r, in order, ending with the
// timezone stored and the rollups analyzed.
func RebuildSteps(r Recount) []Step {
	covered := []any{r.CoveredFrom, r.CoveredTo}
	steps := []Step{
		{"clear hourly rollups", deleteHourlySQL, covered},
		{"count hourly rollups", hourlySQL, nil},
	}
	steps = append(steps, hourlyNarrowSteps(covered)...)
	steps = append(steps, []Step{
		{"clear cache rollups", deleteCacheSQL, covered},
		{"clear cache prefixes", deletePrefixesSQL, covered},
		{"count cache prefixes", prefixesSQL, nil},
		{"count cache rollups", cacheSQL, nil},
		{"clear daily rollups", deleteDailySQL, []any{r.KeepDays}},
		{"count daily rollups", dailySQL, []any{r.Timezone, r.Partial}},
	}...)
	if len(r.FromHourly) > 0 {
		steps = append(steps, Step{"recount kept days", dailyFromHourlySQL, []any{r.Timezone, r.FromHourly}})
	}
	steps = append(steps, daysRebuildSteps...)
	steps = append(steps, narrowSQL...)
	// The tenant rollups keep their rows of the days whose raw attempts are gone, as rollup_daily
	// does; in another timezone those days cannot be recounted (no hourly rollup keeps tenants),
	// so their tenant rows are dropped rather than counted in two timezones.
	for _, d := range DailyBy {
		if d.Tenant() {
			steps = append(steps, tenantSQL(d, r.KeepDays, slices.Concat(r.KeepDays, r.FromHourly), r.Timezone)...)
		}
	}
	steps = append(steps, cacheDaysRebuildSteps(r.Timezone)...)
	steps = append(steps, spendRebuildSteps...)
	steps = append(steps, blocksRebuildSteps...)
	steps = append(steps, minuteRebuildSteps(covered)...)
	steps = append(steps, Step{"clear load minutes", LoadRebuildSQL[0], covered},
		Step{"count load minutes", LoadRebuildSQL[1], nil},
		Step{"clear model minutes", `DELETE FROM rollup_model_minute`, nil},
		Step{"count model minutes", modelMinutesFromLoadSQL, nil},
		Step{"clear load peaks", LoadRebuildSQL[2], nil},
		Step{"count load peaks", LoadRebuildSQL[3], []any{r.Timezone}})
	return append(steps, Step{"store timezone", setTimezoneSQL, []any{r.Timezone}},
		Step{"analyze rollups", analyzeSQL, nil})
}
