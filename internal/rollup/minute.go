package rollup

import (
	"fmt"
	"strings"
)

// A summary grouped by minute is answered from the raw attempts of its short window, counted with
// the same expressions as the rollups (Sums), not from a rollup of its own: a window of a few hours
// is a range scan of the attempts' (project, started_at) index, and the writer pays nothing for it
// (docs/incidents.md has the measurements). The incidents' minute series come from the load
// rollup (load.go).

// MinuteBucketSQL is the start of the step-wide bucket (the SQL interval expression step, a whole
// number of minutes dividing an hour) an attempt falls in, in UTC.
func MinuteBucketSQL(step string) string {
	return "date_bin(" + step + ", started_at, TIMESTAMPTZ '2000-01-01 00:00:00+00')"
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
