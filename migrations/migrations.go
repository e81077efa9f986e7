// Package migrations holds ledgerd's SQL schema migrations, embedded in the binary, and applies
// them with goose under a Postgres session lock so several replicas can start at once.
package migrations

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed *.sql
var files embed.FS

// provider opens a goose provider over the pool; the caller closes the returned *sql.DB.
func provider(pool *pgxpool.Pool) (*goose.Provider, *sql.DB, error) {
	db := stdlib.OpenDBFromPool(pool)
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migration lock: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, files, goose.WithSessionLocker(locker))
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migration provider: %w", err)
	}
	return p, db, nil
}

// Up applies every pending migration and returns the resulting schema version.
func Up(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	p, db, err := provider(pool)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	if _, err := p.Up(ctx); err != nil {
		return 0, fmt.Errorf("apply migrations: %w", err)
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// Down rolls back the most recent migration; tests use it to prove migrations reverse cleanly.
func Down(ctx context.Context, pool *pgxpool.Pool) error {
	p, db, err := provider(pool)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := p.Down(ctx); err != nil {
		return fmt.Errorf("roll back migration: %w", err)
	}
	return nil
}

// Versions reports the schema version of the database and the latest one this binary knows.
func Versions(ctx context.Context, pool *pgxpool.Pool) (current, latest int64, err error) {
	p, db, err := provider(pool)
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	current, latest, err = p.GetVersions(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("read schema versions: %w", err)
	}
	return current, latest, nil
}

// Checksum identifies the set of embedded migrations, so test helpers can cache a database
// template per schema.
func Checksum() string {
	h := sha256.New()
	entries, _ := fs.ReadDir(files, ".")
	for _, e := range entries {
		b, _ := fs.ReadFile(files, e.Name())
		h.Write([]byte(e.Name()))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
