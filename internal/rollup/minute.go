package rollup

import (
	"fmt"
	"strings"
	"time"
)

// A summary grouped by 5 minutes reads rollup_minute5 (migration 00037) for the buckets it holds
// and the raw attempts for the rest, counted with the same expressions as the rollups (Sums); one
// grouped by the minute (ranges of an hour or less, on the dashboard) reads the raw attempts.
// rollup_minute5 is keyed as rollup_hourly, with the UTC 5 minutes for bucket, and holds every
// attempt that started at or after minutes_from (MinutesFromSQL): the last MinuteKeep once pruned,
// which covers the longest range a minute summary may span. Read from the raw attempts, six hours
// of a 10M-record ledger took a second or two (docs/incidents.md). The incidents' minute series
// come from the load rollup (load.go).
//
// The writer keys every pending_rollup_hourly row by its 5 minutes too (the pending column minute:
// the first minute of them in the hour), whatever its age: a fold sums the rows from minutes_from
// on into rollup_minute5, the rest into the hours only. As every attempt is keyed so, minutes_from
// may move either way, as long as rollup_minute5 is recounted from the raw attempts in the same
// transaction: Prune moves it forward and deletes the buckets before it; a rebuild recounts the
// buckets after it. Keyed by the minute, the pending rows of a live commit (records of the last 15
// minutes) grew about four times and live ingest lost a quarter of its speed. By 5 minutes, and
// with a fold merging each row's histogram once (fold.go), the minute data costs live ingest 3-6%
// (docs/performance.md).

// MinuteKeep is how far back rollup_minute5 holds every bucket once pruned: a day, the longest range
// a minute summary spans (analytics.MaxMinuteRange), and an hour to spare.
const MinuteKeep = 25 * time.Hour

// Minute5BucketExpr is the UTC 5 minutes an attempt started in: rollup_minute5's bucket.
var Minute5BucketExpr = MinuteBucketSQL("interval '5 minutes'", "started_at")

// MinutesFromSQL is the first bucket from which rollup_minute5 holds every attempt: settings
// 'minutes_from' rounded up to 5 minutes; 'infinity' (none) without one. A reader takes it in the
// same statement as the rows, so a prune or a rebuild committed meanwhile cannot split the two.
const MinutesFromSQL = `(SELECT CASE WHEN isfinite(f) THEN date_bin(interval '5 minutes', f + interval '299.999999 seconds',
	TIMESTAMPTZ '2000-01-01 00:00:00+00') ELSE f END
	FROM (SELECT coalesce((SELECT value::timestamptz FROM settings WHERE key = 'minutes_from'), 'infinity') AS f) m)`

// PendingMinuteExpr is the first minute of the 5 minutes of the UTC hour an attempt started in:
// pending_rollup_hourly's minute column.
const PendingMinuteExpr = "(extract(minute FROM started_at AT TIME ZONE 'UTC')::int / 5 * 5)::int2"

// MinutesCutoff is the instant before which Prune, run at now, deletes rollup_minute5's rows.
func MinutesCutoff(now time.Time) time.Time {
	return now.Add(-MinuteKeep).UTC().Truncate(5 * time.Minute)
}

// minuteRebuildSteps recount rollup_minute5 from the raw attempts since minutes_from, in the
// ranges covered (the arguments of coveredSQL): the buckets whose raw attempts are gone are kept.
func minuteRebuildSteps(covered []any) []Step {
	return []Step{
		{"clear 5-minute rollup", `DELETE FROM rollup_minute5 h WHERE EXISTS (` + fmt.Sprintf(coveredSQL, "h.bucket") + `)`, covered},
		{"count 5-minute rollup", countInsert("rollup_minute5", Minute5BucketExpr, "started_at >= "+MinutesFromSQL), nil},
	}
}

// MinuteBucketSQL is the start of the step-wide bucket (the SQL interval expression step, a whole
// number of minutes dividing an hour) the instant at (an attempt's started_at, a minute rollup
// row's bucket) falls in, in UTC.
func MinuteBucketSQL(step, at string) string {
	return "date_bin(" + step + ", " + at + ", TIMESTAMPTZ '2000-01-01 00:00:00+00')"
}

// Minute5RowsSQL are the SELECTs of RawRowsSQL's and RawHistSQL's columns over [@raw_from,
// @raw_to) (whole 5 minutes) of project @project, per 5 minutes: from rollup_minute5 from
// minutes_from on, whose rows are keyed by series shape, and from the raw attempts before.
func Minute5RowsSQL() (sums, hists string) {
	from := MinutesFromSQL
	raw := "project_id = @project AND started_at >= @raw_from AND started_at < least(@raw_to, " + from + ")"
	kept := "project_id = @project AND bucket >= greatest(@raw_from, " + from + ") AND bucket < @raw_to"
	sums = RawRowsSQL(Minute5BucketExpr, raw) + `
	UNION ALL
	SELECT series_id, fallback, status, error_class, bucket, ` + strings.Join(Cols(Sums), ", ") + `
	FROM rollup_minute5 WHERE ` + kept
	hists = RawHistSQL(Minute5BucketExpr, raw) + `
	UNION ALL
	SELECT series_id, fallback, bucket, latency_hist::text FROM rollup_minute5 WHERE status = 'ok' AND ` + kept
	return sums, hists
}

// RawRowsSQL is the SELECT of rollup_hourly-shaped rows counted from the raw attempts that where
// (an SQL condition over attempts) selects, per bucket (an SQL expression, named minute), series,
// fallback flag, status and error class: the columns series_id, fallback, status, error_class,
// minute, then each of Sums by its column name.
func RawRowsSQL(bucket, where string) string {
	return fmt.Sprintf(`SELECT series_id, fallback, status, error_class, %s AS minute, %s
	FROM attempts WHERE %s GROUP BY 1, 2, 3, 4, 5`, bucket, RawSums(), where)
}

// RawSums is the select list of each of Sums (or of the columns cols only, in their order)
// counted over raw attempts, as bigint, named by its column: what a question the rollups cannot
// answer sums instead.
func RawSums(cols ...string) string {
	if len(cols) == 0 {
		cols = Cols(Sums)
	}
	sums := make([]string, len(cols))
	for i, c := range cols {
		sums[i] = "(" + Find(Sums, c).Expr + ")::int8 AS " + c
	}
	return strings.Join(sums, ", ")
}

// RawHistSQL is the SELECT of the latency histograms of the succeeded attempts that where selects,
// per bucket (named minute), series and fallback flag: the columns series_id, fallback, minute and
// latency_hist, the text of an int8[] histogram, several rows per group, to be merged. Apart from
// RawRowsSQL, so the sums do not pay for the histograms. Each row is one histogram bucket's count,
// written as the one-bucket histogram "[b:b]={n}" by plain SQL: building whole histograms with
// hist_agg calls a PL/pgSQL function for every attempt, which took most of a minute summary's time.
func RawHistSQL(bucket, where string) string {
	return fmt.Sprintf(`SELECT series_id, fallback, minute, '[' || b || ':' || b || ']={' || count(*) || '}' AS latency_hist
	FROM (SELECT series_id, fallback, %s AS minute, latency_bucket(latency_ms) AS b FROM attempts
		WHERE status = 'ok' AND (%s)) a
	GROUP BY 1, 2, 3, b`, bucket, where)
}
