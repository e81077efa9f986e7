// Package rollup owns ledgerd's rollup model: which tables summarize the attempts, their keys and
// summed columns (Sums, CacheSums), how an attempt is bucketed in time, the SQL that counts them
// from raw attempts (for a rebuild, a reprice, and the writer's exact path), and the fold that moves
// the deltas ingest commits leave pending into the rollups (Fold). The writer (package ingest),
// the query API (analytics) and reprice build their statements from these definitions, so no two
// of them can count differently.
//
// # Tables
//
// rollup_hourly and rollup_daily sum attempts per series shape (series_id holds the shape: the
// series with no tenant, series.shape_id, migration 00011), fallback flag, status and error class,
// per UTC hour and per local day (in the timezone stored in settings 'timezone'). Keyed by the
// whole series they would keep about a row per attempt when the tenants are many. The narrow daily
// rollups (DailyBy) sum the days over every series column but a few, for questions that need no
// other; the tenant ones are the only rollups that keep the tenant, with their sums over blocks of
// days (rollup_tenant_spend, spend.go; rollup_tenant_blocks, blocks.go). rollup_cache_hourly
// counts the attempts that used the prompt cache or named a prompt_hash, per series shape and
// hash (a hash used once in its UTC month is counted on its shape's empty-hash row, see migration
// 00005; cache_prefixes tracks each hash's calls). rollup_cache_daily (cachedays.go) sums its local
// days per model and per hash, with when each broke, for the cache report and incidents.
//
// The pending tables keep the whole series: a fold sums each pending row onto its shape for the
// shape-keyed rollups and by the kept columns, tenant included, for the narrow ones.
//
// rollup_minute5 (minute.go) sums as rollup_hourly does, per 5 minutes, for the last day only: the
// summaries by 5 minutes read it.
//
// The load rollup (load.go) counts requests, 429s and tokens per minute, org, provider, model and
// service, with the lowest rate-limit headroom reported, and keeps each day's busiest minute per
// grouping of those (rollup_load_minute, rollup_load_peaks).
//
// An ingest commit adds its deltas to pending_rollup_hourly (keyed as PendingKey), pending_cache
// (keyed as CacheKey) and pending_load_minute (keyed as LoadKey); Fold adds them to the rollups.
package rollup

import (
	"fmt"
	"slices"
	"strings"
)

// Expressions over attempts that bucket and sort them the same way everywhere.
const (
	// HourBucketExpr is the UTC hour of an attempt, whatever the session's TimeZone.
	HourBucketExpr = "date_trunc('hour', started_at, 'UTC')"
	// LatencyHistExpr is the latency histogram of a group of attempts.
	LatencyHistExpr = "hist_agg(latency_bucket(latency_ms))"
	// CacheWhere selects the attempts rollup_cache_hourly counts.
	CacheWhere = "cache_write_tokens > 0 OR cache_read_tokens > 0 OR prompt_hash IS NOT NULL"
	// CacheHashExpr is the prompt_hash rollup_cache_hourly keys an attempt by before the fold sorts
	// single-use hashes onto the empty-hash row.
	CacheHashExpr = "coalesce(prompt_hash, '')"
)

// ShapeOf is the SQL for the shape of the series whose id is the expression id in project
// expression project: what the shape-keyed rollups key a series by.
func ShapeOf(project, id string) string {
	return "(SELECT shape_id FROM series WHERE project_id = " + project + " AND id = " + id + ")"
}

// DayBucketExpr is the local date of an attempt in the timezone given by the SQL expression tz.
func DayBucketExpr(tz string) string { return "(started_at AT TIME ZONE " + tz + ")::date" }

// MonthOf is the SQL for the UTC month (its first instant) of the timestamptz expression t: the
// month cache_prefixes counts a hash's calls in.
func MonthOf(t string) string { return "date_trunc('month', " + t + ", 'UTC')" }

// Key is the primary key of rollup_hourly and rollup_daily (bucket: the UTC hour, the local date),
// CacheKey that of rollup_cache_hourly and pending_cache's rows. Reprice's deltas are keyed by them.
var (
	Key      = []string{"project_id", "bucket", "series_id", "fallback", "status", "error_class"}
	CacheKey = []string{"project_id", "bucket", "series_id", "fallback", "prompt_hash"}
)

// PendingKey is the key of pending_rollup_hourly's rows: rollup_hourly's and the local day.
var PendingKey = slices.Concat(Key, []string{"day"})

// PendingCols and PendingCacheCols are the columns of pending_rollup_hourly and pending_cache an
// ingest commit fills, in order: keys (the hourly rows' with the first minute of their 5 minutes,
// minute.go),
// then sums, then (hourly) the histogram.
var (
	PendingCols      = slices.Concat(PendingKey, []string{"minute"}, Cols(Sums), []string{"latency_hist"})
	PendingCacheCols = slices.Concat(CacheKey, Cols(CacheSums))
)

// Narrow is a daily rollup summed over every series column but Keep: keyed by project, local day
// (bucket), the kept series columns, fallback, status and error class, with rollup_daily's sums and
// histogram. A question that needs no other series column reads it instead of rollup_daily, which
// has about ten times the rows. The tenant rollups are the only rollups that keep the tenant.
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
	{"rollup_daily_tenant_model", tenantModelKeep},
}

// tenantModelKeep are the series columns rollup_daily_tenant_model keeps: a tenant's spend per
// model. The fold sums the tenant rollups from it (foldSQL).
var tenantModelKeep = []string{"tenant", "provider", "model", "fallback_from"}

// HourlyBy are the narrow hourly rollups (keyed as a Narrow, bucket the UTC hour), kept by the
// same statements as rollup_hourly and for good: they keep the hours rollup_hourly prunes.
var HourlyBy = []Narrow{
	{"rollup_hourly_model", []string{"provider", "model", "fallback_from"}},
}

// Tenant tells whether the rollup keeps the tenant: then no shape-keyed rollup can recount it, and
// a rebuild counts it from the raw attempts.
func (n Narrow) Tenant() bool { return slices.Contains(n.Keep, "tenant") }

// Key is the rollup's primary key, in order: the columns rebuild groups by, reprice adds its
// deltas on and a fold sums pending_rollup_hourly's rows by.
func (n Narrow) Key() []string {
	return slices.Concat([]string{"project_id", "bucket"}, n.Keep, []string{"fallback", "status", "error_class"})
}

// NarrowTables lists the narrow rollups, daily and hourly, comma-separated.
func NarrowTables() string {
	var t []string
	for _, d := range slices.Concat(DailyBy, HourlyBy) {
		t = append(t, d.Table)
	}
	return strings.Join(t, ", ")
}

// PendingFrom is the WITH items (named p0, p1 and pl) that add the rollup deltas of the attempts
// rows src (a FROM item) to the pending tables, keyed as PendingKey, CacheKey and LoadKey, with
// local days in the timezone given by the SQL expression tz: what an ingest commit that inserts in
// SQL adds.
func PendingFrom(src, tz string) string {
	keySel := []string{"project_id", HourBucketExpr, "series_id", "fallback", "status", "error_class", DayBucketExpr(tz),
		PendingMinuteExpr}
	return fmt.Sprintf(`p0 AS (
		INSERT INTO pending_rollup_hourly (%[1]s, latency_hist)
		SELECT %[2]s, %[3]s, %[4]s FROM %[5]s GROUP BY %[6]s
	), p1 AS (
		INSERT INTO pending_cache (%[7]s)
		SELECT project_id, %[8]s, series_id, fallback, %[9]s, %[10]s FROM %[5]s WHERE %[11]s GROUP BY %[12]s
	), %[13]s`,
		strings.Join(slices.Concat(PendingKey, []string{"minute"}, Cols(Sums)), ", "), strings.Join(keySel, ", "),
		strings.Join(Exprs(Sums), ", "), LatencyHistExpr, src, Ordinals(len(keySel)),
		strings.Join(PendingCacheCols, ", "), HourBucketExpr, CacheHashExpr, strings.Join(Exprs(CacheSums), ", "),
		CacheWhere, Ordinals(len(CacheKey)), loadPendingFrom(src, tz))
}

// Ordinals are the select-list positions 1 to n, as a GROUP BY or ORDER BY names them.
func Ordinals(n int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(i + 1)
	}
	return strings.Join(out, ", ")
}

func prefixed(prefix string, cols []string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = prefix + c
	}
	return out
}
