package ingest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ledgerd/ledgerd/internal/rollup"
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

// column is a column a statement sends as an array, with its array element type.
type column struct{ col, typ string }

// Narrow is a daily rollup summed over every series column but Keep: keyed by project, local day
// (bucket), the kept series columns, fallback, status and error class, with rollup_daily's sums and
// histogram. A question that needs no other series column reads it instead of rollup_daily, which
// has about ten times the rows.
type Narrow struct {
	Table string
	Keep  []string // series columns, in key order
}

// DailyBy are the narrow daily rollups, kept in the same statements or transactions as
// rollup_daily by the fold, reprice and rebuild.
var DailyBy = []Narrow{
	{"rollup_daily_model", []string{"provider", "model", "fallback_from"}},
	{"rollup_daily_service", []string{"service", "operation"}},
	{"rollup_daily_tenant", []string{"tenant"}},
}

// Key is the rollup's primary key, in order: the columns rebuild groups by, reprice adds its
// deltas on and a fold sums pending_rollup_hourly's rows by.
func (n Narrow) Key() []string {
	return append(append([]string{"project_id", "bucket"}, n.Keep...), "fallback", "status", "error_class")
}

func prefixed(prefix string, cols []string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = prefix + c
	}
	return out
}

// attemptCols are the attempts columns the writer fills, in the order of the unnest arrays.
var attemptCols = slices.Concat([]column{
	{"project_id", "int8"}, {"started_at", "timestamptz"}, {"series_id", "int8"},
	{"attempt_no", "int4"}, {"latency_ms", "int4"}, {"status", "attempt_status"},
	{"error_class", "error_class"}, {"fallback", "bool"}, {"batch", "bool"},
	{"http_status", "int2"}, {"retry_after_ms", "int4"}, {"price_id", "int4"},
	{"input_tokens", "int8"}, {"output_tokens", "int8"}, {"cache_write_tokens", "int8"},
	{"cache_write_1h_tokens", "int8"}, {"cache_read_tokens", "int8"}, {"reasoning_tokens", "int8"},
	{"cost_nanos", "int8"}, {"nocache_cost_nanos", "int8"}, {"client_cost_nanos", "int8"},
	{"attempt_id", "text"}, {"request_id", "text"}, {"prompt_hash", "text"},
	{"provider_request_id", "text"}, {"metadata", "jsonb"},
}, limitCols)

// SQLSTATEs the writer tells apart: a COPY fails with uniqueViolation when a record is already
// stored; a fold fails with lockNotAvailable when another fold holds the lock past lock_timeout.
const (
	uniqueViolation  = "23505"
	lockNotAvailable = "55P03"
)

// insertSQL inserts a batch of attempts from arrays, skipping records already stored, and adds
// exactly the inserted rows' rollup deltas to the pending tables in the same statement. $N+1 is the
// timezone of daily rollups. It returns the identity of each inserted row. It is built once, at
// start-up.
var insertSQL = buildInsertSQL()

func buildInsertSQL() string {
	cols := colList(attemptCols)
	var params []string
	for i, c := range attemptCols {
		params = append(params, fmt.Sprintf("$%d::%s[]", i+1, c.typ))
	}
	// The pending rows are keyed as pendingKey: the UTC hour, and the local day in timezone $N+1.
	keySel := []string{"project_id", HourBucketExpr, "series_id", "fallback", "status", "error_class",
		fmt.Sprintf("(started_at AT TIME ZONE $%d)::date", len(attemptCols)+1)}
	return fmt.Sprintf(`WITH ins AS (
		INSERT INTO attempts (%[1]s)
		SELECT * FROM unnest(%[2]s) AS t(%[1]s)
		ON CONFLICT (project_id, attempt_id, started_at) DO NOTHING
		RETURNING *
	), p0 AS (
		INSERT INTO pending_rollup_hourly (%[3]s, latency_hist)
		SELECT %[4]s, %[5]s, %[6]s FROM ins GROUP BY %[7]s
	), p1 AS (
		INSERT INTO pending_cache (%[8]s)
		SELECT project_id, %[9]s, series_id, fallback, %[10]s, %[11]s FROM ins WHERE %[12]s GROUP BY %[13]s
	), %[14]s
	SELECT project_id, attempt_id, started_at FROM ins`,
		strings.Join(cols, ", "), strings.Join(params, ", "),
		strings.Join(slices.Concat(pendingKey, sumCols(RollupSums)), ", "), strings.Join(keySel, ", "),
		strings.Join(sumExprs(RollupSums), ", "), LatencyHistExpr, strings.Join(ordinals(len(pendingKey)), ", "),
		strings.Join(slices.Concat(CacheKey, sumCols(CacheSums)), ", "), HourBucketExpr, CacheHashExpr,
		strings.Join(sumExprs(CacheSums), ", "), CacheWhere, strings.Join(ordinals(len(CacheKey)), ", "),
		rollup.LoadPendingFrom("ins", fmt.Sprintf("$%d", len(attemptCols)+1)))
}

// sumExprs are the SQL aggregates over attempts of sums, in order.
func sumExprs(sums []Sum) []string {
	out := make([]string, len(sums))
	for i, s := range sums {
		out[i] = s.Expr
	}
	return out
}

// ordinals are the select-list positions 1 to n, as a GROUP BY or ORDER BY names them.
func ordinals(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(i + 1)
	}
	return out
}

// RollupKey is the primary key of rollup_hourly and rollup_daily (bucket: the UTC hour, the local
// date), CacheKey that of rollup_cache_hourly: the writer's pending rows and folds, and reprice's
// deltas, are keyed by them.
var (
	RollupKey = []string{"project_id", "bucket", "series_id", "fallback", "status", "error_class"}
	CacheKey  = []string{"project_id", "bucket", "series_id", "fallback", "prompt_hash"}
)

// pendingKey is the key of pending_rollup_hourly's rows: rollup_hourly's and the local day. The
// pending rows are COPYed keyed as pendingKey and pending_cache's as CacheKey (groups.appendCopy).
var pendingKey = slices.Concat(RollupKey, []string{"day"})

// cacheFoldCTEs are the WITH items that count new attempts into cache_prefixes and lay out their
// rollup_cache_hourly rows (see migration 00005): src yields the new attempts' cache groups, as
// (project_id, bucket, series_id, fallback, prompt_hash, the CacheSums columns), empty when none. A
// group goes to its hash's row when the hash now has two or more calls in its UTC month, else to
// the empty-hash row as single-use; when the hash had exactly one call before, that call (its
// series, hour and sums kept in cache_prefixes) moves from the empty-hash row to the hash's row.
// The upsert locks the cache_prefixes rows, so concurrent commits of the same hash count one after
// the other.
func cacheFoldCTEs(src string) string {
	if CacheSums[0].Col != "calls" {
		panic("ingest: CacheSums must begin with calls")
	}
	var rest, hsum, first, ret, neg, pos, cs []string
	for _, s := range CacheSums[1:] {
		rest = append(rest, s.Col)
		hsum = append(hsum, fmt.Sprintf("sum(%s)::int8 AS %s", s.Col, s.Col))
		first = append(first, fmt.Sprintf("CASE WHEN calls = 1 THEN %s END", s.Col))
		ret = append(ret, "p."+s.Col)
		neg = append(neg, "-d."+s.Col)
		pos = append(pos, "d."+s.Col)
		cs = append(cs, "c."+s.Col)
	}
	return fmt.Sprintf(`c AS (%[1]s
	), h AS (
		SELECT project_id, %[2]s AS month, prompt_hash, sum(calls)::int8 AS calls,
			min(series_id) AS series_id, bool_or(fallback) AS fallback, min(bucket) AS bucket, %[3]s
		FROM c WHERE prompt_hash <> '' GROUP BY 1, 2, 3
	), d AS (
		INSERT INTO cache_prefixes AS p (project_id, month, prompt_hash, calls, series_id, fallback, bucket, %[4]s)
		SELECT project_id, month, prompt_hash, calls, CASE WHEN calls = 1 THEN series_id END,
			CASE WHEN calls = 1 THEN fallback END, CASE WHEN calls = 1 THEN bucket END, %[5]s
		FROM h ORDER BY 1, 2, 3
		ON CONFLICT (project_id, month, prompt_hash) DO UPDATE SET calls = p.calls + excluded.calls
		RETURNING p.project_id, p.month, p.prompt_hash, p.calls, p.series_id, p.fallback, p.bucket, %[6]s
	), moved AS (
		SELECT d.* FROM d JOIN h USING (project_id, month, prompt_hash) WHERE d.calls - h.calls = 1
	), m AS (
		SELECT c.project_id, c.bucket, c.series_id, c.fallback,
			CASE WHEN d.calls >= 2 THEN c.prompt_hash ELSE '' END AS prompt_hash, c.calls, %[7]s,
			CASE WHEN d.calls = 1 THEN 1 ELSE 0 END AS single_use
		FROM c LEFT JOIN d ON d.project_id = c.project_id AND d.month = %[8]s AND d.prompt_hash = c.prompt_hash
		UNION ALL
		SELECT d.project_id, d.bucket, d.series_id, d.fallback, '', -1, %[9]s, -1 FROM moved d
		UNION ALL
		SELECT d.project_id, d.bucket, d.series_id, d.fallback, d.prompt_hash, 1, %[10]s, 0 FROM moved d
	)`, src, MonthOf("bucket"), strings.Join(hsum, ", "), strings.Join(rest, ", "), strings.Join(first, ", "),
		strings.Join(ret, ", "), strings.Join(cs, ", "), MonthOf("c.bucket"), strings.Join(neg, ", "), strings.Join(pos, ", "))
}

// MonthOf is the SQL for the UTC month (its first instant) of the timestamptz expression t: the
// month cache_prefixes counts a hash's calls in.
func MonthOf(t string) string { return "date_trunc('month', " + t + ", 'UTC')" }

// cacheFoldUpsert adds the rows laid out by cacheFoldCTEs (named m) to rollup_cache_hourly, in key
// order.
var cacheFoldUpsert = func() string {
	var sums, set []string
	cols := append(sumCols(CacheSums), "single_use")
	for _, c := range cols {
		sums = append(sums, fmt.Sprintf("sum(%s)::int8", c))
		set = append(set, fmt.Sprintf("%s = r.%s + excluded.%s", c, c, c))
	}
	key, group := strings.Join(CacheKey, ", "), strings.Join(ordinals(len(CacheKey)), ", ")
	return fmt.Sprintf(`INSERT INTO rollup_cache_hourly AS r (%[1]s, %[2]s)
		SELECT %[1]s, %[3]s FROM m
		GROUP BY %[4]s ORDER BY %[4]s
		ON CONFLICT (%[1]s) DO UPDATE SET %[5]s`,
		key, strings.Join(cols, ", "), strings.Join(sums, ", "), group, strings.Join(set, ", "))
}()
