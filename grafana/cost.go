package grafana

// rollupVariables are the template variables of the PostgreSQL dashboards.
var rollupVariables = []Variable{
	{Name: "project", Label: "Project", Query: `SELECT id AS __value, name AS __text FROM projects ORDER BY name`},
	{Name: "service", Label: "Service", AllValue: "'__all'",
		Query: `SELECT DISTINCT service FROM series WHERE project_id IN ($project) ORDER BY 1`},
	{Name: "model", Label: "Model", AllValue: "'__all'",
		Query: `SELECT DISTINCT model FROM series WHERE project_id IN ($project) AND ('__all' IN ($service) OR service IN ($service)) ORDER BY 1`},
}

// The cost dashboard's queries.
const (
	spendSQL = rollupRows + `SELECT ` + dollars + ` AS spend
` + fromRows + `
WHERE ` + seriesFilter

	monthToDateSQL = `SELECT ` + dollars + ` AS month_to_date
` + daily + `
WHERE r.bucket BETWEEN date_trunc('month', ` + lastDay + `::timestamp)::date AND ` + lastDay + ` AND ` + filter

	// projectionSQL adds to the month to date the spend rate of the 7 days before the range's end,
	// for the rest of the local month.
	projectionSQL = `WITH b AS (
  SELECT date_trunc('month', ` + lastDay + `::timestamp) AS month_start, $__timeTo()::timestamptz AT TIME ZONE ` + ledgerTZ + ` AS now_local
), mtd AS (
  SELECT coalesce(sum(r.cost_nanos), 0) AS nanos
  ` + daily + `
  WHERE r.bucket BETWEEN date_trunc('month', ` + lastDay + `::timestamp)::date AND ` + lastDay + ` AND ` + filter + `
), recent AS (
  SELECT coalesce(sum(r.cost_nanos), 0) AS nanos
  FROM rollup_hourly r JOIN series s ON s.project_id = r.project_id AND s.id = r.series_id
  WHERE r.bucket >= $__timeTo()::timestamptz - interval '7 days' AND r.bucket < $__timeTo()::timestamptz AND ` + filter + `
)
SELECT (mtd.nanos + recent.nanos * extract(epoch FROM b.month_start + interval '1 month' - b.now_local) / (7 * 86400)) / 1e9 AS projected_month
FROM mtd, recent, b`

	costPerCallSQL = rollupRows + `SELECT ` + perCall + ` AS cost_per_call
` + fromRows + `
WHERE ` + seriesFilter

	unpricedSQL = rollupRows + `SELECT coalesce(sum(r.unpriced_attempts), 0) AS unpriced_attempts
` + fromRows + `
WHERE ` + seriesFilter

	spendByDaySQL = `SELECT r.bucket::timestamp AT TIME ZONE ` + ledgerTZ + ` AS "time", s.model AS metric, ` + dollars + ` AS spend
` + daily + `
WHERE ` + days + ` AND ` + filter + `
GROUP BY 1, 2
ORDER BY 1, 2`

	spendByServiceSQL = rollupRows + `SELECT r.t AS "time", s.service AS metric, ` + dollars + ` AS spend
` + fromRows + `
WHERE ` + seriesFilter + `
GROUP BY 1, 2
ORDER BY 1, 2`

	costPerCallByModelSQL = rollupRows + `SELECT r.t AS "time", s.model AS metric, ` + perCall + ` AS cost_per_call
` + fromRows + `
WHERE ` + seriesFilter + `
GROUP BY 1, 2
ORDER BY 1, 2`

	spendTableSQL = rollupRows + `SELECT s.service, s.provider, s.model, sum(r.requests) AS calls, sum(r.attempts) AS attempts,
  ` + dollars + ` AS spend, ` + perCall + ` AS cost_per_call, sum(r.unpriced_attempts) AS unpriced_attempts
` + fromRows + `
WHERE ` + seriesFilter + `
GROUP BY 1, 2, 3
ORDER BY spend DESC, 1, 2, 3`

	// spendByTenantSQL reads the tenant rollup by model over the local days the range overlaps: the
	// other rollups keep no tenants. The model variable applies; the service variable cannot.
	spendByTenantSQL = `SELECT CASE WHEN r.tenant = '' THEN '(none)' ELSE r.tenant END AS tenant, sum(r.requests) AS calls,
  ` + dollars + ` AS spend, ` + perCall + ` AS cost_per_call
FROM rollup_daily_tenant_model r
WHERE ` + days + ` AND r.project_id IN ($project) AND ('__all' IN ($model) OR r.model IN ($model))
GROUP BY 1
ORDER BY spend DESC, 1
LIMIT 50`
)

func costDashboard() Dashboard {
	return Dashboard{
		UID: "ledgerd-cost", Title: "LLM cost", File: "llm-cost.json", Source: PostgresType, From: "now-30d",
		Description: "LLM spend from ledgerd's rollups: by day, model, service and tenant; month to date and projection; cost per call.",
		Variables:   rollupVariables,
		Panels: []Panel{
			{Title: "Spend", Kind: Stat, Unit: "currencyUSD", Decimals: 2, Width: 5, Height: 4,
				Description: "Cost of priced attempts in the range: whole UTC hours up to 3 days, whole local days beyond.",
				Queries:     []Query{{SQL: spendSQL, Format: FormatTable}}},
			{Title: "Month to date", Kind: Stat, Unit: "currencyUSD", Decimals: 2, Width: 5, Height: 4,
				Description: "Spend from the first of the month of the range's end to that day, in ledgerd's timezone.",
				Queries:     []Query{{SQL: monthToDateSQL, Format: FormatTable}}},
			{Title: "Projected month", Kind: Stat, Unit: "currencyUSD", Decimals: 2, Width: 5, Height: 4,
				Description: "Month to date plus the spend rate of the 7 days before the range's end for the rest of the month.",
				Queries:     []Query{{SQL: projectionSQL, Format: FormatTable}}},
			{Title: "Cost per call", Kind: Stat, Unit: "currencyUSD", Decimals: 5, Width: 5, Height: 4,
				Description: "Spend divided by logical calls (attempt_no 1): retries and fallbacks are part of a call's cost.",
				Queries:     []Query{{SQL: costPerCallSQL, Format: FormatTable}}},
			{Title: "Unpriced attempts", Kind: Stat, Unit: "short", Width: 4, Height: 4,
				Description: "Attempts on models the price catalog does not know: their cost is missing from every figure here.",
				Queries:     []Query{{SQL: unpricedSQL, Format: FormatTable}}},
			{Title: "Spend by day and model", Kind: Bars, Unit: "currencyUSD", Width: 24, Height: 9,
				Description: "Daily spend (days in ledgerd's timezone, from rollup_daily).",
				Queries:     []Query{{SQL: spendByDaySQL, Format: FormatTimeSeries}}},
			{Title: "Spend by service", Kind: TimeSeries, Unit: "currencyUSD", Width: 12, Height: 8, MinInterval: "1h",
				Description: "Spend per interval of at least an hour; per local day for ranges over 3 days.",
				Queries:     []Query{{SQL: spendByServiceSQL, Format: FormatTimeSeries}}},
			{Title: "Cost per call by model", Kind: TimeSeries, Unit: "currencyUSD", Width: 12, Height: 8, MinInterval: "1h",
				Description: "Spend per logical call, per interval.",
				Queries:     []Query{{SQL: costPerCallByModelSQL, Format: FormatTimeSeries}}},
			{Title: "Spend by service and model", Kind: Table, Width: 16, Height: 10,
				Columns: map[string]string{"spend": "currencyUSD", "cost_per_call": "currencyUSD"},
				Queries: []Query{{SQL: spendTableSQL, Format: FormatTable}}},
			{Title: "Spend by tenant", Kind: Table, Width: 8, Height: 10,
				Description: "The 50 tenants that spent most on the days the range overlaps (days in ledgerd's timezone), on the chosen models; the service choice does not apply (tenants are kept by model only).",
				Columns:     map[string]string{"spend": "currencyUSD", "cost_per_call": "currencyUSD"},
				Queries:     []Query{{SQL: spendByTenantSQL, Format: FormatTable}}},
		},
	}
}
