package grafana_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/grafana"
	"github.com/ledgerd/ledgerd/internal/dbtest"
)

// fillRollupsSQL writes a realistic ledger's rollups directly: 200 series (20 services x 10
// models) with traffic every hour for 90 days, an ok row per series and hour and an error row in
// one hour of four; the daily rollup holds the same sums per day.
const fillRollupsSQL = `
INSERT INTO projects (name) VALUES ('bench');
INSERT INTO settings (key, value) VALUES ('timezone', 'UTC') ON CONFLICT (key) DO NOTHING;
INSERT INTO series (project_id, tenant, service, operation, provider, model, fallback_from)
SELECT 1, 't' || (s % 7), 'svc-' || (s % 20), 'default', 'anthropic', 'model-' || (s / 20), ''
FROM generate_series(0, 199) s;
INSERT INTO rollup_hourly
SELECT 1, h, s.id, false, st.status, st.class, 10, 8, 10000, 2000, 0, 0, 5000, 0, 0, 5, 123456789, 150000000, 0, 0, 0, 9000,
  '[150:152]={3,5,2}'::int8[]
FROM generate_series(timestamptz '2026-07-01', timestamptz '2026-09-28 23:00', interval '1 hour') h
CROSS JOIN series s
CROSS JOIN (VALUES ('ok'::attempt_status, 'none'::error_class), ('error', 'rate_limited')) st(status, class)
WHERE st.status = 'ok' OR extract(hour FROM h)::int % 4 = 0;
INSERT INTO rollup_daily
SELECT project_id, bucket::date, series_id, fallback, status, error_class, sum(attempts), sum(requests), sum(input_tokens),
  sum(output_tokens), sum(cache_write_tokens), sum(cache_write_1h_tokens), sum(cache_read_tokens), sum(reasoning_tokens),
  sum(cache_write_calls), sum(cache_read_calls), sum(cost_nanos), sum(nocache_cost_nanos), sum(unpriced_attempts),
  sum(client_cost_nanos), sum(cost_mismatch_attempts), sum(latency_sum_ms), hist_sum(latency_hist)
FROM rollup_hourly GROUP BY 1, 2, 3, 4, 5, 6;
ANALYZE;`

// spendByDayFromHourlySQL is the "Spend by day and model" panel computed from rollup_hourly
// (UTC days) instead of rollup_daily, for comparison.
const spendByDayFromHourlySQL = `SELECT date_trunc('day', r.bucket) AS "time", s.model AS metric, coalesce(sum(r.cost_nanos), 0)::numeric / 1e9 AS spend
FROM rollup_hourly r JOIN series s ON s.project_id = r.project_id AND s.id = r.series_id
WHERE $__timeFilter(r.bucket) AND r.project_id IN ($project)
  AND ('__all' IN ($service) OR s.service IN ($service))
  AND ('__all' IN ($model) OR s.model IN ($model))
GROUP BY 1, 2
ORDER BY 1, 2`

// BenchmarkRollupChoice compares panel queries as shipped (rollup_daily past 3 days) with the
// same queries forced onto rollup_hourly, over 1, 7, 30 and 90 days of a realistic ledger
// (540,000 hourly rows). Compare ns/op within one run:
// go test -run '^$' -bench RollupChoice -benchtime 10x ./grafana/
func BenchmarkRollupChoice(b *testing.B) {
	pool := dbtest.New(b)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, fillRollupsSQL); err != nil {
		b.Fatal(err)
	}
	panel := func(title string) string {
		for _, d := range grafana.Dashboards() {
			for _, p := range d.Panels {
				if p.Title == title {
					return p.Queries[0].SQL
				}
			}
		}
		b.Fatalf("no panel %q", title)
		return ""
	}
	// hourlyOnly makes the range test of rollupRows always choose rollup_hourly.
	hourlyOnly := func(sql string) string { return strings.ReplaceAll(sql, "interval '3 days'", "interval '100 years'") }
	queries := []struct{ name, shipped, hourly string }{
		{"spend-stat", panel("Spend"), hourlyOnly(panel("Spend"))},
		{"spend-by-service", panel("Spend by service"), hourlyOnly(panel("Spend by service"))},
		{"service-model-table", panel("Spend by service and model"), hourlyOnly(panel("Spend by service and model"))},
		{"latency-percentiles", panel("Latency percentiles"), hourlyOnly(panel("Latency percentiles"))},
		{"spend-by-day", panel("Spend by day and model"), spendByDayFromHourlySQL},
	}
	end := time.Date(2026, 9, 29, 0, 0, 0, 0, time.UTC)
	for _, days := range []int{1, 7, 30, 90} {
		// Grafana's interval for about 1,000 points, at least an hour (the panels' minimum).
		interval := "1h"
		if days >= 60 {
			interval = "3h"
		}
		e := grafanaEnv{from: end.AddDate(0, 0, -days), to: end, interval: interval, vars: map[string]varValue{
			"project": {values: []string{"1"}},
			"service": {all: true, allValue: "'__all'"},
			"model":   {all: true, allValue: "'__all'"},
		}}
		for _, q := range queries {
			for _, v := range []struct{ name, sql string }{{"shipped", q.shipped}, {"hourly", q.hourly}} {
				sql, err := e.expand(v.sql)
				if err != nil {
					b.Fatal(err)
				}
				b.Run(q.name+"/"+v.name+"/"+strconv.Itoa(days)+"d", func(b *testing.B) {
					for b.Loop() {
						rows, err := pool.Query(ctx, sql)
						if err != nil {
							b.Fatal(err)
						}
						for rows.Next() {
						}
						if err := rows.Err(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
