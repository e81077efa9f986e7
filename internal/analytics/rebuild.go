package analytics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

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

// partitionsSQL lists the attempts partitions, to learn which months' raw attempts exist.
const partitionsSQL = `SELECT c.relname FROM pg_inherits i
	JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
	WHERE p.relname = 'attempts' AND p.relnamespace = current_schema()::regnamespace`

// Rebuild recounts rollup_hourly, rollup_daily (and the narrow daily rollups from it),
// rollup_cache_hourly and the load rollup (rollup_load_minute, and its daily peaks from it) from
// the raw attempts, with days counted in tz, and stores tz as the
// database's timezone, all in one transaction: use it to change the timezone, or to repair
// rollups. It first folds the rollup deltas pending in its snapshot (rollup.Fold), which it then
// recounts with the raw attempts; deltas committed after stay pending for the writers to fold
// afterwards, while ingest goes on. The fold lock it holds until it commits keeps every other
// rollup writer (the writers' folds, a reprice's deltas) waiting, but no reader: dashboards keep
// answering from the old rollups until it commits. Stop every ledgerd serving the database
// before changing the timezone, and start them with the new one.
//
// Months whose raw partitions were dropped for retention keep their rollups: hourly ones as they
// are; daily ones as they are when the timezone is unchanged, else recounted from the hourly ones,
// which is exact where local days begin on whole UTC hours and refused where they do not, or where
// rollup_hourly pruned the days' hours (rollup.Prune).
func Rebuild(ctx context.Context, pool *pgxpool.Pool, tz *time.Location) (RebuildResult, error) {
	res := RebuildResult{Timezone: tz.String()}
	err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
		if _, err := rollup.Fold(ctx, tx); err != nil {
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
		pruned, err := prunedBefore(ctx, tx)
		if err != nil {
			return err
		}
		changed := res.Previous != tz.String()
		if changed {
			for _, d := range lost.all {
				if d.start(tz).Before(pruned) {
					return fmt.Errorf("cannot count days in %s: the raw attempts of %s were dropped, and its hours by series were pruned after %d days (rollup.HourlyKeep), so it cannot be recounted in another timezone", tz, d, int(rollup.HourlyKeep/(24*time.Hour)))
				}
				if !hourAligned(d.start(tz)) || !hourAligned(d.addDays(1).start(tz)) {
					return fmt.Errorf("cannot count days in %s: the raw attempts of %s were dropped, and that day does not begin and end on whole UTC hours there, so it cannot be recounted from the hourly rollups", tz, d)
				}
			}
		}
		r := rollup.Recount{CoveredFrom: los, CoveredTo: his, Timezone: tz.String(),
			KeepDays: civilDays(lost.all), Partial: civilDays(lost.partial)}
		if changed {
			r.KeepDays, r.FromHourly = []time.Time{}, civilDays(lost.all)
		}
		for _, st := range rollup.RebuildSteps(r) {
			if _, err := tx.Exec(ctx, st.SQL, st.Args...); err != nil {
				return fmt.Errorf("%s: %w", st.What, err)
			}
		}
		if err := tx.QueryRow(ctx, rollup.CountSQL).Scan(&res.HourlyRows, &res.DailyRows, &res.CacheRows); err != nil {
			return fmt.Errorf("count rollups: %w", err)
		}
		return nil
	})
	if err != nil {
		return RebuildResult{}, fmt.Errorf("rebuild rollups: %w", err)
	}
	return res, nil
}

// prunedBefore is the hour before which rollup_hourly holds nothing (rollup.Prune); the zero
// time when it was never pruned.
func prunedBefore(ctx context.Context, tx pgx.Tx) (time.Time, error) {
	var t pgtype.Timestamptz
	if err := tx.QueryRow(ctx, `SELECT `+rollup.PrunedBeforeSQL).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("read the pruned hours: %w", err)
	}
	if !t.Valid || t.InfinityModifier != pgtype.Finite {
		return time.Time{}, nil
	}
	return t.Time, nil
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
	rows, err := tx.Query(ctx, rollup.LostHoursSQL, los, his)
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
