package ingest

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// An ingest commit adds its rollup deltas to the pending tables (migration 00008) instead of
// updating the rollups: plain inserts, with no rollup row to find and lock, so commits neither
// pay for the upserts nor wait for each other on the current hour's rows. Fold then adds
// everything pending to the rollups at once, many commits' deltas summed into one upsert per
// rollup row. Each Writer folds a few times a second, and before a read asks it to (Sync).

// lockFoldSQL makes folds take turns: the writers' rollers, reprice and rebuild. It conflicts
// with nothing an ingest commit takes.
const lockFoldSQL = `LOCK TABLE rollup_fold_lock IN EXCLUSIVE MODE`

// foldSQL moves the pending deltas into the rollups, one statement per rollup: each deletes the
// pending rows it sees and adds their sums to the rollup, in key order as every fold locks them.
var foldSQL = func() []string {
	var out []string
	for _, t := range rollupTables {
		var keys, sums, set []string
		for _, k := range t.key {
			keys = append(keys, k.col)
		}
		for _, s := range RollupSums {
			sums = append(sums, fmt.Sprintf("sum8(%s)", s.Col))
			set = append(set, fmt.Sprintf("%s = r.%s + excluded.%s", s.Col, s.Col, s.Col))
		}
		out = append(out, fmt.Sprintf(`WITH d AS (DELETE FROM %[1]s RETURNING *)
		INSERT INTO %[2]s AS r (%[3]s, %[4]s, latency_hist)
		SELECT %[3]s, %[5]s, hist_sum(latency_hist) FROM d GROUP BY %[3]s ORDER BY %[3]s
		ON CONFLICT (%[3]s) DO UPDATE SET %[6]s,
			latency_hist = hist_merge(r.latency_hist, excluded.latency_hist)`,
			t.pending(), t.table, strings.Join(keys, ", "), colNames(RollupSums), strings.Join(sums, ", "),
			strings.Join(set, ", ")))
	}
	var sums []string
	for _, s := range CacheSums {
		sums = append(sums, fmt.Sprintf("sum8(%s) AS %s", s.Col, s.Col))
	}
	src := fmt.Sprintf(`SELECT project_id, bucket, series_id, fallback, prompt_hash, %s FROM pend GROUP BY 1, 2, 3, 4, 5`,
		strings.Join(sums, ", "))
	return append(out, "WITH pend AS (DELETE FROM pending_cache RETURNING *), "+cacheFoldCTEs(src)+" "+cacheFoldUpsert)
}()

func colNames(sums []Sum) string {
	var out []string
	for _, s := range sums {
		out = append(out, s.Col)
	}
	return strings.Join(out, ", ")
}

// vacuumPendingSQL clears the pending tables of the rows folds deleted. Autovacuum looks at a
// database about once a minute, and a minute of backfill leaves hundreds of megabytes of dead rows
// that every fold's scan then reads (measured: 400 MB and folds of 1.5 s after 90 s at 23,000
// records/s over a week of history), so the writer vacuums them itself, about once a second while
// it folds.
var vacuumPendingSQL = func() string {
	tables := []string{"pending_cache"}
	for _, t := range rollupTables {
		tables = append(tables, t.pending())
	}
	return "VACUUM (SKIP_LOCKED) " + strings.Join(tables, ", ")
}()

// Fold adds every pending rollup delta tx sees to the rollups and removes it from the pending
// tables, after waiting for any other fold to finish, and returns how many rollup rows it wrote.
// Reprice and rebuild call it first in a REPEATABLE READ transaction, so the deltas they fold are
// exactly those of the attempts they read; deltas committed later stay pending for the next fold.
func Fold(ctx context.Context, tx pgx.Tx) (int64, error) {
	if _, err := tx.Exec(ctx, lockFoldSQL); err != nil {
		return 0, fmt.Errorf("lock rollup fold: %w", err)
	}
	b := &pgx.Batch{}
	for _, s := range foldSQL {
		b.Queue(s)
	}
	res := tx.SendBatch(ctx, b)
	var n int64
	for range foldSQL {
		tag, err := res.Exec()
		if err != nil {
			_ = res.Close()
			return 0, fmt.Errorf("fold pending rollups: %w", err)
		}
		n += tag.RowsAffected()
	}
	if err := res.Close(); err != nil {
		return 0, fmt.Errorf("fold pending rollups: %w", err)
	}
	return n, nil
}
