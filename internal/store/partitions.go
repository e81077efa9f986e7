package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
// Known partitions are cached, so the ingest path pays for DDL once per month; PartitionsAhead
// makes it rarer still, creating the month's partition before its first record.
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
	return s.createPartitions(ctx, missing, 0)
}

// PartitionsAhead creates the partitions of the month holding now and of the next one when they
// are missing, so that a month's first commit finds its partition made. Creating a partition
// locks the whole attempts table, so it waits for every query reading attempts to end, and every
// query and commit after it waits for it: on the ingest path at midnight of the 1st, behind a
// long read, that would stall ingest. PartitionsAhead waits at most lockWait for that lock and
// fails then, for the caller to try again later (a month ahead leaves weeks to do so).
func (s *Store) PartitionsAhead(ctx context.Context, now time.Time, lockWait time.Duration) error {
	names, err := s.Partitions(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	for _, n := range names {
		s.partitions[n] = true
	}
	var missing []time.Time
	this := monthStart(now)
	for _, m := range []time.Time{this, this.AddDate(0, 1, 0)} {
		if !s.partitions[PartitionName(m)] {
			missing = append(missing, m)
		}
	}
	s.mu.Unlock()
	return s.createPartitions(ctx, missing, lockWait)
}

// createPartitions creates the partitions of the given months (first instants, UTC) and caches
// their names. A lockWait above zero bounds each wait for a lock; zero waits as long as ctx.
func (s *Store) createPartitions(ctx context.Context, months []time.Time, lockWait time.Duration) error {
	if len(months) == 0 {
		return nil
	}
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if lockWait > 0 {
			if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", lockWait.Milliseconds())); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, partitionLock); err != nil {
			return err
		}
		for _, m := range months {
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
	for _, m := range months {
		s.partitions[PartitionName(m)] = true
	}
	s.mu.Unlock()
	return nil
}

// ForgetPartitions empties the cache of known partitions, so the next EnsurePartitions makes
// sure of each month again. A writer calls it when a commit found a cached partition gone: another
// process (`ledgerd partitions drop`) dropped that month.
func (s *Store) ForgetPartitions() {
	s.mu.Lock()
	clear(s.partitions)
	s.mu.Unlock()
}

// IsNoPartition tells whether err is PostgreSQL refusing a row of attempts for want of a
// partition of its month.
func IsNoPartition(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23514" && strings.HasPrefix(pgErr.Message, "no partition of relation")
}

// Partitions lists the attempts partitions that exist, oldest first.
func (s *Store) Partitions(ctx context.Context) ([]string, error) {
	parts, err := s.partitionList(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range parts {
		if p.attached {
			names = append(names, p.name)
		}
	}
	return names, nil
}

// partition is a month's table of attempts: attached while it is a partition (a detach of it
// may be pending), not once a detach of it committed but its drop did not.
type partition struct {
	name     string
	attached bool
}

// partitionList lists the months' tables of attempts (attempts_pYYYYMM), oldest first: the
// partitions, and the tables a drop detached and was interrupted before dropping.
func (s *Store) partitionList(ctx context.Context) ([]partition, error) {
	rows, err := s.Pool.Query(ctx, `SELECT c.relname, i.inhrelid IS NOT NULL FROM pg_class c
		LEFT JOIN pg_inherits i ON i.inhrelid = c.oid AND i.inhparent = 'attempts'::regclass
		WHERE c.relkind = 'r' AND c.relname ~ '^attempts_p[0-9]{6}$'
			AND c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = 'attempts'::regclass)
		ORDER BY c.relname`)
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	parts, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (partition, error) {
		var p partition
		return p, r.Scan(&p.name, &p.attached)
	})
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	return parts, nil
}

// DropPartitionsBefore drops the raw attempts of every month that ends on or before cutoff, for
// retention. Rollups are kept, so summaries over those months stay exact; only raw rows go.
//
// Each month is detached with DETACH PARTITION … CONCURRENTLY before it is dropped: dropping a
// partition still attached would lock all of attempts until every read of it ends, and every
// commit and read after it would queue behind that lock. Detaching concurrently waits for those
// reads without blocking anyone. A detach left half done (the command interrupted) is finished
// by the next run, and a month detached but not dropped is dropped by it.
func (s *Store) DropPartitionsBefore(ctx context.Context, cutoff time.Time) ([]string, error) {
	parts, err := s.partitionList(ctx)
	if err != nil {
		return nil, err
	}
	limit := PartitionName(monthStart(cutoff))
	var dropped []string
	for _, p := range parts {
		if p.name >= limit {
			continue
		}
		if err := s.dropPartition(ctx, p.name); err != nil {
			return dropped, fmt.Errorf("drop %s: %w", p.name, err)
		}
		s.mu.Lock()
		delete(s.partitions, p.name)
		s.mu.Unlock()
		dropped = append(dropped, p.name)
	}
	return dropped, nil
}

// dropPartition detaches the partition name concurrently (or finishes a pending detach), then
// drops it, holding the partition lock on one connection: DETACH … CONCURRENTLY cannot run in a
// transaction, so the lock is a session lock. The table's state is read under the lock: a drop
// interrupted while its detach waited can still finish that detach before its session ends and
// lets the lock go, so a state listed before the lock may be stale.
func (s *Store) dropPartition(ctx context.Context, name string) (err error) {
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, partitionLock); err != nil {
		return err
	}
	defer func() {
		if _, uerr := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, partitionLock); uerr != nil {
			conn.Conn().Close(context.WithoutCancel(ctx)) // closing the session releases its lock
			err = errors.Join(err, uerr)
		}
	}()
	ident := pgx.Identifier{name}.Sanitize()
	var pending bool
	err = conn.QueryRow(ctx, `SELECT inhdetachpending FROM pg_inherits
		WHERE inhrelid = to_regclass($1) AND inhparent = 'attempts'::regclass`, ident).Scan(&pending)
	var detach string
	switch {
	case errors.Is(err, pgx.ErrNoRows): // detached already: only the drop is left
	case err != nil:
		return fmt.Errorf("detach: %w", err)
	case pending:
		detach = "ALTER TABLE attempts DETACH PARTITION " + ident + " FINALIZE"
	default:
		detach = "ALTER TABLE attempts DETACH PARTITION " + ident + " CONCURRENTLY"
	}
	if detach != "" {
		if _, err := conn.Exec(ctx, detach); err != nil {
			return fmt.Errorf("detach: %w", err)
		}
	}
	if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+ident); err != nil {
		return err
	}
	return nil
}
