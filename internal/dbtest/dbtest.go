// Package dbtest gives each test its own PostgreSQL database, copied from a migrated template, on
// the server named by DATABASE_URL. Tests never mock the database and never skip without one.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/migrations"
)

// DefaultURL is the server tests use when DATABASE_URL is unset: the local one every developer
// machine and CI run has.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// BaseURL returns DATABASE_URL or DefaultURL.
func BaseURL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// New returns a pool on a new database holding the current schema; the database is dropped when
// the test ends.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	u := NewURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		t.Fatalf("dbtest: connect: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Kept returns a pool on the database at url, migrated, and the number of attempts it holds: for
// benchmarks whose ledger takes long to load, loaded once into a database of its own and kept for
// later runs. The pool is closed when the test ends; the database stays.
func Kept(t testing.TB, url string) (*pgxpool.Pool, int) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatalf("dbtest: connect: %v", err)
	}
	t.Cleanup(pool.Close)
	if _, err := migrations.Up(ctx, pool); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM attempts`).Scan(&n); err != nil {
		t.Fatalf("dbtest: count attempts: %v", err)
	}
	return pool, n
}

// NewURL creates a new migrated database and returns its URL, for tests that start the whole
// service; the database is dropped when the test ends.
func NewURL(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	templateOnce.Do(func() { templateName, templateErr = ensureTemplate(ctx) })
	if templateErr != nil {
		t.Fatalf("dbtest: %v", templateErr)
	}
	name := "ledgerd_t_" + randomHex(8)
	admin, err := pgx.Connect(ctx, BaseURL())
	if err != nil {
		t.Fatalf("dbtest: connect to %s: %v (is PostgreSQL running? set DATABASE_URL)", redact(BaseURL()), err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, templateName)); err != nil {
		t.Fatalf("dbtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, BaseURL())
		if err != nil {
			t.Errorf("dbtest: connect for cleanup: %v", err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
			t.Errorf("dbtest: drop database %s: %v", name, err)
		}
	})
	return withDatabase(BaseURL(), name)
}

// ensureTemplate creates, once per schema version and under an advisory lock shared by all test
// processes, a migrated database to copy.
func ensureTemplate(ctx context.Context) (string, error) {
	name := "ledgerd_tmpl_" + migrations.Checksum()
	admin, err := pgx.Connect(ctx, BaseURL())
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w (is PostgreSQL running? set DATABASE_URL)", redact(BaseURL()), err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock(74210001)"); err != nil {
		return "", fmt.Errorf("lock template: %w", err)
	}
	defer admin.Exec(context.Background(), "SELECT pg_advisory_unlock(74210001)")
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("look up template: %w", err)
	}
	if exists {
		return name, nil
	}
	building := name + "_build"
	if _, err := admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", building)); err != nil {
		return "", fmt.Errorf("drop stale template: %w", err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return "", fmt.Errorf("create template: %w", err)
	}
	pool, err := pgxpool.New(ctx, withDatabase(BaseURL(), building))
	if err != nil {
		return "", fmt.Errorf("connect to template: %w", err)
	}
	_, err = migrations.Up(ctx, pool)
	pool.Close()
	if err != nil {
		return "", fmt.Errorf("migrate template: %w", err)
	}
	if _, err := admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", building, name)); err != nil {
		return "", fmt.Errorf("publish template: %w", err)
	}
	return name, nil
}

func withDatabase(base, name string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	u.Path = "/" + name
	return u.String()
}

func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "DATABASE_URL"
	}
	return u.Redacted()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
