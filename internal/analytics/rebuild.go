package analytics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/rollup"
)

// RebuildResult reports what Rebuild did.
type RebuildResult struct {
	// Timezone is the timezone daily rollups are now counted in; Previous the one they were in.
	Timezone, Previous string
	// Rows in each rollup afterwards.
	HourlyRows, DailyRows, CacheRows int64
	// KeptDays are local days whose raw attempts were partly dropped for retention: their daily
	// rows were kept (same timezone) or recounted from the hourly rollups (new timezone).
	KeptDays int
}

// The rebuild statements. Rollup columns and expressions come from package ingest, so a rebuilt
// rollup counts exactly what the writer counts.
var (
	partitionsSQL = `SELECT c.relname FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
		WHERE p.relname = 'attempts' AND p.relnamespace = current_schema()::regnamespace`

	// $1, $2: the starts and ends of the ranges whose raw attempts exist.
	coveredSQL = `SELECT 1 FROM unnest($1::timestamptz[], $2::timestamptz[]) AS c(lo, hi)
		WHERE %[1]s >= c.lo AND %[1]s < c.hi`

	lostHoursSQL = `SELECT DISTINCT h.bucket FROM rollup_hourly h
		WHERE NOT EXISTS (` + fmt.Sprintf(coveredSQL, "h.bucket") + `) ORDER BY 1`

	deleteHourlySQL = `DELETE FROM rollup_hourly h WHERE EXISTS (` + fmt.Sprintf(coveredSQL, "h.bucket") + `)`
	deleteCacheSQL  = `DELETE FROM rollup_cache_hourly h WHERE EXISTS (` + fmt.Sprintf(coveredSQL, "h.bucket") + `)`
	// Months are covered whole or not at all (partitions are months).
	deletePrefixesSQL = `DELETE FROM cache_prefixes p WHERE EXISTS (` + fmt.Sprintf(coveredSQL, "p.month") + `)`

	// $1: days to keep.
	deleteDailySQL = `DELETE FROM rollup_daily d WHERE NOT (d.bucket = ANY($1::date[]))`

	hourlySQL = rollupInsert("rollup_hourly", ingest.HourBucketExpr, "TRUE")
	// $1: the timezone; $2: local days not to count from raw attempts.
	dailySQL = rollupInsert("rollup_daily", "(started_at AT TIME ZONE $1)::date",
		"NOT ((started_at AT TIME ZONE $1)::date = ANY($2::date[]))")
	// prefixesSQL counts every prompt_hash's calls per UTC month, with the series, hour and cache
	// sums of the hashes used once, as the writer leaves them (see ingest's cacheFoldCTEs).
	prefixesSQL = func() string {
		var cols, exprs []string
		for _, s := range ingest.CacheSums[1:] {
			cols = append(cols, s.Col)
			exprs = append(exprs, "CASE WHEN count(*) = 1 THEN "+s.Expr+" END")
		}
		return fmt.Sprintf(`INSERT INTO cache_prefixes (project_id, month, prompt_hash, calls, series_id, fallback, bucket, %s)
			SELECT project_id, %s, prompt_hash, count(*), CASE WHEN count(*) = 1 THEN min(series_id) END,
				CASE WHEN count(*) = 1 THEN bool_or(fallback) END, CASE WHEN count(*) = 1 THEN min(%s) END, %s
			FROM attempts WHERE prompt_hash IS NOT NULL GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`,
			strings.Join(cols, ", "), ingest.MonthOf("started_at"), ingest.HourBucketExpr, strings.Join(exprs, ", "))
	}()
	// cacheSQL counts rollup_cache_hourly: a hash used once in its month on the series' empty-hash
	// row.
	cacheSQL = func() string {
		cols, exprs := sumLists(ingest.CacheSums)
		return fmt.Sprintf(`INSERT INTO rollup_cache_hourly (project_id, bucket, series_id, fallback, prompt_hash, %s, single_use)
			SELECT project_id, %s, series_id, fallback, CASE WHEN prefix_calls >= 2 THEN prompt_hash ELSE '' END, %s,
				count(*) FILTER (WHERE prefix_calls = 1)
			FROM (SELECT a.*, p.calls AS prefix_calls
				FROM attempts a LEFT JOIN cache_prefixes p ON p.project_id = a.project_id
					AND p.month = %s AND p.prompt_hash = a.prompt_hash) a
			WHERE %s GROUP BY 1, 2, 3, 4, 5 ORDER BY 1, 2`, cols, ingest.HourBucketExpr, exprs,
			ingest.MonthOf("a.started_at"), ingest.CacheWhere)
	}()
	// dailyFromHourlySQL recounts the local days $2 (timezone $1) from the hourly rollups.
	dailyFromHourlySQL = func() string {
		cols, _ := sumLists(ingest.RollupSums)
		var sums []string
		for _, s := range ingest.RollupSums {
			sums = append(sums, "sum(h."+s.Col+")")
		}
		return fmt.Sprintf(`INSERT INTO rollup_daily (project_id, bucket, series_id, fallback, status, error_class, %s, latency_hist)
			SELECT h.project_id, l.day, h.series_id, h.fallback, h.status, h.error_class, %s, hist_sum(h.latency_hist)
			FROM rollup_hourly h JOIN unnest($2::date[]) AS l(day) ON l.day = (h.bucket AT TIME ZONE $1)::date
			GROUP BY 1, 2, 3, 4, 5, 6`, cols, strings.Join(sums, ", "))
	}()

	// narrowSQL sums rollup_daily into each narrow daily rollup, once rollup_daily is recounted: they
	// then agree by construction.
	narrowSQL = func() []step {
		cols, _ := sumLists(ingest.RollupSums)
		var sums []string
		for _, s := range ingest.RollupSums {
			sums = append(sums, "sum(r."+s.Col+")")
		}
		var out []step
		for _, d := range ingest.DailyBy {
			keep := strings.Join(d.Keep, ", ")
			var group []string
			for i := range d.Key() {
				group = append(group, fmt.Sprint(i+1))
			}
			out = append(out, step{"clear " + d.Table, "DELETE FROM " + d.Table, nil},
				step{"count " + d.Table, fmt.Sprintf(`INSERT INTO %[1]s (project_id, bucket, %[2]s, fallback, status, error_class, %[3]s, latency_hist)
				SELECT r.project_id, r.bucket, s.%[4]s, r.fallback, r.status, r.error_class, %[5]s, hist_sum(r.latency_hist)
				FROM rollup_daily r JOIN series s ON s.project_id = r.project_id AND s.id = r.series_id
				GROUP BY %[6]s ORDER BY %[6]s`, d.Table, keep, cols, strings.Join(d.Keep, ", s."), strings.Join(sums, ", "),
					strings.Join(group, ", ")), nil})
		}
		return out
	}()

	setTimezoneSQL = `INSERT INTO settings (key, value) VALUES ('timezone', $1)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`
	analyzeRollupsSQL = `ANALYZE series, rollup_hourly, rollup_daily, ` + narrowTables + `, rollup_cache_hourly, cache_prefixes, rollup_load_minute, rollup_load_peaks`
	countRollupsSQL   = `SELECT (SELECT count(*) FROM rollup_hourly), (SELECT count(*) FROM rollup_daily),
		(SELECT count(*) FROM rollup_cache_hourly)`
)

// narrowTables lists the narrow daily rollups (ingest.DailyBy).
var narrowTables = func() string {
	var t []string
	for _, d := range ingest.DailyBy {
		t = append(t, d.Table)
	}
	return strings.Join(t, ", ")
}()

// step is one statement of a rebuild.
type step struct {
	what string
	sql  string
	args []any
}

func sumLists(sums []ingest.Sum) (cols, exprs string) {
	var c, e []string
	for _, s := range sums {
		c = append(c, s.Col)
		e = append(e, s.Expr)
	}
	return strings.Join(c, ", "), strings.Join(e, ", ")
}

// rollupInsert counts the attempts matching where into table, bucketed by bucket. Rows are written
// in (project, bucket) order, so the rows of a range sit on few pages, as the writer leaves them.
func rollupInsert(table, bucket, where string) string {
	cols, exprs := sumLists(ingest.RollupSums)
	return fmt.Sprintf(`INSERT INTO %s (project_id, bucket, series_id, fallback, status, error_class, %s, latency_hist)
		SELECT project_id, %s, series_id, fallback, status, error_class, %s, %s
		FROM attempts WHERE %s GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2`, table, cols, bucket, exprs, ingest.LatencyHistExpr, where)
}

// Rebuild recounts rollup_hourly, rollup_daily (and the narrow daily rollups from it),
// rollup_cache_hourly and the load rollup (rollup_load_minute, and its daily peaks from it) from
// the raw attempts, with days counted in tz, and stores tz as the
// database's timezone, all in one transaction: use it to change the timezone, or to repair
// rollups. It first folds the rollup deltas pending in its snapshot (ingest.Fold), which it then
// recounts with the raw attempts; deltas committed after stay pending for the writers to fold
// afterwards, while ingest goes on. The fold lock it holds until it commits keeps every other
// rollup writer (the writers' folds, a reprice's deltas) waiting, but no reader: dashboards keep
// answering from the old rollups until it commits. Stop every ledgerd serving the database
// before changing the timezone, and start them with the new one.
//
// Months whose raw partitions were dropped for retention keep their rollups: hourly ones as they
// are; daily ones as they are when the timezone is unchanged, else recounted from the hourly ones,
// which is exact where local days begin on whole UTC hours and refused where they do not.
func Rebuild(ctx context.Context, pool *pgxpool.Pool, tz *time.Location) (RebuildResult, error) {
	res := RebuildResult{Timezone: tz.String()}
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		if _, err := ingest.Fold(ctx, tx); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `SELECT value FROM settings WHERE key = 'timezone'`).Scan(&res.Previous)
		if errors.Is(err, pgx.ErrNoRows) {
			res.Previous = time.UTC.String() // the writer's default
		} else if err != nil {
			return fmt.Errorf("read timezone: %w", err)
		}
		los, his, err := coveredRanges(ctx, tx)
		if err != nil {
			return err
		}
		lost, err := lostDays(ctx, tx, tz, los, his)
		if err != nil {
			return err
		}
		res.KeptDays = len(lost.all)
		changed := res.Previous != tz.String()
		if changed {
			for _, d := range lost.all {
				if !hourAligned(d.start(tz)) || !hourAligned(d.addDays(1).start(tz)) {
					return fmt.Errorf("cannot count days in %s: the raw attempts of %s were dropped, and that day does not begin and end on whole UTC hours there, so it cannot be recounted from the hourly rollups", tz, d)
				}
			}
		}
		keep := civilDays(lost.all)
		if changed {
			keep = []time.Time{}
		}
		steps := []step{
			{"clear hourly rollups", deleteHourlySQL, []any{los, his}},
			{"count hourly rollups", hourlySQL, nil},
			{"clear cache rollups", deleteCacheSQL, []any{los, his}},
			{"clear cache prefixes", deletePrefixesSQL, []any{los, his}},
			{"count cache prefixes", prefixesSQL, nil},
			{"count cache rollups", cacheSQL, nil},
			{"clear daily rollups", deleteDailySQL, []any{keep}},
			{"count daily rollups", dailySQL, []any{tz.String(), civilDays(lost.partial)}},
		}
		if changed && len(lost.all) > 0 {
			steps = append(steps, step{"recount kept days", dailyFromHourlySQL, []any{tz.String(), civilDays(lost.all)}})
		}
		steps = append(steps, narrowSQL...)
		steps = append(steps, step{"clear load minutes", rollup.LoadRebuildSQL[0], []any{los, his}},
			step{"count load minutes", rollup.LoadRebuildSQL[1], nil},
			step{"clear load peaks", rollup.LoadRebuildSQL[2], nil},
			step{"count load peaks", rollup.LoadRebuildSQL[3], []any{tz.String()}})
		steps = append(steps, step{"store timezone", setTimezoneSQL, []any{tz.String()}},
			step{"analyze rollups", analyzeRollupsSQL, nil})
		for _, st := range steps {
			if _, err := tx.Exec(ctx, st.sql, st.args...); err != nil {
				return fmt.Errorf("%s: %w", st.what, err)
			}
		}
		if err := tx.QueryRow(ctx, countRollupsSQL).Scan(&res.HourlyRows, &res.DailyRows, &res.CacheRows); err != nil {
			return fmt.Errorf("count rollups: %w", err)
		}
		return nil
	})
	if err != nil {
		return RebuildResult{}, fmt.Errorf("rebuild rollups: %w", err)
	}
	return res, nil
}

// coveredRanges returns the time ranges whose raw attempts exist: the months of the attempts
// partitions (named attempts_pYYYYMM by store), adjacent months merged.
func coveredRanges(ctx context.Context, tx pgx.Tx) (los, his []time.Time, err error) {
	rows, err := tx.Query(ctx, partitionsSQL)
	if err != nil {
		return nil, nil, fmt.Errorf("list partitions: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, nil, fmt.Errorf("list partitions: %w", err)
	}
	var months []time.Time
	for _, n := range names {
		m, err := time.Parse("200601", strings.TrimPrefix(n, "attempts_p"))
		if err != nil || !strings.HasPrefix(n, "attempts_p") {
			return nil, nil, fmt.Errorf("attempts partition %q is not a month of ledgerd's", n)
		}
		months = append(months, m)
	}
	slices.SortFunc(months, time.Time.Compare)
	for _, m := range months {
		end := m.AddDate(0, 1, 0)
		if n := len(his); n > 0 && his[n-1].Equal(m) {
			his[n-1] = end
			continue
		}
		los, his = append(los, m), append(his, end)
	}
	return los, his, nil
}

// lost are the local days touched by hours whose raw attempts were dropped: all of them, and those
// that also hold hours whose raw attempts exist (partial).
type lost struct{ all, partial []date }

func lostDays(ctx context.Context, tx pgx.Tx, tz *time.Location, los, his []time.Time) (lost, error) {
	rows, err := tx.Query(ctx, lostHoursSQL, los, his)
	if err != nil {
		return lost{}, fmt.Errorf("find dropped hours: %w", err)
	}
	hours, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return lost{}, fmt.Errorf("find dropped hours: %w", err)
	}
	var out lost
	seen := map[date]bool{}
	for _, h := range hours {
		for _, d := range []date{dateOf(h, tz), dateOf(h.Add(time.Hour-time.Nanosecond), tz)} {
			if seen[d] {
				continue
			}
			seen[d] = true
			out.all = append(out.all, d)
			start, end := d.start(tz), d.addDays(1).start(tz)
			for i := range los {
				if start.Before(his[i]) && los[i].Before(end) {
					out.partial = append(out.partial, d)
					break
				}
			}
		}
	}
	return out, nil
}

func civilDays(days []date) []time.Time {
	out := make([]time.Time, len(days))
	for i, d := range days {
		out[i] = d.civil()
	}
	return out
}
