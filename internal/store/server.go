package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// timelineSQL names the WAL history of the server a connection reached: the first eight hex digits
// of a WAL file's name are its timeline, which a standby's promotion starts anew. It is empty on a
// server still in recovery (a standby).
const timelineSQL = `SELECT CASE WHEN pg_is_in_recovery() THEN '' ELSE left(pg_walfile_name(pg_current_wal_lsn()), 8) END`

// ErrServerChanged reports a commit whose ids were looked up before the pool moved to another
// database server. IsUnavailable counts it, so the request is answered 503 and sent again, and
// the next try looks its ids up afresh.
var ErrServerChanged = errors.New("the database server changed (a failover) after this commit looked up its ids; they were forgotten, try again")

// identify is the pool's AfterConnect hook. It notes the timeline of the server each new
// connection reaches and, when it differs from the one before (a standby was promoted and the
// multi-host URL led the pool to it), forgets every cached series id, price version id and
// partition and starts a new epoch. An asynchronous standby may lack the old primary's last
// transactions, new series among them, and then hand their ids out again to other series: an id
// must not outlive the server that gave it.
func (s *Store) identify(ctx context.Context, conn *pgx.Conn) error {
	var timeline string
	if err := conn.QueryRow(ctx, timelineSQL).Scan(&timeline); err != nil {
		return fmt.Errorf("identify the database server: %w", err)
	}
	if timeline == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timeline != "" && s.timeline != timeline {
		s.epoch++
		clear(s.series)
		clear(s.prices)
		clear(s.partitions)
	}
	s.timeline = timeline
	return nil
}

// Epoch counts the times the pool moved to another server (a promoted standby) since the Store
// opened. A commit reads it before looking up its ids and checks it with SameServer once it holds
// the connection it commits on.
func (s *Store) Epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// SameServer returns ErrServerChanged when the pool moved to another server since Epoch returned
// epoch.
func (s *Store) SameServer(epoch uint64) error {
	if s.Epoch() != epoch {
		return ErrServerChanged
	}
	return nil
}
