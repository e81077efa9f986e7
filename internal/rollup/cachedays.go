package rollup

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The cache days (migration 00039): each local day of rollup_cache_hourly summed per model
// (prompt_hash '') and per prompt_hash, with what finding when a prefix broke needs of its hours.
// Of a prefix's hours in a day:
//
//   - first_hour is the first hour with calls, last_read the last that read the cache;
//   - since is the first hour after last_read that wrote it (the first that wrote, when none read);
//   - the since_ sums are those of the hours from since on (calls, writing calls, cost, cost without
//     caching, unpriced calls), the read_ sums those of the hours that read (calls, cost, unpriced).
//
// A model's hours are those of all its hashes and shapes added up: whether a model read in an hour
// is not the sum of its hashes' answers, so the model has rows of its own. Over several days,
// the last read is the last day's that has one, since is that day's or, when it has none, the
// first since of the days after it, and the hours before since that read are all read hours: so
// the days give exactly what the hours would (analytics' sinceOf).
//
// A day is summed up to its through: its end, or the hour the summary was made in. A fold notes
// the earliest hour of each day it adds to in cache_days_dirty (markCacheDaysSQL); a summary is
// used while no hour before its through is noted, and SummarizeCacheDays sums the noted days again
// once their noted hour is over. Summing them in the fold instead would read every touched day's
// hours again on each chunk of a backfill.

// TimezoneSQL is the timezone the local days of the rollups are counted in (settings 'timezone',
// UTC when none is stored).
const TimezoneSQL = `coalesce((SELECT value FROM settings WHERE key = 'timezone'), 'UTC')`

// CacheDayCols are rollup_cache_daily's columns after its key, in order: the sums of CacheSums
// and single_use, then the break columns.
var CacheDayCols = slices.Concat(Cols(CacheSums), []string{"single_use"}, cacheBreakCols)

var (
	cacheBreakCols = []string{"first_hour", "last_read", "since", "since_calls", "since_writes", "since_cost",
		"since_nocache", "since_unpriced", "read_calls", "read_cost", "read_unpriced"}
	// cacheDayKey is rollup_cache_daily's key after project_id and bucket.
	cacheDayKey = []string{"service", "operation", "provider", "model", "fallback", "prompt_hash"}
)

// markCacheDaysSQL notes, for the rows (with project_id and bucket, the UTC hour) a fold or a
// reprice adds to rollup_cache_hourly, the earliest hour of each local day.
func markCacheDaysSQL(rows string) string {
	return `INSERT INTO cache_days_dirty AS x (project_id, bucket, hour)
		SELECT project_id, (bucket AT TIME ZONE ` + TimezoneSQL + `)::date, min(bucket) FROM ` + rows + `
		GROUP BY 1, 2 ORDER BY 1, 2
		ON CONFLICT (project_id, bucket) DO UPDATE SET hour = least(x.hour, excluded.hour)`
}

// MarkRepricedCacheDaysSQL notes the days of a reprice's cache deltas (reprice_cache).
var MarkRepricedCacheDaysSQL = markCacheDaysSQL("reprice_cache")

// summarizeSQL sums the local days of days (a FROM item of project_id and day) in timezone tz
// (SQL) from rollup_cache_hourly into rollup_cache_daily, each up to the end of the day or the
// start of the hour of now (SQL), and records how far in rollup_cache_days. The days' rows must
// have been deleted first.
func summarizeSQL(days, tz, now string) string {
	group := "project_id, day, service, operation, provider, model, fallback, prompt_hash"
	var sums, totals []string
	for _, c := range append(Cols(CacheSums), "single_use") {
		sums = append(sums, fmt.Sprintf("sum8(%[1]s) AS %[1]s", c))
		totals = append(totals, fmt.Sprintf("sum8(%s)", c))
	}
	since := func(cond string, cols ...string) []string {
		var out []string
		for _, c := range cols {
			out = append(out, fmt.Sprintf("coalesce(sum8(%s) FILTER (WHERE %s), 0)", c, cond))
		}
		return out
	}
	breaks := slices.Concat(
		[]string{"min(bucket)", "max(last_read)", "max(since)"},
		since("bucket >= since", "calls", "cache_write_calls", "cost_nanos", "nocache_cost_nanos", "unpriced_attempts"),
		since("cache_read_calls > 0", "calls", "cost_nanos", "unpriced_attempts"))
	return fmt.Sprintf(`WITH d AS (
		SELECT d.project_id, d.day, (d.day::timestamp AT TIME ZONE z.tz) AS lo,
			least(((d.day + 1)::timestamp AT TIME ZONE z.tz), date_trunc('hour', %[3]s)) AS hi
		FROM (%[1]s) d (project_id, day) CROSS JOIN (SELECT %[2]s AS tz) z
	), r AS (
		SELECT c.*, d.day, s.service, s.operation, s.provider, s.model
		FROM d JOIN rollup_cache_hourly c ON c.project_id = d.project_id AND c.bucket >= d.lo AND c.bucket < d.hi
		JOIN series s ON s.project_id = c.project_id AND s.id = c.series_id
	), h AS (
		SELECT %[4]s, bucket, %[5]s FROM r WHERE prompt_hash <> '' GROUP BY %[4]s, bucket
		UNION ALL
		SELECT project_id, day, service, operation, provider, model, fallback, '', bucket, %[5]s FROM r
		GROUP BY project_id, day, service, operation, provider, model, fallback, bucket
	), w AS (
		SELECT h.*, max(bucket) FILTER (WHERE cache_read_calls > 0) OVER p AS last_read FROM h WINDOW p AS (PARTITION BY %[4]s)
	), v AS (
		SELECT w.*, min(bucket) FILTER (WHERE cache_write_calls > 0 AND (last_read IS NULL OR bucket > last_read)) OVER p AS since
		FROM w WINDOW p AS (PARTITION BY %[4]s)
	), ins AS (
		INSERT INTO rollup_cache_daily (project_id, bucket, %[6]s, %[7]s)
		SELECT %[4]s, %[8]s, %[9]s FROM v GROUP BY %[4]s ORDER BY %[4]s
		RETURNING 1
	), t AS (
		INSERT INTO rollup_cache_days AS t (project_id, bucket, through) SELECT project_id, day, hi FROM d ORDER BY 1, 2
		ON CONFLICT (project_id, bucket) DO UPDATE SET through = excluded.through
	)
	SELECT count(*) FROM ins`, days, tz, now, group, strings.Join(sums, ", "), strings.Join(cacheDayKey, ", "),
		strings.Join(CacheDayCols, ", "), strings.Join(totals, ", "), strings.Join(breaks, ", "))
}

// summarizeDays is the FROM item of the days SummarizeCacheDays takes ($2, $3: projects and days).
const summarizeDays = `SELECT * FROM unnest($2::int8[], $3::date[])`

var (
	// takeCacheDaysSQL lists up to $2 noted days whose noted hour is over at $1, in key order.
	takeCacheDaysSQL = `SELECT project_id, bucket FROM cache_days_dirty WHERE hour < date_trunc('hour', $1::timestamptz)
		ORDER BY 1, 2 LIMIT $2`
	// clearCacheDaysSQL deletes the summaries and the notes of the days ($1, $2: projects and days).
	clearCacheDaysSQL = `WITH k AS (SELECT * FROM unnest($1::int8[], $2::date[]) k (project_id, bucket)),
		a AS (DELETE FROM rollup_cache_daily r USING k WHERE r.project_id = k.project_id AND r.bucket = k.bucket)
		DELETE FROM cache_days_dirty r USING k WHERE r.project_id = k.project_id AND r.bucket = k.bucket`
	summarizeCacheDaysSQL = summarizeSQL(summarizeDays, TimezoneSQL, "$1::timestamptz")
)

// cacheDaysChunk is how many days SummarizeCacheDays sums in one transaction, under the fold lock:
// a day of a ledger of 10,000 tenants and 10 million attempts a month is some 65,000 cache hours,
// summed in about 0.9 s (four days took 2.7-4.3 s).
const cacheDaysChunk = 1

// SummarizeCacheDays sums again up to cacheDaysChunk of the days folds noted whose noted hour is
// over at now, after waiting for any other fold to finish (it takes the fold lock for the rest of
// tx), and returns how many days it summed and whether more may be left.
func SummarizeCacheDays(ctx context.Context, tx pgx.Tx, now time.Time) (int, bool, error) {
	if err := lockFold(ctx, tx); err != nil {
		return 0, false, err
	}
	var (
		projects []int64
		days     []time.Time
		p        int64
		d        time.Time
	)
	rows, err := tx.Query(ctx, takeCacheDaysSQL, now, cacheDaysChunk)
	if err != nil {
		return 0, false, fmt.Errorf("list cache days: %w", err)
	}
	if _, err := pgx.ForEachRow(rows, []any{&p, &d}, func() error {
		projects, days = append(projects, p), append(days, d)
		return nil
	}); err != nil {
		return 0, false, fmt.Errorf("list cache days: %w", err)
	}
	if len(days) == 0 {
		return 0, false, nil
	}
	if _, err := tx.Exec(ctx, clearCacheDaysSQL, projects, days); err != nil {
		return 0, false, fmt.Errorf("clear cache days: %w", err)
	}
	if _, err := tx.Exec(ctx, summarizeCacheDaysSQL, now, projects, days); err != nil {
		return 0, false, fmt.Errorf("sum cache days: %w", err)
	}
	return len(days), len(days) == cacheDaysChunk, nil
}

// cacheDaysRebuildSteps sum every day of rollup_cache_hourly again in the timezone tz, once the
// cache rollup is recounted: a rebuild may change the timezone.
func cacheDaysRebuildSteps(tz string) []Step {
	return []Step{
		{"clear cache days", `WITH a AS (DELETE FROM rollup_cache_daily), b AS (DELETE FROM rollup_cache_days)
		DELETE FROM cache_days_dirty`, nil},
		{"sum cache days", summarizeSQL(`SELECT DISTINCT project_id, (bucket AT TIME ZONE $1::text)::date FROM rollup_cache_hourly`,
			"$1::text", "now()"), []any{tz}},
	}
}
