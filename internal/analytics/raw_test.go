package analytics_test

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The same questions answered by GROUP BY over the raw attempts, the way one would without
// rollups: the reference the rollup answers are checked against, and the baseline the benchmark
// measures them against.

// rawGroup is what the raw table says about one group.
type rawGroup struct {
	attempts, requests, ok, errors, unpriced int64
	cost, wasted, nocache                    int64
	input, cacheRead                         int64
	p50, p95, p99                            *float64 // nearest rank (percentile_disc) of succeeded attempts
}

// rawSummarySQL groups a project's attempts of [$2, $3) by %[1]s (a key expression over attempts
// a and series s; $4 is the timezone).
const rawSummarySQL = `SELECT %[1]s AS key, count(*), count(*) FILTER (WHERE a.attempt_no = 1),
		count(*) FILTER (WHERE a.status = 'ok'), count(*) FILTER (WHERE a.status = 'error'),
		count(*) FILTER (WHERE a.cost_nanos IS NULL), coalesce(sum(a.cost_nanos), 0)::int8,
		coalesce(sum(a.cost_nanos) FILTER (WHERE a.status <> 'ok'), 0)::int8,
		coalesce(sum(a.nocache_cost_nanos), 0)::int8, sum(a.input_tokens)::int8, sum(a.cache_read_tokens)::int8,
		percentile_disc(0.5) WITHIN GROUP (ORDER BY a.latency_ms) FILTER (WHERE a.status = 'ok'),
		percentile_disc(0.95) WITHIN GROUP (ORDER BY a.latency_ms) FILTER (WHERE a.status = 'ok'),
		percentile_disc(0.99) WITHIN GROUP (ORDER BY a.latency_ms) FILTER (WHERE a.status = 'ok')
	FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id
	WHERE a.project_id = $1 AND a.started_at >= $2 AND a.started_at < $3 AND $4::text IS NOT NULL
		AND ($5 = '' OR s.service = $5) AND ($6 = '' OR s.tenant = $6)
	GROUP BY 1`

// rawKeys are the raw key expressions of the groupings the tests compare, rendered as the rollup
// keys are rendered by groupKey.
var rawKeys = map[string]string{
	"":            `''`,
	"model":       `s.model || '|' || a.fallback || '|' || s.fallback_from`,
	"day":         `((a.started_at AT TIME ZONE $4)::date)::text`,
	"day,model":   `((a.started_at AT TIME ZONE $4)::date)::text || '|' || s.model || '|' || a.fallback || '|' || s.fallback_from`,
	"service":     `s.service`,
	"day,service": `((a.started_at AT TIME ZONE $4)::date)::text || '|' || s.service`,
	"day,tenant":  `((a.started_at AT TIME ZONE $4)::date)::text || '|' || s.tenant`,
	"tenant":      `s.tenant`,
	"minute":      `date_trunc('minute', a.started_at)::text`,
	"minute5":     `date_bin('5 minutes', a.started_at, TIMESTAMPTZ '2000-01-01 00:00:00+00')::text`,
}

func rawSummary(ctx context.Context, pool *pgxpool.Pool, project int64, from, to time.Time, tz *time.Location, groupBy string) (map[string]rawGroup, error) {
	return rawServiceSummary(ctx, pool, project, from, to, tz, groupBy, "")
}

// rawServiceSummary is rawSummary of one service's attempts (all when service is empty).
func rawServiceSummary(ctx context.Context, pool *pgxpool.Pool, project int64, from, to time.Time, tz *time.Location, groupBy, service string) (map[string]rawGroup, error) {
	return rawFilteredSummary(ctx, pool, project, from, to, tz, groupBy, service, "")
}

// rawFilteredSummary is rawSummary of one service's and one tenant's attempts (all when empty).
func rawFilteredSummary(ctx context.Context, pool *pgxpool.Pool, project int64, from, to time.Time, tz *time.Location, groupBy, service, tenant string) (map[string]rawGroup, error) {
	rows, err := pool.Query(ctx, fmt.Sprintf(rawSummarySQL, rawKeys[groupBy]), project, from, to, tz.String(), service, tenant)
	if err != nil {
		return nil, err
	}
	out := map[string]rawGroup{}
	var (
		k    string
		g    rawGroup
		p    [3]*int32
		ptrs = []any{&k, &g.attempts, &g.requests, &g.ok, &g.errors, &g.unpriced, &g.cost, &g.wasted,
			&g.nocache, &g.input, &g.cacheRead, &p[0], &p[1], &p[2]}
	)
	_, err = pgx.ForEachRow(rows, ptrs, func() error {
		for i, v := range p {
			var f *float64
			if v != nil {
				x := float64(*v)
				f = &x
			}
			*[]**float64{&g.p50, &g.p95, &g.p99}[i] = f
		}
		out[k] = g
		return nil
	})
	return out, err
}

// rawDailyCostSQL is the cost per local day of a month, and the first day with any attempt: what
// a projection needs.
const (
	rawDailyCostSQL = `SELECT (started_at AT TIME ZONE $4)::date, coalesce(sum(cost_nanos), 0)::int8
		FROM attempts WHERE project_id = $1 AND started_at >= $2 AND started_at < $3 GROUP BY 1`
	rawFirstDaySQL = `SELECT min((started_at AT TIME ZONE $2)::date) FROM attempts WHERE project_id = $1`
)

func rawProjection(ctx context.Context, pool *pgxpool.Pool, project int64, from, to time.Time, tz *time.Location) (map[time.Time]int64, *time.Time, error) {
	rows, err := pool.Query(ctx, rawDailyCostSQL, project, from, to, tz.String())
	if err != nil {
		return nil, nil, err
	}
	out := map[time.Time]int64{}
	var (
		d    time.Time
		cost int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&d, &cost}, func() error { out[d] = cost; return nil }); err != nil {
		return nil, nil, err
	}
	var first *time.Time
	if err := pool.QueryRow(ctx, rawFirstDaySQL, project, tz.String()).Scan(&first); err != nil {
		return nil, nil, err
	}
	return out, first, nil
}

// rawCacheSQL is the cache use per model and per prompt hash over [$2, $3). A hash used by one
// call in its UTC month (counted over the whole month, not the range) is not listed on its own:
// its call counts on the model's row only, as single-use.
const rawCacheSQL = `WITH p AS (
		SELECT date_trunc('month', started_at, 'UTC') AS month, prompt_hash, count(*) AS n
		FROM attempts
		WHERE project_id = $1 AND prompt_hash IS NOT NULL AND started_at >= date_trunc('month', $2::timestamptz, 'UTC')
			AND started_at < date_trunc('month', $3::timestamptz, 'UTC') + interval '1 month'
		GROUP BY 1, 2
	)
	SELECT s.service, s.operation, s.provider, s.model, a.fallback, CASE WHEN p.n >= 2 THEN a.prompt_hash END AS hash,
		GROUPING(CASE WHEN p.n >= 2 THEN a.prompt_hash END) = 1, count(*), count(*) FILTER (WHERE a.cache_write_tokens > 0),
		count(*) FILTER (WHERE a.cache_read_tokens > 0), sum(a.cache_write_tokens)::int8, sum(a.cache_read_tokens)::int8,
		coalesce(sum(a.cost_nanos), 0)::int8, coalesce(sum(a.nocache_cost_nanos), 0)::int8,
		count(DISTINCT a.prompt_hash), count(*) FILTER (WHERE p.n = 1)
	FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id
		LEFT JOIN p ON p.month = date_trunc('month', a.started_at, 'UTC') AND p.prompt_hash = a.prompt_hash
	WHERE a.project_id = $1 AND a.started_at >= $2 AND a.started_at < $3
	GROUP BY GROUPING SETS ((1, 2, 3, 4, 5), (1, 2, 3, 4, 5, 6))`

// rawCacheRow is one row of rawCacheSQL, keyed like the rollup's cache rows. hashes and singleUse
// are the model rows' distinct and single-use prompt hashes.
type rawCacheRow struct {
	calls, writeCalls, readCalls, written, read, cost, nocache int64
	hashes, singleUse                                          int64
}

func rawCache(ctx context.Context, pool *pgxpool.Pool, project int64, from, to time.Time) (map[string]rawCacheRow, error) {
	rows, err := pool.Query(ctx, rawCacheSQL, project, from, to)
	if err != nil {
		return nil, err
	}
	out := map[string]rawCacheRow{}
	var (
		svc, op, prov, model string
		fallback, modelRow   bool
		hash                 *string
		r                    rawCacheRow
	)
	_, err = pgx.ForEachRow(rows, []any{&svc, &op, &prov, &model, &fallback, &hash, &modelRow, &r.calls, &r.writeCalls,
		&r.readCalls, &r.written, &r.read, &r.cost, &r.nocache, &r.hashes, &r.singleUse}, func() error {
		if hash == nil && !modelRow {
			return nil // attempts naming no hash, or a single-use one, below their model
		}
		h := "*"
		if hash != nil {
			h = *hash
			r.hashes, r.singleUse = 1, 0
		}
		out[cacheKey(svc, op, prov, model, fallback, h)] = r
		return nil
	})
	return out, err
}

func cacheKey(svc, op, prov, model string, fallback bool, hash string) string {
	return fmt.Sprintf("%s|%s|%s|%s|%v|%s", svc, op, prov, model, fallback, hash)
}

// The raw statements of the incidents question over [$2, $3): the minutes of each model (calls,
// failures, answers, fallbacks, cost), each hour's spend from $4 (the week before, for the usual
// spend), and each model's cache use per hour from $4.
const (
	rawIncidentMinutesSQL = `SELECT date_trunc('minute', a.started_at, 'UTC'), s.provider, s.model, a.fallback, s.fallback_from,
			count(*), count(*) FILTER (WHERE a.attempt_no = 1), count(*) FILTER (WHERE a.status = 'error'),
			count(*) FILTER (WHERE a.status = 'ok'), coalesce(sum(a.cost_nanos), 0)::int8,
			coalesce(sum(a.cost_nanos) FILTER (WHERE a.status <> 'ok'), 0)::int8
		FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id
		WHERE a.project_id = $1 AND a.started_at >= $2 AND a.started_at < $3 AND $4::timestamptz IS NOT NULL
		GROUP BY 1, 2, 3, 4, 5`
	rawHourlySpendSQL = `SELECT date_trunc('hour', started_at, 'UTC'), coalesce(sum(cost_nanos), 0)::int8,
			count(*) FILTER (WHERE attempt_no = 1)
		FROM attempts WHERE project_id = $1 AND started_at >= $4 AND started_at < $3 AND $2::timestamptz IS NOT NULL GROUP BY 1`
	rawCacheHoursSQL = `SELECT s.service, s.operation, s.provider, s.model, a.fallback, date_trunc('hour', a.started_at, 'UTC'),
			count(*), count(*) FILTER (WHERE a.cache_write_tokens > 0), count(*) FILTER (WHERE a.cache_read_tokens > 0),
			coalesce(sum(a.cost_nanos), 0)::int8, coalesce(sum(a.nocache_cost_nanos), 0)::int8
		FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id
		WHERE a.project_id = $1 AND a.started_at >= $4 AND a.started_at < $3 AND $2::timestamptz IS NOT NULL
			AND (a.cache_write_tokens > 0 OR a.cache_read_tokens > 0 OR a.prompt_hash IS NOT NULL)
		GROUP BY 1, 2, 3, 4, 5, 6`
)

// rawIncidents reads what incidents are detected from, from the raw attempts only: the question
// of GET /v1/incidents over [from, to) without rollups. It returns the rows read.
func rawIncidents(ctx context.Context, pool *pgxpool.Pool, project int64, from, to time.Time) (int, error) {
	n := 0
	for _, q := range []string{rawIncidentMinutesSQL, rawHourlySpendSQL, rawCacheHoursSQL} {
		rows, err := pool.Query(ctx, q, project, from, to, from.AddDate(0, 0, -7))
		if err != nil {
			return 0, err
		}
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil {
			return 0, err
		}
	}
	return n, nil
}
