package grafana

// Fragments the PostgreSQL panels share. Each panel's SQL is a constant built from them at compile
// time; Grafana fills the template variables and macros ($__timeFilter, $__timeGroup, $__timeFrom,
// $__timeTo, $__interval) when it runs the query.
const (
	// daily and cached name a rollup as r, joined to its series for names and filters.
	daily  = `FROM rollup_daily r JOIN series s ON s.project_id = r.project_id AND s.id = r.series_id`
	cached = `FROM rollup_cache_hourly r JOIN series s ON s.project_id = r.project_id AND s.id = r.series_id`

	// seriesFilter keeps the series the service and model variables select. Each stands for
	// everything with '__all' when All is selected, so a project without series yet still gives a
	// valid query. There is no tenant variable: the hourly and daily rollups keep series shapes,
	// not tenants (migration 00011); the tenant table reads the tenant rollup.
	seriesFilter = `('__all' IN ($service) OR s.service IN ($service))
  AND ('__all' IN ($model) OR s.model IN ($model))`

	// filter adds the projects, listed by id so the rollups' primary key (project_id, bucket, ...)
	// serves the time range.
	filter = `r.project_id IN ($project)
  AND ` + seriesFilter

	// ledgerTZ is the timezone rollup_daily counts days in.
	ledgerTZ = `coalesce((SELECT value FROM settings WHERE key = 'timezone'), 'UTC')`

	// lastDay is the ledger's local date of the range's end (an end at midnight belongs to the day
	// before); days are the daily buckets of the local days the range overlaps.
	lastDay  = `(($__timeTo()::timestamptz - interval '1 microsecond') AT TIME ZONE ` + ledgerTZ + `)::date`
	firstDay = `($__timeFrom()::timestamptz AT TIME ZONE ` + ledgerTZ + `)::date`
	days     = `r.bucket BETWEEN ` + firstDay + ` AND ` + lastDay
	// shortSpan is a range rollup_hourly answers: up to 3 days, within the 8 days it keeps every
	// hour (rollup.HourlyKeep; older hours are pruned).
	shortSpan = `$__timeTo()::timestamptz - $__timeFrom()::timestamptz <= interval '3 days'
    AND $__timeFrom()::timestamptz >= now() - interval '8 days'`

	rollupCols = `project_id, series_id, fallback, status, error_class, attempts, requests, input_tokens, output_tokens,
    cache_write_tokens, cache_write_1h_tokens, cache_read_tokens, reasoning_tokens, cache_write_calls, cache_read_calls,
    cost_nanos, nocache_cost_nanos, unpriced_attempts, client_cost_nanos, cost_mismatch_attempts, latency_sum_ms, latency_hist`

	// rollupRows picks the rollup by the range: rollup_hourly for short ones (shortSpan), grouped
	// by $__interval; rollup_daily otherwise, one point per local day the range overlaps (about 20
	// times fewer rows: see BenchmarkRollupChoice). t is the group's start in epoch seconds. The
	// branch not taken is a one-time filter that PostgreSQL evaluates once and skips.
	rollupRows = `WITH r AS (
  SELECT $__timeGroup(bucket, $__interval) AS t, ` + rollupCols + `
  FROM rollup_hourly
  WHERE ` + shortSpan + ` AND $__timeFilter(bucket) AND project_id IN ($project)
  UNION ALL
  SELECT extract(epoch FROM bucket::timestamp AT TIME ZONE ` + ledgerTZ + `) AS t, ` + rollupCols + `
  FROM rollup_daily
  WHERE NOT (` + shortSpan + `)
    AND bucket BETWEEN ` + firstDay + ` AND ` + lastDay + ` AND project_id IN ($project)
)
`

	// fromRows joins rollupRows to its series.
	fromRows = `FROM r JOIN series s ON s.project_id = r.project_id AND s.id = r.series_id`

	// dollars turns summed nano-dollars into exact numeric dollars.
	dollars = `coalesce(sum(r.cost_nanos), 0)::numeric / 1e9`

	// perCall divides dollars by logical calls.
	perCall = `sum(r.cost_nanos)::numeric / 1e9 / nullif(sum(r.requests), 0)`
)
