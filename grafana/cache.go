package grafana

// The prompt cache dashboard's queries. Savings compare each priced attempt's cost with what it
// would have cost with caching off (nocache_cost_nanos): negative savings are a loss.
const (
	savedDollars = `(coalesce(sum(r.nocache_cost_nanos), 0) - coalesce(sum(r.cost_nanos), 0))::numeric / 1e9`
	readShare    = `sum(r.cache_read_tokens)::float8 / nullif(sum(r.input_tokens + r.cache_write_tokens + r.cache_read_tokens), 0)`

	readShareSQL = rollupRows + `SELECT ` + readShare + ` AS cache_read_share
` + fromRows + `
WHERE ` + seriesFilter

	savedSQL = rollupRows + `SELECT ` + savedDollars + ` AS saved
` + fromRows + `
WHERE ` + seriesFilter

	// brokenCountSQL counts prefixes (series and prompt hash) that wrote the cache in the range and
	// never read it.
	brokenCountSQL = `SELECT count(*) AS broken_caches FROM (
  SELECT 1
  ` + cached + `
  WHERE $__timeFilter(r.bucket) AND ` + filter + `
  GROUP BY r.series_id, r.prompt_hash
  HAVING sum(r.cache_write_calls) > 0 AND sum(r.cache_read_calls) = 0
) broken`

	readShareByModelSQL = rollupRows + `SELECT r.t AS "time", s.model AS metric, ` + readShare + ` AS cache_read_share
` + fromRows + `
WHERE ` + seriesFilter + `
GROUP BY 1, 2
ORDER BY 1, 2`

	savedByServiceSQL = rollupRows + `SELECT r.t AS "time", s.service AS metric, ` + savedDollars + ` AS saved
` + fromRows + `
WHERE ` + seriesFilter + `
GROUP BY 1, 2
ORDER BY 1, 2`

	// brokenSQL lists them; calls without a hash and those whose hash was used once in its month
	// share the empty-hash row, shown as "(none or single-use)": a prefix that changes on every call.
	brokenSQL = `SELECT s.service, s.provider, s.model, CASE WHEN r.prompt_hash = '' THEN '(none or single-use)' ELSE r.prompt_hash END AS prompt_hash,
  sum(r.cache_write_calls) AS write_calls, sum(r.cache_write_tokens) AS written_tokens, ` + savedDollars + ` AS saved
` + cached + `
WHERE $__timeFilter(r.bucket) AND ` + filter + `
GROUP BY 1, 2, 3, 4
HAVING sum(r.cache_write_calls) > 0 AND sum(r.cache_read_calls) = 0
ORDER BY saved, 1, 2, 3, 4
LIMIT 100`

	cacheTableSQL = rollupRows + `SELECT s.service, s.provider, s.model, sum(r.attempts) AS attempts, sum(r.cache_write_calls) AS write_calls,
  sum(r.cache_read_calls) AS read_calls, ` + readShare + ` AS cache_read_share, ` + savedDollars + ` AS saved
` + fromRows + `
WHERE ` + seriesFilter + `
GROUP BY 1, 2, 3
HAVING sum(r.cache_write_calls) + sum(r.cache_read_calls) > 0
ORDER BY saved DESC, 1, 2, 3`
)

func cacheDashboard() Dashboard {
	return Dashboard{
		UID: "ledgerd-cache", Title: "Prompt cache", File: "prompt-cache.json", Source: PostgresType, From: "now-7d",
		Description: "Whether prompt caching pays off: share of input read from the cache, money saved or lost, caches written and never read.",
		Variables:   rollupVariables,
		Panels: []Panel{
			{Title: "Cache read share", Kind: Stat, Unit: "percentunit", Decimals: 1, Width: 8, Height: 4,
				Description: "Input tokens read from the cache, of all input tokens (plain, cache writes and cache reads).",
				Queries:     []Query{{SQL: readShareSQL, Format: FormatTable}}},
			{Title: "Saved by caching", Kind: Stat, Unit: "currencyUSD", Decimals: 2, Width: 8, Height: 4,
				Description: "What priced attempts would have cost without caching, minus what they cost. Negative: caching lost money.",
				Queries:     []Query{{SQL: savedSQL, Format: FormatTable}}},
			{Title: "Caches written, never read", Kind: Stat, Unit: "short", Width: 8, Height: 4,
				Description: "Prefixes (series and prompt hash) that wrote the cache in the range and never read it: each write costs more than plain input.",
				Queries:     []Query{{SQL: brokenCountSQL, Format: FormatTable}}},
			{Title: "Cache read share by model", Kind: TimeSeries, Unit: "percentunit", Width: 12, Height: 8, MinInterval: "1h",
				Queries: []Query{{SQL: readShareByModelSQL, Format: FormatTimeSeries}}},
			{Title: "Saved by caching, by service", Kind: TimeSeries, Unit: "currencyUSD", Width: 12, Height: 8, MinInterval: "1h",
				Queries: []Query{{SQL: savedByServiceSQL, Format: FormatTimeSeries}}},
			{Title: "Broken caches", Kind: Table, Width: 24, Height: 9,
				Description: "Prefixes that wrote the cache and never read it in the range, biggest loss first.",
				Columns:     map[string]string{"saved": "currencyUSD"},
				Queries:     []Query{{SQL: brokenSQL, Format: FormatTable}}},
			{Title: "Cache use by service and model", Kind: Table, Width: 24, Height: 9,
				Columns: map[string]string{"saved": "currencyUSD", "cache_read_share": "percentunit"},
				Queries: []Query{{SQL: cacheTableSQL, Format: FormatTable}}},
		},
	}
}
