package migrations_test

import (
	"context"
	"testing"

	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/migrations"
)

// TestUpDownUp proves every migration reverses cleanly: roll the whole schema back to nothing on a
// migrated database, then apply it again.
func TestUpDownUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	cur, latest, err := migrations.Versions(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if cur != latest || latest < 1 {
		t.Fatalf("fresh test database at version %d, latest %d", cur, latest)
	}
	for v := cur; v > 0; v-- {
		if err := migrations.Down(ctx, pool); err != nil {
			t.Fatalf("down from %d: %v", v, err)
		}
	}
	var tables int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'goose_db_version'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Fatalf("%d tables left after rolling back every migration", tables)
	}
	got, err := migrations.Up(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if got != latest {
		t.Fatalf("up again reached %d, want %d", got, latest)
	}
}
