package rollup

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Hourly detail is coarsened after a few days (migration 00032). rollup_hourly keeps each hour per
// series shape: on a ledger of many services and models about 0.65 rows an attempt, as many as
// the raw table when kept for good. Prune deletes its hours older than HourlyKeep and a day; the
// narrow hourly rollups (HourlyBy: per provider and model) keep every hour, and rollup_daily and
// the narrow daily rollups every day. A question that needs a shape's hours from further back than
// HourlyKeep reads whole days instead (analytics rounds its range outward to local midnights) or,
// grouped by hour, the raw attempts.

// HourlyKeep is how far back rollup_hourly surely holds every hour: 8 days, so that the week the
// dashboard shows by default, the alert windows and the hourly charts of the last days all find
// their hours.
const HourlyKeep = 8 * 24 * time.Hour

// pruneSlack is how much longer than HourlyKeep a pruned hour was kept: a reader that chose
// rollup_hourly by its own clock a moment before still finds the hours it planned on.
const pruneSlack = 24 * time.Hour

// PrunedBeforeSQL is the hour before which rollup_hourly holds nothing, as Prune recorded it in
// settings ('-infinity' before any prune): a fold, a rebuild and a reprice leave those hours out,
// so a late attempt does not bring back part of an hour.
const PrunedBeforeSQL = `coalesce((SELECT value::timestamptz FROM settings WHERE key = 'hourly_pruned_before'), '-infinity')`

// pruneChunk is how many rows of each pruned rollup one prune transaction deletes at most.
const pruneChunk = 20_000

// pruneSQL records the cutoff $1 in settings key (never moving it back) and deletes up to $2 of
// table's rows older than it, returning how many it deleted.
func pruneSQL(key, table string) string {
	return `WITH cut AS (
		INSERT INTO settings (key, value) VALUES ('` + key + `', $1::timestamptz::text)
		ON CONFLICT (key) DO UPDATE SET value = greatest(settings.value::timestamptz, excluded.value::timestamptz)::text
	), gone AS (
		DELETE FROM ` + table + ` WHERE ctid = ANY(ARRAY(SELECT ctid FROM ` + table + ` WHERE bucket < $1 LIMIT $2))
		RETURNING 1
	)
	SELECT count(*) FROM gone`
}

// The prunes of rollup_hourly (its cutoff PrunedBeforeSQL) and rollup_minute5 (MinutesFromSQL).
var (
	pruneHoursSQL   = pruneSQL("hourly_pruned_before", "rollup_hourly")
	pruneMinutesSQL = pruneSQL("minutes_from", "rollup_minute5")
)

// PruneCutoff is the hour before which Prune, run at now, deletes rollup_hourly's rows.
func PruneCutoff(now time.Time) time.Time {
	return now.Add(-HourlyKeep - pruneSlack).UTC().Truncate(time.Hour)
}

// PruneChunk deletes up to pruneChunk of rollup_hourly's rows before PruneCutoff(now), and as many
// of rollup_minute5's before MinutesCutoff(now), and records the cutoffs, in tx, after waiting for
// any other fold to finish (it takes the fold lock for the rest of tx: no fold, reprice or rebuild
// works on the rows meanwhile). It returns how many rows it deleted and whether more may be left.
func PruneChunk(ctx context.Context, tx pgx.Tx, now time.Time) (int64, bool, error) {
	if err := lockFold(ctx, tx); err != nil {
		return 0, false, err
	}
	cut := PruneCutoff(now)
	var n, m int64
	if err := tx.QueryRow(ctx, pruneHoursSQL, cut, pruneChunk).Scan(&n); err != nil {
		return 0, false, fmt.Errorf("prune hourly rollups before %s: %w", cut.Format(time.RFC3339), err)
	}
	mcut := MinutesCutoff(now)
	if err := tx.QueryRow(ctx, pruneMinutesSQL, mcut, pruneChunk).Scan(&m); err != nil {
		return 0, false, fmt.Errorf("prune 5-minute rollup before %s: %w", mcut.Format(time.RFC3339), err)
	}
	return n + m, n == pruneChunk || m == pruneChunk, nil
}

// Prune runs PruneChunk until nothing is left, then SummarizeCacheDays (SummarizeAllCacheDays),
// each chunk in a transaction of its own, as a writer's folder does, and returns how many rows it
// deleted.
func Prune(ctx context.Context, pool *pgxpool.Pool, now time.Time) (int64, error) {
	var total int64
	err := inChunks(ctx, pool, func(tx pgx.Tx) (bool, error) {
		n, more, err := PruneChunk(ctx, tx, now)
		total += n
		return more, err
	})
	if err != nil {
		return total, err
	}
	return total, SummarizeAllCacheDays(ctx, pool, now)
}

// SummarizeAllCacheDays runs SummarizeCacheDays until no noted day whose hour is over at now is
// left, each chunk in a transaction of its own.
func SummarizeAllCacheDays(ctx context.Context, pool *pgxpool.Pool, now time.Time) error {
	return inChunks(ctx, pool, func(tx pgx.Tx) (more bool, err error) {
		_, more, err = SummarizeCacheDays(ctx, tx, now)
		return more, err
	})
}

// inChunks runs chunk, each time in a transaction of its own, until it says no more is left.
func inChunks(ctx context.Context, pool *pgxpool.Pool, chunk func(pgx.Tx) (bool, error)) error {
	for more := true; more; {
		if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) (err error) {
			more, err = chunk(tx)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}
