package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// partitionLock serialises partition DDL across replicas.
const partitionLock = 74210002

// PartitionName is the name of the monthly attempts partition holding t.
func PartitionName(t time.Time) string {
	return "attempts_p" + t.UTC().Format("200601")
}

func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// EnsurePartitions creates the monthly partitions that rows started at the given times need.
// Known partitions are cached, so the ingest path pays for DDL once per month.
func (s *Store) EnsurePartitions(ctx context.Context, times ...time.Time) error {
	var missing []time.Time
	s.mu.Lock()
	seen := map[string]bool{}
	var last time.Time
	for _, t := range times {
		// A commit's records mostly fall in one month: only a change of month costs a name.
		month := monthStart(t)
		if month.Equal(last) {
			continue
		}
		last = month
		name := PartitionName(t)
		if !s.partitions[name] && !seen[name] {
			seen[name] = true
			missing = append(missing, month)
		}
	}
	s.mu.Unlock()
	if len(missing) == 0 {
		return nil
	}
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, partitionLock); err != nil {
			return err
		}
		for _, m := range missing {
			name := PartitionName(m)
			sql := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s PARTITION OF attempts FOR VALUES FROM ('%s') TO ('%s')`,
				name, m.Format(time.RFC3339), m.AddDate(0, 1, 0).Format(time.RFC3339))
			if _, err := tx.Exec(ctx, sql); err != nil {
				return fmt.Errorf("create %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ensure partitions: %w", err)
	}
	s.mu.Lock()
	for _, m := range missing {
		s.partitions[PartitionName(m)] = true
	}
	s.mu.Unlock()
	return nil
}

// Partitions lists the attempts partitions that exist, oldest first.
func (s *Store) Partitions(ctx context.Context) ([]string, error) {
	rows, err := s.Pool.Query(ctx, `SELECT c.relname FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
		WHERE p.relname = 'attempts' ORDER BY c.relname`)
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	return names, nil
}

// DropPartitionsBefore drops the raw attempts of every month that ends on or before cutoff, for
// retention. Rollups are kept, so summaries over those months stay exact; only raw rows go.
func (s *Store) DropPartitionsBefore(ctx context.Context, cutoff time.Time) ([]string, error) {
	names, err := s.Partitions(ctx)
	if err != nil {
		return nil, err
	}
	limit := PartitionName(monthStart(cutoff))
	var dropped []string
	for _, n := range names {
		if !strings.HasPrefix(n, "attempts_p") || n >= limit {
			continue
		}
		err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, partitionLock); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "DROP TABLE "+pgx.Identifier{n}.Sanitize())
			return err
		})
		if err != nil {
			return dropped, fmt.Errorf("drop %s: %w", n, err)
		}
		s.mu.Lock()
		delete(s.partitions, n)
		s.mu.Unlock()
		dropped = append(dropped, n)
	}
	return dropped, nil
}
