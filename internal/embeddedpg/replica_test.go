package embeddedpg

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestStandbyKillPromote copies a running server into a hot standby (ReplicaOf), checks that it
// streams, kills the primary as a crash would, promotes the standby and writes to it.
func TestStandbyKillPromote(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	primaryDir := filepath.Join(t.TempDir(), "primary")
	primary := startServer(t, primaryDir)
	if err := seed(ctx, primary.URL()); err != nil {
		t.Fatalf("seed: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "standby")
	standby, err := Start(ctx, Options{Dir: dir, ReplicaOf: primary.URL(), Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("Start standby: %v", err)
	}
	t.Cleanup(func() { _ = standby.Stop(t.Context()) })
	if got := keptNotes(t, standby.URL()); !slices.Equal(got, []string{"first run"}) {
		t.Errorf("rows on the standby: %q, want the primary's", got)
	}
	// The password stays off the command line, and the standby streams with it from the file
	// pg_basebackup -R wrote.
	conf, err := os.ReadFile(filepath.Join(dir, "postgres", "data", "postgresql.auto.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), "primary_conninfo") {
		t.Errorf("postgresql.auto.conf has no primary_conninfo:\n%s", conf)
	}

	p, err := pgx.Connect(ctx, primary.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, `INSERT INTO kept (note) VALUES ('streamed')`); err != nil {
		t.Fatal(err)
	}
	var lsn string
	if err := p.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	_ = p.Close(ctx)
	s, err := pgx.Connect(ctx, standby.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close(ctx) }()
	for deadline := time.Now().Add(20 * time.Second); ; {
		var replayed, inRecovery bool
		if err := s.QueryRow(ctx, `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn, pg_is_in_recovery()`, lsn).Scan(&replayed, &inRecovery); err != nil {
			t.Fatal(err)
		}
		if !inRecovery {
			t.Fatal("the standby is not in recovery")
		}
		if replayed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby did not replay %s within 20 s", lsn)
		}
		time.Sleep(20 * time.Millisecond)
	}

	if err := primary.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if err := primary.Stop(ctx); err != nil {
		t.Errorf("Stop after Kill: %v, want Kill's nil", err)
	}
	checkNoProcesses(t, filepath.Join(primaryDir, "postgres", "data"))
	var promoted bool
	if err := s.QueryRow(ctx, `SELECT pg_promote(wait => true)`).Scan(&promoted); err != nil || !promoted {
		t.Fatalf("promote: %v, %v", promoted, err)
	}
	if _, err := s.Exec(ctx, `INSERT INTO kept (note) VALUES ('after failover')`); err != nil {
		t.Fatalf("write to the promoted standby: %v", err)
	}
	if got := keptNotes(t, standby.URL()); !slices.Equal(got, []string{"first run", "streamed", "after failover"}) {
		t.Errorf("rows after failover: %q", got)
	}
}

// checkNoProcesses fails if any postgres process still works in dataDir.
func checkNoProcesses(t *testing.T, dataDir string) {
	t.Helper()
	real, err := filepath.EvalSymlinks(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := clusterProcesses(real)
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) > 0 {
		t.Errorf("postgres processes %v still run in %s after Kill", pids, real)
	}
}
