// Package store owns ledgerd's PostgreSQL connection and the small tables around the ledger:
// projects and API keys, the series dictionary, price versions, settings and the monthly partitions
// of the attempts table.
package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Store is the shared handle on the database. It caches what never changes once written (series
// ids, price version ids, existing partitions), so the ingest path rarely asks for them.
type Store struct {
	Pool *pgxpool.Pool

	mu         sync.Mutex
	series     map[SeriesKey]int64
	partitions map[string]bool
	prices     map[string]int32
	// timeline and epoch follow the server the pool reaches (server.go); mu guards them too.
	timeline string
	epoch    uint64
}

// Open connects to the database at url, checks it answers, and returns a Store. The URL may name
// several hosts (a primary and its standbys, with target_session_attrs=read-write): should the
// pool reconnect to a promoted standby, the Store notices and forgets what it cached (Epoch).
func Open(ctx context.Context, url string, maxConns int32) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	s := newStore()
	cfg.AfterConnect = s.identify
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("reach database: %w", err)
	}
	s.Pool = pool
	return s, nil
}

// New wraps an existing pool. Such a Store does not follow failovers (see Open).
func New(pool *pgxpool.Pool) *Store {
	s := newStore()
	s.Pool = pool
	return s
}

func newStore() *Store {
	return &Store{
		series:     map[SeriesKey]int64{},
		partitions: map[string]bool{},
		prices:     map[string]int32{},
	}
}

// Close closes the pool.
func (s *Store) Close() { s.Pool.Close() }

// ErrNotFound reports a named row that does not exist.
var ErrNotFound = errors.New("not found")

// IsUnavailable tells whether err means the database could not be reached or could not finish the
// statement (connection refused or lost, shutdown, timeout, deadlock), as opposed to a statement it
// rejected. Callers answer such errors with 503 and Retry-After.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code[:2] {
		case "08", "53", "57": // connection exception, insufficient resources, operator intervention
			return true
		}
		return pgErr.Code == "40001" || pgErr.Code == "40P01"
	}
	return !errors.Is(err, pgx.ErrNoRows) && !errors.Is(err, ErrNotFound)
}

// Setting reads one value from the settings table.
func (s *Store) Setting(ctx context.Context, key string) (string, error) {
	var v string
	err := s.Pool.QueryRow(ctx, `SELECT value FROM settings WHERE key = $1`, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("setting %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("read setting %s: %w", key, err)
	}
	return v, nil
}

// SetSetting writes one value to the settings table.
func (s *Store) SetSetting(ctx context.Context, key, value string) error {
	_, err := s.Pool.Exec(ctx, `INSERT INTO settings (key, value) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value)
	if err != nil {
		return fmt.Errorf("write setting %s: %w", key, err)
	}
	return nil
}

// InitSetting stores value under key unless the key is already set, and returns the value in
// force. Replicas starting at once all get the value of whichever wrote first.
func (s *Store) InitSetting(ctx context.Context, key, value string) (string, error) {
	_, err := s.Pool.Exec(ctx, `INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, key, value)
	if err != nil {
		return "", fmt.Errorf("init setting %s: %w", key, err)
	}
	return s.Setting(ctx, key)
}
