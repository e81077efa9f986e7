package rollup

// The days of the rollups (migration 00041): rollup_days has a row per project and local day,
// written again by every statement that changes the day's rows of rollup_daily, of the hourly
// rollups or of the load rollup's minutes (a fold's first and load statements, a reprice, a
// rebuild), so a reader that keeps a day's sums between reads can tell by the row's xmin whether
// they still hold. A reprice notes the days of its daily deltas (TouchRepricedDaysSQL): its
// hourly and minute deltas are of the same attempts.

// touchDaysSQL writes again the rows of rollup_days of the project_id and bucket (a local date)
// of rows (a FROM item), adding those not there, in key order as every writer locks them.
func touchDaysSQL(rows string) string {
	return `INSERT INTO rollup_days AS x (project_id, bucket)
		SELECT DISTINCT project_id, bucket FROM ` + rows + ` ORDER BY 1, 2
		ON CONFLICT (project_id, bucket) DO UPDATE SET writes = x.writes + 1`
}

// TouchRepricedDaysSQL writes again the days of a reprice's daily deltas (reprice_daily).
var TouchRepricedDaysSQL = touchDaysSQL("reprice_daily")

// daysRebuildSteps note the days of rollup_daily again once a rebuild has recounted it, each
// row written anew: a rebuild may change any day's rows, or delete them.
var daysRebuildSteps = []Step{
	{"clear daily rollups' days", `DELETE FROM rollup_days`, nil},
	{"note daily rollups' days", `INSERT INTO rollup_days (project_id, bucket)
		SELECT DISTINCT project_id, bucket FROM rollup_daily ORDER BY 1, 2`, nil},
}
