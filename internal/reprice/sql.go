package reprice

import (
	"fmt"
	"strings"

	"github.com/ledgerd/ledgerd/internal/rollup"
)

// LockKey is the advisory lock a reprice holds for its whole transaction, so that two reprices
// never compute deltas from the same old costs (74210001 to 74210003 are taken by dbtest, partition
// DDL and the alerts leader).
const LockKey = 74210004

// lockSQL takes the reprice lock for the current transaction, or reports false when another
// reprice holds it.
const lockSQL = `SELECT pg_try_advisory_xact_lock($1)`

// createTempSQL creates the tables a reprice works in: one chunk of changed attempts with their old
// and new costs, and the rollup deltas accumulated until the end of the transaction.
const createTempSQL = `
CREATE TEMP TABLE reprice_chunk (
    project_id   int8 NOT NULL,
    attempt_id   text NOT NULL,
    started_at   timestamptz NOT NULL,
    old_cost     int8,
    old_nocache  int8,
    new_cost     int8,
    new_nocache  int8,
    new_price_id int4
) ON COMMIT DROP;
CREATE TEMP TABLE reprice_hourly (
    project_id int8, bucket timestamptz, series_id int8, fallback bool, status attempt_status,
    error_class error_class, cost_nanos int8, nocache_cost_nanos int8, unpriced_attempts int8,
    cost_mismatch_attempts int8
) ON COMMIT DROP;
CREATE TEMP TABLE reprice_daily (LIKE reprice_hourly) ON COMMIT DROP;
CREATE TEMP TABLE reprice_minute (LIKE reprice_hourly) ON COMMIT DROP;
ALTER TABLE reprice_daily ALTER COLUMN bucket TYPE date;
CREATE TEMP TABLE reprice_cache (
    project_id int8, bucket timestamptz, series_id int8, fallback bool, prompt_hash text,
    cost_nanos int8, nocache_cost_nanos int8, unpriced_attempts int8
) ON COMMIT DROP;
CREATE TEMP TABLE reprice_load (
    project_id int8, bucket timestamptz, org text, series_id int8, fallback bool,
    wasted_nanos int8, unpriced_attempts int8
) ON COMMIT DROP`

// chunkCols are the columns of reprice_chunk, in the order the chunk is copied in.
var chunkCols = []string{"project_id", "attempt_id", "started_at", "old_cost", "old_nocache", "new_cost", "new_nocache", "new_price_id"}

// cursorSQL streams the raw attempts of [$1, $2), optionally only those whose series' model is one
// of $3. The cursor reads one snapshot, taken when it is declared.
const cursorSQL = `DECLARE reprice_rows NO SCROLL CURSOR FOR
SELECT project_id, attempt_id, started_at, series_id, batch, input_tokens, output_tokens,
       cache_write_tokens, cache_write_1h_tokens, cache_read_tokens, reasoning_tokens,
       cost_nanos, nocache_cost_nanos, price_id
FROM attempts
WHERE started_at >= $1 AND started_at < $2
  AND NOT usage_unknown
  AND ($3::text[] IS NULL OR series_id IN (SELECT id FROM series WHERE model = ANY ($3)))`

// fetchSQL reads the next chunk from the cursor; $1 is the chunk size.
const fetchSQL = `FETCH FORWARD %d FROM reprice_rows`

// seriesSQL lists every series, for the provider and model an attempt is priced as.
const seriesSQL = `SELECT id, provider, model FROM series`

// timezoneSQL reads the timezone daily rollups are counted in.
const timezoneSQL = `SELECT ` + rollup.TimezoneSQL

// rollupDeltaCols are the rollup_hourly/rollup_daily sums that depend on an attempt's cost; their
// expressions come from rollup.Sums, so a delta counts exactly what the writer counted.
var rollupDeltaCols = []string{"cost_nanos", "nocache_cost_nanos", "unpriced_attempts", "cost_mismatch_attempts"}

// cacheDeltaCols are the same for rollup_cache_hourly, from rollup.CacheSums.
var cacheDeltaCols = []string{"cost_nanos", "nocache_cost_nanos", "unpriced_attempts"}

// loadDeltaCols are the same for rollup_load_minute, from rollup.LoadSums; reprice_load keys them
// by minute, org, series and fallback flag (loadDeltaKey).
var (
	loadDeltaCols = []string{"wasted_nanos", "unpriced_attempts"}
	loadDeltaKey  = []string{"project_id", "bucket", "org", "series_id", "fallback"}
)

// chunkSQL writes the new costs of the chunk to attempts and adds, per rollup key, the difference
// between the sums over the chunk's rows as they are now and as they were to the delta tables. $1
// is the timezone of daily rollups. It returns the number of attempts updated.
var chunkSQL = buildChunkSQL()

// applySQL holds, per rollup table, the statement that counts the rows the accumulated deltas
// touch, and the one that adds the deltas to them. No row needs locking: every other writer of
// the rollups (the writers' folds, a rebuild) waits on the fold lock the reprice holds.
var applySQL = append(append([]applyStmt{
	// The hours rollup_hourly pruned (rollup.Prune) have no rows to adjust.
	buildApply("rollup_hourly", onShapes("reprice_hourly", rollup.Key, rollupDeltaCols, "d.bucket >= "+rollup.PrunedBeforeSQL),
		rollup.Key, rollupDeltaCols, ""),
	buildApply("rollup_daily", onShapes("reprice_daily", rollup.Key, rollupDeltaCols, "TRUE"), rollup.Key, rollupDeltaCols, ""),
	// Nor the 5 minutes before minutes_from (rollup.MinuteKeep), which reprice_minute holds none of.
	buildApply("rollup_minute5", onShapes("reprice_minute", rollup.Key, rollupDeltaCols, "TRUE"), rollup.Key, rollupDeltaCols, ""),
}, narrowApply()...), append(cacheApply, loadApply...)...)

// loadApply are the statements of applySQL for rollup_load_minute and rollup_model_minute:
// reprice_load's deltas on each rollup's key, each series replaced by its provider, model, service
// and fallback_from.
var loadApply = []applyStmt{
	buildApply("rollup_load_minute", `(SELECT d.project_id, d.bucket, d.org, s.provider, s.model, s.service,
		d.fallback, s.fallback_from, d.`+strings.Join(loadDeltaCols, ", d.")+`
	FROM reprice_load d JOIN series s ON s.project_id = d.project_id AND s.id = d.series_id) x`,
		rollup.LoadKey, loadDeltaCols, ""),
	buildApply("rollup_model_minute", `(SELECT d.project_id, d.bucket, s.provider, s.model, d.fallback, s.fallback_from,
		d.`+strings.Join(loadDeltaCols, ", d.")+`
	FROM reprice_load d JOIN series s ON s.project_id = d.project_id AND s.id = d.series_id) x`,
		rollup.ModelMinuteKey, loadDeltaCols, ""),
}

// onShapes is the deltas of table (keyed by key, with the whole series) on the series' shapes, as
// the shape-keyed rollups count them, of the rows where selects (aliased d): a FROM item.
func onShapes(table string, key, cols []string, where string) string {
	var sel []string
	for _, k := range key {
		if k == "series_id" {
			sel = append(sel, "s.shape_id AS series_id")
		} else {
			sel = append(sel, "d."+k)
		}
	}
	return fmt.Sprintf(`(SELECT %s, d.%s FROM %s d JOIN series s ON s.project_id = d.project_id AND s.id = d.series_id WHERE %s) x`,
		strings.Join(sel, ", "), strings.Join(cols, ", d."), table, where)
}

// cacheApply are the cache statements of applySQL.
var cacheApply = []applyStmt{
	// The deltas go to the sums cache_prefixes keeps of a hash's only call. No fold can move a
	// single-use call between the empty-hash row and its hash's row meanwhile: the reprice holds
	// the fold lock.
	buildApply("cache_prefixes", prefixDeltas, prefixKey, cacheDeltaCols, "r.calls = 1"),
	buildApply("rollup_cache_hourly", foldedCacheDeltas, rollup.CacheKey, cacheDeltaCols, ""),
}

// narrowApply are the statements of applySQL for the narrow rollups (rollup.HourlyBy, then
// rollup.DailyBy): reprice_hourly's or reprice_daily's deltas, the series reduced to the columns
// each keeps; and for rollup_tenant_spend and rollup_tenant_blocks, reprice_daily's deltas in every
// block they fall in.
func narrowApply() []applyStmt {
	var out []applyStmt
	add := func(d rollup.Narrow, from string) {
		deltas := fmt.Sprintf(`(SELECT d.project_id, d.bucket, s.%s, d.fallback, d.status, d.error_class, %s
			FROM %s d JOIN series s ON s.project_id = d.project_id AND s.id = d.series_id) x`,
			strings.Join(d.Keep, ", s."), "d."+strings.Join(rollupDeltaCols, ", d."), from)
		out = append(out, buildApply(d.Table, deltas, d.Key(), rollupDeltaCols, ""))
	}
	for _, d := range rollup.HourlyBy {
		add(d, "reprice_hourly")
	}
	for _, d := range rollup.DailyBy {
		add(d, "reprice_daily")
	}
	spend := `(` + rollup.SpendFrom("reprice_daily r "+rollup.JoinSeries("r"), "s.tenant") +
		`) AS x (` + strings.Join(rollup.SpendKey, ", ") + `, cost_nanos)`
	var deltas []string
	for _, c := range rollupDeltaCols {
		deltas = append(deltas, "r."+c)
	}
	blocks := `(` + rollup.BlocksFrom("reprice_daily r "+rollup.JoinSeries("r"), "s.tenant", deltas) + `) x`
	return append(out, buildApply("rollup_tenant_spend", spend, rollup.SpendKey, []string{"cost_nanos"}, ""),
		buildApply("rollup_tenant_blocks", blocks, rollup.BlocksKey, rollupDeltaCols, ""))
}

// prefixKey is the key of cache_prefixes; prefixDeltas are reprice_cache's deltas per prefix.
var (
	prefixKey    = []string{"project_id", "month", "prompt_hash"}
	prefixDeltas = `(SELECT project_id, ` + rollup.MonthOf("bucket") + ` AS month, prompt_hash,
		cost_nanos, nocache_cost_nanos, unpriced_attempts FROM reprice_cache WHERE prompt_hash <> '') x`
)

// foldedCacheDeltas are reprice_cache's deltas on the rollup_cache_hourly rows that count them: on
// the series' shape, and a hash used once in its month on the shape's empty-hash row (see
// migrations 00005 and 00011).
var foldedCacheDeltas = `(SELECT x.project_id, x.bucket, s.shape_id AS series_id, x.fallback,
		CASE WHEN p.calls >= 2 THEN x.prompt_hash ELSE '' END AS prompt_hash,
		x.cost_nanos, x.nocache_cost_nanos, x.unpriced_attempts
	FROM reprice_cache x JOIN series s ON s.project_id = x.project_id AND s.id = x.series_id
		LEFT JOIN cache_prefixes p ON p.project_id = x.project_id
		AND p.month = ` + rollup.MonthOf("x.bucket") + ` AND p.prompt_hash = x.prompt_hash) f`

type applyStmt struct {
	table string
	// check returns the number of delta keys and the number of rollup rows that exist for them.
	check string
	// update returns the number of rollup rows updated.
	update string
}

// exprs returns the aggregate expressions of cols from sums (panicking at start-up when the rollup
// model no longer has one of them).
func exprs(sums []rollup.Sum, cols []string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = rollup.Find(sums, c).Expr
	}
	return out
}

func buildChunkSQL() string {
	delta := func(table, bucket string, key, cols []string, sums []rollup.Sum, where string) string {
		var sel []string
		for _, e := range exprs(sums, cols) {
			sel = append(sel, "dir * "+e)
		}
		group := append([]string{"project_id", bucket}, key[2:]...)
		return fmt.Sprintf(`INSERT INTO %s (%s, %s)
		SELECT %s, %s FROM v %s GROUP BY %s, dir`,
			table, strings.Join(key, ", "), strings.Join(cols, ", "),
			strings.Join(group, ", "), strings.Join(sel, ", "), where, strings.Join(group, ", "))
	}
	cacheGroup := []string{"project_id", rollup.HourBucketExpr, "series_id", "fallback", rollup.CacheHashExpr}
	var csel []string
	for _, e := range exprs(rollup.CacheSums, cacheDeltaCols) {
		csel = append(csel, "dir * "+e)
	}
	cache := fmt.Sprintf(`INSERT INTO reprice_cache (%s, %s)
		SELECT %s, %s FROM v WHERE %s GROUP BY %s, dir`,
		strings.Join(rollup.CacheKey, ", "), strings.Join(cacheDeltaCols, ", "),
		strings.Join(cacheGroup, ", "), strings.Join(csel, ", "), rollup.CacheWhere, strings.Join(cacheGroup, ", "))
	return fmt.Sprintf(`WITH upd AS (
		UPDATE attempts a SET cost_nanos = c.new_cost, nocache_cost_nanos = c.new_nocache, price_id = c.new_price_id
		FROM reprice_chunk c
		WHERE a.project_id = c.project_id AND a.attempt_id = c.attempt_id AND a.started_at = c.started_at
		RETURNING a.project_id, a.started_at, a.series_id, a.fallback, a.status, a.error_class, a.prompt_hash,
			a.cache_write_tokens, a.cache_read_tokens, a.client_cost_nanos, a.org, c.old_cost, c.old_nocache,
			a.cost_nanos AS new_cost, a.nocache_cost_nanos AS new_nocache
	), v AS (
		SELECT upd.project_id, upd.started_at, upd.series_id, upd.fallback, upd.status, upd.error_class,
			upd.prompt_hash, upd.cache_write_tokens, upd.cache_read_tokens, upd.client_cost_nanos,
			coalesce(upd.org, '') AS org, x.cost_nanos, x.nocache_cost_nanos, x.dir
		FROM upd CROSS JOIN LATERAL (VALUES (upd.new_cost, upd.new_nocache, 1), (upd.old_cost, upd.old_nocache, -1))
			AS x (cost_nanos, nocache_cost_nanos, dir)
	), hourly AS (%s
	), daily AS (%s
	), minute AS (%s
	), cache AS (%s
	), load AS (%s
	)
	SELECT count(*) FROM upd`,
		delta("reprice_hourly", rollup.HourBucketExpr, rollup.Key, rollupDeltaCols, rollup.Sums, ""),
		delta("reprice_daily", rollup.DayBucketExpr("$1"), rollup.Key, rollupDeltaCols, rollup.Sums, ""),
		delta("reprice_minute", rollup.Minute5BucketExpr, rollup.Key, rollupDeltaCols, rollup.Sums,
			"WHERE started_at >= "+rollup.MinutesFromSQL),
		cache, delta("reprice_load", rollup.MinuteBucketExpr, loadDeltaKey, loadDeltaCols, rollup.LoadSums, ""))
}

// buildApply builds table's statements for the deltas (a FROM item), on key. Every key with
// deltas is checked to have its row, whatever its deltas add up to; where, when set, limits the
// rows updated.
func buildApply(table, deltas string, key, cols []string, where string) applyStmt {
	var sums, nonzero, set, on []string
	for _, c := range cols {
		sums = append(sums, fmt.Sprintf("sum(%s)::int8 AS %s", c, c))
		nonzero = append(nonzero, fmt.Sprintf("sum(%s) <> 0", c))
		set = append(set, fmt.Sprintf("%s = r.%s + d.%s", c, c, c))
	}
	for _, k := range key {
		on = append(on, fmt.Sprintf("r.%s = d.%s", k, k))
	}
	// Keys whose deltas cancel out (only the price version changed) are left alone.
	d := fmt.Sprintf(`SELECT %s, %s FROM %s GROUP BY %s HAVING %s`,
		strings.Join(key, ", "), strings.Join(sums, ", "), deltas, strings.Join(key, ", "), strings.Join(nonzero, " OR "))
	checked := fmt.Sprintf(`SELECT DISTINCT %s FROM %s`, strings.Join(key, ", "), deltas)
	updated := strings.Join(on, " AND ")
	if where != "" {
		updated += " AND " + where
	}
	return applyStmt{
		table: table,
		check: fmt.Sprintf(`WITH d AS (%s)
			SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM %s r JOIN d ON %s)`,
			checked, table, strings.Join(on, " AND ")),
		update: fmt.Sprintf(`WITH d AS (%s), u AS (
			UPDATE %s r SET %s FROM d WHERE %s RETURNING 1
		) SELECT count(*) FROM u`,
			d, table, strings.Join(set, ", "), updated),
	}
}
