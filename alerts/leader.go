package alerts

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// leaderLock is the advisory lock key the evaluating replica holds. Advisory locks are scoped to
// one database, so replicas of different ledgers on one server do not contend. (74210001 and
// 74210002 are taken by dbtest and partition DDL.)
const leaderLock = 74210003

// leaderSQL tells whether this session holds the lock: a bigint advisory key shows in pg_locks as
// classid (high half), objid (low half) and objsubid 1.
const leaderSQL = `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
	AND classid = 0 AND objid = $1 AND objsubid = 1 AND granted)`

// leader elects one evaluating replica through Postgres: the replica whose dedicated session holds
// pg_try_advisory_lock(leaderLock) leads. The session is taken out of the pool, so the lock lives
// exactly as long as that connection: if it breaks or the server ends it, the lock is gone and
// another replica takes over on its next try.
type leader struct {
	pool *pgxpool.Pool

	mu   sync.Mutex
	conn *pgx.Conn
}

// check re-confirms leadership, or tries to take it. It returns true only when this replica holds
// the lock on a live session now.
func (l *leader) check(ctx context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		var held bool
		err := l.conn.QueryRow(ctx, leaderSQL, leaderLock).Scan(&held)
		if err == nil && held {
			return true, nil
		}
		l.dropLocked(ctx)
		if err != nil && ctx.Err() != nil {
			return false, fmt.Errorf("check leadership: %w", err)
		}
	}
	c, err := l.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("acquire leader session: %w", err)
	}
	var got bool
	if err := c.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(leaderLock)).Scan(&got); err != nil {
		c.Release()
		return false, fmt.Errorf("try leader lock: %w", err)
	}
	if !got {
		c.Release()
		return false, nil
	}
	l.conn = c.Hijack()
	return true, nil
}

// isLeader reports whether this replica held the lock at its last check.
func (l *leader) isLeader() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conn != nil
}

// release gives up leadership by closing the session, which drops the lock.
func (l *leader) release(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropLocked(ctx)
}

func (l *leader) dropLocked(ctx context.Context) {
	if l.conn != nil {
		// Unlock first: the server frees a closed session's locks only once it notices, and a
		// replica waiting to take over should not wait for that.
		_, _ = l.conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, int64(leaderLock))
		_ = l.conn.Close(ctx)
		l.conn = nil
	}
}
