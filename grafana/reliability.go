package grafana

// The reliability dashboard's queries. Primary statistics leave fallback attempts out (fallback =
// false): a fallback model's results never count toward the model it stood in for.
const (
	primaryAttempts = `sum(r.attempts) FILTER (WHERE NOT r.fallback)`
	attemptsPerCall = primaryAttempts + `::float8 / nullif(sum(r.requests) FILTER (WHERE NOT r.fallback), 0)`
	errorRate       = `sum(r.attempts) FILTER (WHERE NOT r.fallback AND r.status <> 'ok')::float8 / nullif(` + primaryAttempts + `, 0)`
	// rateLimited are the classes providers answer with HTTP 429.
	rateLimitedShare = `sum(r.attempts) FILTER (WHERE NOT r.fallback AND r.error_class IN ('rate_limited', 'quota_exhausted'))::float8 / nullif(` + primaryAttempts + `, 0)`
	// fallbackShare is the share of logical calls a fallback answered.
	fallbackShare = `sum(r.attempts) FILTER (WHERE r.fallback AND r.status = 'ok')::float8 / nullif(sum(r.requests), 0)`
	// okLatency merges the latency histograms of successful primary attempts.
	okLatency = `hist_sum(r.latency_hist) FILTER (WHERE NOT r.fallback AND r.status = 'ok')`

	attemptsPerCallSQL = rollupRows + `SELECT ` + attemptsPerCall + ` AS attempts_per_call
` + fromRows + `
WHERE ` + seriesFilter

	errorRateSQL = rollupRows + `SELECT ` + errorRate + ` AS error_rate
` + fromRows + `
WHERE ` + seriesFilter

	rateLimitedSQL = rollupRows + `SELECT ` + rateLimitedShare + ` AS rate_limited_share
` + fromRows + `
WHERE ` + seriesFilter

	fallbackShareSQL = rollupRows + `SELECT ` + fallbackShare + ` AS fallback_share
` + fromRows + `
WHERE ` + seriesFilter

	failedSpendSQL = rollupRows + `SELECT coalesce(sum(r.cost_nanos) FILTER (WHERE r.status <> 'ok'), 0)::numeric / 1e9 AS failed_spend
` + fromRows + `
WHERE ` + seriesFilter

	attemptsPerCallByModelSQL = rollupRows + `SELECT r.t AS "time", s.model AS metric, ` + attemptsPerCall + ` AS attempts_per_call
` + fromRows + `
WHERE ` + seriesFilter + `
GROUP BY 1, 2
ORDER BY 1, 2`

	errorsByClassSQL = rollupRows + `SELECT r.t AS "time", r.error_class::text AS metric, sum(r.attempts) AS attempts
` + fromRows + `
WHERE NOT r.fallback AND r.status <> 'ok' AND ` + seriesFilter + `
GROUP BY 1, 2
ORDER BY 1, 2`

	latencySQL = rollupRows + `SELECT r.t AS "time",
  hist_quantile(` + okLatency + `, 0.5) AS p50,
  hist_quantile(` + okLatency + `, 0.9) AS p90,
  hist_quantile(` + okLatency + `, 0.99) AS p99
` + fromRows + `
WHERE ` + seriesFilter + `
GROUP BY 1
ORDER BY 1`

	reliabilityTableSQL = rollupRows + `SELECT s.service, s.provider, s.model, sum(r.requests) FILTER (WHERE NOT r.fallback) AS calls,
  ` + attemptsPerCall + ` AS attempts_per_call, ` + errorRate + ` AS error_rate, ` + rateLimitedShare + ` AS rate_limited_share,
  hist_quantile(` + okLatency + `, 0.5) AS p50_ms, hist_quantile(` + okLatency + `, 0.9) AS p90_ms,
  hist_quantile(` + okLatency + `, 0.99) AS p99_ms,
  sum(r.latency_sum_ms) FILTER (WHERE NOT r.fallback AND r.status = 'ok')::float8
    / nullif(sum(r.attempts) FILTER (WHERE NOT r.fallback AND r.status = 'ok'), 0) AS mean_ms
` + fromRows + `
WHERE ` + seriesFilter + `
GROUP BY 1, 2, 3
HAVING ` + primaryAttempts + ` > 0
ORDER BY calls DESC, 1, 2, 3`

	fallbackPathsSQL = rollupRows + `SELECT s.service, s.fallback_from, s.provider, s.model, sum(r.attempts) AS attempts,
  sum(r.attempts) FILTER (WHERE r.status = 'ok') AS answered, ` + dollars + ` AS spend
` + fromRows + `
WHERE r.fallback AND ` + seriesFilter + `
GROUP BY 1, 2, 3, 4
ORDER BY attempts DESC, 1, 2, 3, 4`
)

func reliabilityDashboard() Dashboard {
	return Dashboard{
		UID: "ledgerd-reliability", Title: "LLM reliability", File: "llm-reliability.json", Source: PostgresType, From: "now-7d",
		Description: "Retry amplification, error classes, rate limiting, fallbacks and latency of LLM calls. Fallback attempts are kept out of the primary figures.",
		Variables:   rollupVariables,
		Panels: []Panel{
			{Title: "Attempts per call", Kind: Stat, Unit: "none", Decimals: 2, Width: 5, Height: 4,
				Description: "Primary attempts per logical call: 1.00 means no retries.",
				Queries:     []Query{{SQL: attemptsPerCallSQL, Format: FormatTable}}},
			{Title: "Error rate", Kind: Stat, Unit: "percentunit", Decimals: 1, Width: 5, Height: 4,
				Description: "Primary attempts that did not succeed.",
				Queries:     []Query{{SQL: errorRateSQL, Format: FormatTable}}},
			{Title: "Rate limited (429)", Kind: Stat, Unit: "percentunit", Decimals: 1, Width: 5, Height: 4,
				Description: "Primary attempts refused with rate_limited or quota_exhausted, the classes providers answer with HTTP 429.",
				Queries:     []Query{{SQL: rateLimitedSQL, Format: FormatTable}}},
			{Title: "Fallback share", Kind: Stat, Unit: "percentunit", Decimals: 1, Width: 4, Height: 4,
				Description: "Logical calls answered by a fallback model.",
				Queries:     []Query{{SQL: fallbackShareSQL, Format: FormatTable}}},
			{Title: "Spend on failed attempts", Kind: Stat, Unit: "currencyUSD", Decimals: 2, Width: 5, Height: 4,
				Description: "Cost of attempts that errored or were cancelled: money that bought no answer.",
				Queries:     []Query{{SQL: failedSpendSQL, Format: FormatTable}}},
			{Title: "Attempts per call by model", Kind: TimeSeries, Unit: "none", Width: 12, Height: 8, MinInterval: "1h",
				Queries: []Query{{SQL: attemptsPerCallByModelSQL, Format: FormatTimeSeries}}},
			{Title: "Failed attempts by error class", Kind: Bars, Unit: "short", Width: 12, Height: 8, MinInterval: "1h",
				Queries: []Query{{SQL: errorsByClassSQL, Format: FormatTimeSeries}}},
			{Title: "Latency percentiles", Kind: TimeSeries, Unit: "ms", Width: 24, Height: 8, MinInterval: "1h",
				Description: "Successful primary attempts; estimated from log buckets (within 2.2%).",
				Queries:     []Query{{SQL: latencySQL, Format: FormatTimeSeries}}},
			{Title: "By service and model", Kind: Table, Width: 24, Height: 9,
				Columns: map[string]string{"attempts_per_call": "none", "error_rate": "percentunit", "rate_limited_share": "percentunit",
					"p50_ms": "ms", "p90_ms": "ms", "p99_ms": "ms", "mean_ms": "ms"},
				Queries: []Query{{SQL: reliabilityTableSQL, Format: FormatTable}}},
			{Title: "Fallback paths", Kind: Table, Width: 24, Height: 8,
				Description: "Attempts that served a fallback: the model they stood in for and the model that answered.",
				Columns:     map[string]string{"spend": "currencyUSD"},
				Queries:     []Query{{SQL: fallbackPathsSQL, Format: FormatTable}}},
		},
	}
}
