package ingest

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerd/ledgerd/internal/rollup"
)

// An ingest commit adds its rollup deltas to the pending tables (migrations 00008 and 00009)
// instead of updating the rollups: plain inserts, with no rollup row to find and lock, so commits
// neither pay for the upserts nor wait for each other on the current hour's rows. A commit writes
// one row per UTC hour, local day and series key to pending_rollup_hourly, and its cache groups to
// pending_cache. Fold then adds everything pending to the rollups at once: many commits' deltas
// summed into one upsert per rollup row, the daily rollups summed from the same hourly rows. Each
// Writer folds a few times a second, and before a read asks it to (Sync).

// lockFoldSQL makes folds take turns: the writers' rollers, reprice and rebuild. It conflicts
// with nothing an ingest commit takes.
const lockFoldSQL = `LOCK TABLE rollup_fold_lock IN EXCLUSIVE MODE`

// foldSQL moves the pending deltas into the rollups, in two statements. The first sums the hourly
// rows it sees per hour and local day, deletes them, and adds those sums to rollup_hourly, and
// their sums per day to rollup_daily and, through each series' columns, to the narrow daily
// rollups; it returns how many rollup rows it wrote. The second folds the cache groups. Every
// upsert goes in key order, as every fold locks rows in it.
//
// Each statement reads the pending rows and deletes them in separate WITH items, not through
// DELETE … RETURNING: all parts of a statement share one snapshot, so the DELETE removes exactly the
// rows the sums read (rows committed meanwhile are invisible to both and wait for the next fold),
// and only a fold deletes pending rows, under the fold lock. Summing straight from the table,
// instead of from RETURNING's copy of every wide row, took a quarter off the fold (measured with
// psql on one fold's worth of pending rows: 250 ms of live ingest at 80,000 records/s).
var foldSQL = func() [2]string {
	var sums, set []string
	for _, s := range RollupSums {
		sums = append(sums, fmt.Sprintf("sum8(a.%s)", s.Col))
		set = append(set, fmt.Sprintf("%[1]s = r.%[1]s + excluded.%[1]s", s.Col))
	}
	sumsAs := summedAs(RollupSums)
	// upsert adds the sums of from (aliased a) to table, grouped by the select list keySel (the
	// table's key columns key, in order) unless each row of from is already one key's.
	upsert := func(table string, key, keySel []string, from string, grouped bool) string {
		group := ordinals(len(key))
		vals, hist, groupBy := strings.Join(sums, ", "), "hist_sum(a.latency_hist)", " GROUP BY "+strings.Join(group, ", ")
		if grouped {
			vals, hist, groupBy = strings.Join(prefixed("a.", sumCols(RollupSums)), ", "), "a.latency_hist", ""
		}
		return fmt.Sprintf(`INSERT INTO %[1]s AS r (%[2]s, %[3]s, latency_hist)
		SELECT %[4]s, %[5]s, %[6]s FROM %[7]s%[8]s ORDER BY %[9]s
		ON CONFLICT (%[2]s) DO UPDATE SET %[10]s, latency_hist = hist_merge(r.latency_hist, excluded.latency_hist)
		RETURNING 1`,
			table, strings.Join(key, ", "), strings.Join(sumCols(RollupSums), ", "), strings.Join(keySel, ", "), vals, hist,
			from, groupBy, strings.Join(group, ", "), strings.Join(set, ", "))
	}
	// a holds the pending rows summed per hour and day, b the same per day: the daily rollups are
	// summed from b, so a day's histogram is merged once, not once per rollup.
	steps := []string{
		upsert("rollup_hourly", RollupKey, prefixed("a.", RollupKey), "a", false),
		upsert("rollup_daily", RollupKey, prefixed("a.", RollupKey), "b a", true),
	}
	for _, d := range DailyBy {
		keySel := append(append([]string{"a.project_id", "a.bucket"}, prefixed("s.", d.Keep)...), "a.fallback", "a.status", "a.error_class")
		steps = append(steps, upsert(d.Table, d.Key(), keySel, "b a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id", false))
	}
	var ctes, counts []string
	for i, st := range steps {
		ctes = append(ctes, fmt.Sprintf("u%d AS (%s)", i, st))
		counts = append(counts, fmt.Sprintf("(SELECT count(*) FROM u%d)", i))
	}
	rollups := fmt.Sprintf(`WITH gone AS (DELETE FROM pending_rollup_hourly),
	a AS (SELECT %[1]s, %[2]s, hist_sum(latency_hist) AS latency_hist FROM pending_rollup_hourly GROUP BY %[1]s),
	b AS (SELECT project_id, day AS bucket, series_id, fallback, status, error_class, %[2]s,
		hist_sum(latency_hist) AS latency_hist FROM a GROUP BY 1, 2, 3, 4, 5, 6),
	%[3]s
	SELECT %[4]s`, strings.Join(pendingKey, ", "), strings.Join(sumsAs, ", "), strings.Join(ctes, ",\n\t"),
		strings.Join(counts, " + "))

	src := fmt.Sprintf(`SELECT %s, %s FROM pending_cache GROUP BY %s`,
		strings.Join(CacheKey, ", "), strings.Join(summedAs(CacheSums), ", "), strings.Join(ordinals(len(CacheKey)), ", "))
	return [2]string{rollups, "WITH gone AS (DELETE FROM pending_cache), " + cacheFoldCTEs(src) + " " + cacheFoldUpsert}
}()

// summedAs is each sum column summed into itself, as a fold's select list sums pending rows.
func summedAs(sums []Sum) []string {
	out := make([]string, len(sums))
	for i, s := range sums {
		out[i] = fmt.Sprintf("sum8(%[1]s) AS %[1]s", s.Col)
	}
	return out
}

// vacuumPendingSQL clears the pending tables of the rows folds deleted. Autovacuum looks at a
// database about once a minute, and a minute of backfill leaves hundreds of megabytes of dead rows
// that every fold's scan then reads (measured: 400 MB and folds of 1.5 s after 90 s at 23,000
// records/s over a week of history), so the writer vacuums them itself, about once a second while
// it folds.
const vacuumPendingSQL = `VACUUM (SKIP_LOCKED) pending_rollup_hourly, pending_cache, pending_load_minute`

// Fold adds every pending rollup delta tx sees to the rollups and removes it from the pending
// tables, after waiting for any other fold to finish, and returns how many rollup rows it wrote.
// Reprice and rebuild call it first in a REPEATABLE READ transaction, so the deltas they fold are
// exactly those of the attempts they read; deltas committed later stay pending for the next fold.
func Fold(ctx context.Context, tx pgx.Tx) (int64, error) {
	if _, err := tx.Exec(ctx, lockFoldSQL); err != nil {
		return 0, fmt.Errorf("lock rollup fold: %w", err)
	}
	b := &pgx.Batch{}
	b.Queue(foldSQL[0])
	b.Queue(foldSQL[1])
	b.Queue(rollup.LoadFoldSQL)
	res := tx.SendBatch(ctx, b)
	var rollups, loads int64
	if err := res.QueryRow().Scan(&rollups); err != nil {
		_ = res.Close()
		return 0, fmt.Errorf("fold pending rollups: %w", err)
	}
	tag, err := res.Exec()
	if err != nil {
		_ = res.Close()
		return 0, fmt.Errorf("fold pending cache groups: %w", err)
	}
	if err := res.QueryRow().Scan(&loads); err != nil {
		_ = res.Close()
		return 0, fmt.Errorf("fold pending load rows: %w", err)
	}
	if err := res.Close(); err != nil {
		return 0, fmt.Errorf("fold pending rollups: %w", err)
	}
	return rollups + tag.RowsAffected() + loads, nil
}
