package ingest

import (
	"fmt"
	"strings"
)

// Sum is one summed rollup column and the aggregate over attempts rows that feeds it.
type Sum struct{ Col, Expr string }

// RollupSums lists each summed column of rollup_hourly and rollup_daily with the expression over
// attempts that feeds it. The writer and analytics' rebuild both build their statements from it,
// so the two can never count differently.
var RollupSums = []Sum{
	{"attempts", "count(*)"},
	{"requests", "count(*) FILTER (WHERE attempt_no = 1)"},
	{"input_tokens", "sum(input_tokens)"},
	{"output_tokens", "sum(output_tokens)"},
	{"cache_write_tokens", "sum(cache_write_tokens)"},
	{"cache_write_1h_tokens", "sum(cache_write_1h_tokens)"},
	{"cache_read_tokens", "sum(cache_read_tokens)"},
	{"reasoning_tokens", "sum(reasoning_tokens)"},
	{"cache_write_calls", "count(*) FILTER (WHERE cache_write_tokens > 0)"},
	{"cache_read_calls", "count(*) FILTER (WHERE cache_read_tokens > 0)"},
	{"cost_nanos", "coalesce(sum(cost_nanos), 0)"},
	{"nocache_cost_nanos", "coalesce(sum(nocache_cost_nanos), 0)"},
	{"unpriced_attempts", "count(*) FILTER (WHERE cost_nanos IS NULL)"},
	{"client_cost_nanos", "coalesce(sum(client_cost_nanos), 0)"},
	// A client's own cost differs from ledgerd's by more than 1% of ledgerd's.
	{"cost_mismatch_attempts", "count(*) FILTER (WHERE client_cost_nanos IS NOT NULL AND cost_nanos IS NOT NULL AND abs(client_cost_nanos - cost_nanos) * 100 > cost_nanos)"},
	{"latency_sum_ms", "sum(latency_ms)"},
}

// CacheSums does the same for rollup_cache_hourly.
var CacheSums = []Sum{
	{"calls", "count(*)"},
	{"cache_write_calls", "count(*) FILTER (WHERE cache_write_tokens > 0)"},
	{"cache_read_calls", "count(*) FILTER (WHERE cache_read_tokens > 0)"},
	{"input_tokens", "sum(input_tokens)"},
	{"cache_write_tokens", "sum(cache_write_tokens)"},
	{"cache_read_tokens", "sum(cache_read_tokens)"},
	{"cost_nanos", "coalesce(sum(cost_nanos), 0)"},
	{"nocache_cost_nanos", "coalesce(sum(nocache_cost_nanos), 0)"},
	{"unpriced_attempts", "count(*) FILTER (WHERE cost_nanos IS NULL)"},
}

// Expressions over attempts shared by the writer and analytics' rebuild: the latency histogram of a
// group, which attempts rollup_cache_hourly counts, and the prompt_hash it keys them by.
const (
	LatencyHistExpr = "hist_agg(latency_bucket(latency_ms))"
	CacheWhere      = "cache_write_tokens > 0 OR cache_read_tokens > 0 OR prompt_hash IS NOT NULL"
	CacheHashExpr   = "coalesce(prompt_hash, '')"
	// HourBucketExpr is the UTC hour of an attempt, whatever the session's TimeZone.
	HourBucketExpr = "date_trunc('hour', started_at, 'UTC')"
)

// attemptCols are the attempts columns the writer fills, in the order of the unnest arrays.
var attemptCols = []struct{ col, typ string }{
	{"project_id", "int8"}, {"started_at", "timestamptz"}, {"series_id", "int8"},
	{"attempt_no", "int4"}, {"latency_ms", "int4"}, {"status", "attempt_status"},
	{"error_class", "error_class"}, {"fallback", "bool"}, {"batch", "bool"},
	{"http_status", "int2"}, {"retry_after_ms", "int4"}, {"price_id", "int4"},
	{"input_tokens", "int8"}, {"output_tokens", "int8"}, {"cache_write_tokens", "int8"},
	{"cache_write_1h_tokens", "int8"}, {"cache_read_tokens", "int8"}, {"reasoning_tokens", "int8"},
	{"cost_nanos", "int8"}, {"nocache_cost_nanos", "int8"}, {"client_cost_nanos", "int8"},
	{"attempt_id", "text"}, {"request_id", "text"}, {"prompt_hash", "text"},
	{"provider_request_id", "text"}, {"metadata", "jsonb"},
}

// copyCols are the attemptCols names, the column list of the fast path's COPY.
var copyCols = func() []string {
	var cols []string
	for _, c := range attemptCols {
		cols = append(cols, c.col)
	}
	return cols
}()

// uniqueViolation is the SQLSTATE a COPY fails with when a record is already stored.
const uniqueViolation = "23505"

// insertSQL inserts a batch of attempts from arrays, skipping records already stored, and folds
// exactly the inserted rows into the rollups in the same statement. $N+1 is the timezone of daily
// rollups. It returns the identity of each inserted row. It is built once, at start-up.
var insertSQL = buildInsertSQL()

func buildInsertSQL() string {
	var cols, params, names []string
	for i, c := range attemptCols {
		cols = append(cols, c.col)
		params = append(params, fmt.Sprintf("$%d::%s[]", i+1, c.typ))
		names = append(names, c.col)
	}
	tz := fmt.Sprintf("$%d", len(attemptCols)+1)
	upsert := func(table, bucket string) string {
		var set, sel, ins []string
		for _, s := range RollupSums {
			ins = append(ins, s.Col)
			sel = append(sel, s.Expr)
			set = append(set, fmt.Sprintf("%s = r.%s + excluded.%s", s.Col, s.Col, s.Col))
		}
		return fmt.Sprintf(`INSERT INTO %s AS r (project_id, bucket, series_id, fallback, status, error_class, %s, latency_hist)
		SELECT project_id, %s, series_id, fallback, status, error_class, %s, %s
		FROM ins GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
		ON CONFLICT (project_id, bucket, series_id, fallback, status, error_class) DO UPDATE SET %s,
			latency_hist = hist_merge(r.latency_hist, excluded.latency_hist)`,
			table, strings.Join(ins, ", "), bucket, strings.Join(sel, ", "), LatencyHistExpr, strings.Join(set, ", "))
	}
	var cset, csel, cins []string
	for _, s := range CacheSums {
		cins = append(cins, s.Col)
		csel = append(csel, s.Expr)
		cset = append(cset, fmt.Sprintf("%s = r.%s + excluded.%s", s.Col, s.Col, s.Col))
	}
	cache := fmt.Sprintf(`INSERT INTO rollup_cache_hourly AS r (project_id, bucket, series_id, fallback, prompt_hash, %s)
		SELECT project_id, %s, series_id, fallback, %s, %s
		FROM ins WHERE %s
		GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2, 3, 4, 5
		ON CONFLICT (project_id, bucket, series_id, fallback, prompt_hash) DO UPDATE SET %s`,
		strings.Join(cins, ", "), HourBucketExpr, CacheHashExpr, strings.Join(csel, ", "), CacheWhere, strings.Join(cset, ", "))
	return fmt.Sprintf(`WITH ins AS (
		INSERT INTO attempts (%s)
		SELECT * FROM unnest(%s) AS t(%s)
		ON CONFLICT (project_id, attempt_id, started_at) DO NOTHING
		RETURNING *
	), hourly AS (%s
	), daily AS (%s
	), cache AS (%s
	)
	SELECT project_id, attempt_id, started_at FROM ins`,
		strings.Join(cols, ", "), strings.Join(params, ", "), strings.Join(names, ", "),
		upsert("rollup_hourly", HourBucketExpr),
		upsert("rollup_daily", "(started_at AT TIME ZONE "+tz+")::date"),
		cache)
}

// Key columns of the rollups, in primary-key order, with the array type each is sent as.
var (
	rollupKeyCols = []struct{ col, typ string }{
		{"project_id", "int8"}, {"bucket", "timestamptz"}, {"series_id", "int8"}, {"fallback", "bool"},
		{"status", "attempt_status"}, {"error_class", "error_class"}}
	dailyKeyCols = []struct{ col, typ string }{
		{"project_id", "int8"}, {"bucket", "date"}, {"series_id", "int8"}, {"fallback", "bool"},
		{"status", "attempt_status"}, {"error_class", "error_class"}}
	cacheKeyCols = []struct{ col, typ string }{
		{"project_id", "int8"}, {"bucket", "timestamptz"}, {"series_id", "int8"}, {"fallback", "bool"},
		{"prompt_hash", "text"}}
)

// The fast path's rollup upserts: groups summed in Go (see sums.go), sent as arrays (keys, then
// one int8 array per sum column, then the latency histograms as text) and added to the stored
// rows. Rows are written in key order, as the slow path writes them, so concurrent flushes lock
// rollup rows in the same order. Built once, at start-up.
var (
	hourlyUpsertSQL = buildUpsertSQL("rollup_hourly", rollupKeyCols, RollupSums, true)
	dailyUpsertSQL  = buildUpsertSQL("rollup_daily", dailyKeyCols, RollupSums, true)
	cacheUpsertSQL  = buildUpsertSQL("rollup_cache_hourly", cacheKeyCols, CacheSums, false)
)

func buildUpsertSQL(table string, key []struct{ col, typ string }, sums []Sum, hist bool) string {
	var cols, params, sel, order, keys, set []string
	for i, k := range key {
		cols = append(cols, k.col)
		params = append(params, fmt.Sprintf("$%d::%s[]", len(params)+1, k.typ))
		sel = append(sel, k.col)
		order = append(order, fmt.Sprint(i+1))
		keys = append(keys, k.col)
	}
	for _, s := range sums {
		cols = append(cols, s.Col)
		params = append(params, fmt.Sprintf("$%d::int8[]", len(params)+1))
		sel = append(sel, s.Col)
		set = append(set, fmt.Sprintf("%s = r.%s + excluded.%s", s.Col, s.Col, s.Col))
	}
	if hist {
		cols = append(cols, "latency_hist")
		params = append(params, fmt.Sprintf("$%d::text[]", len(params)+1))
		sel = append(sel, "latency_hist::int8[]")
		set = append(set, "latency_hist = hist_merge(r.latency_hist, excluded.latency_hist)")
	}
	return fmt.Sprintf(`INSERT INTO %s AS r (%s)
		SELECT %s FROM unnest(%s) AS t(%s) ORDER BY %s
		ON CONFLICT (%s) DO UPDATE SET %s`,
		table, strings.Join(cols, ", "), strings.Join(sel, ", "), strings.Join(params, ", "),
		strings.Join(cols, ", "), strings.Join(order, ", "), strings.Join(keys, ", "), strings.Join(set, ", "))
}
