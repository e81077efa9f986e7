package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/migrations"
)

// TestStandby runs a primary and an asynchronous streaming standby of the test's own, and checks in
// turn where reads go (the standby once it replayed the primary's writes; the primary when it
// lags past the wait or cannot be reached), the replay lag metrics, and that a Store whose
// multi-host URL follows a failover to a standby lacking the primary's last transactions does not
// keep the ids it had cached from the old primary.
func TestStandby(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := dbtest.StartServer(t)
	direct := func(s *dbtest.Server) *pgxpool.Pool {
		p, err := pgxpool.New(ctx, s.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	if _, err := migrations.Up(ctx, direct(primary)); err != nil {
		t.Fatal(err)
	}
	standby := dbtest.StartStandby(t, primary, false)
	st, err := store.Open(ctx, dbtest.MultiHostURL("read-write", primary, standby), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	reg := prometheus.NewRegistry()
	const maxWait = 2 * time.Second // long enough for a loaded machine to replay a setting
	reads, err := store.OpenReads(st.Pool, standby.URL(), store.ReadOptions{MaxWait: maxWait, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reads.Close)
	onStandby := direct(standby)
	n := 0
	// read writes one more setting on the primary, then reads it back through reads and tells
	// whether the connection was the standby's and whether it saw the write.
	read := func() (fromStandby, saw bool, took time.Duration) {
		t.Helper()
		n++
		want := strings.Repeat("x", n)
		if err := st.SetSetting(ctx, "standby-test", want); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		conn, err := reads.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		took = time.Since(start)
		defer conn.Release()
		var got string
		if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery(), (SELECT value FROM settings WHERE key = 'standby-test')`).Scan(&fromStandby, &got); err != nil {
			t.Fatal(err)
		}
		return fromStandby, got == want, took
	}
	count := func(server, reason string) float64 { return counter(t, reg, server, reason) }

	// A standby that keeps up serves every read, each seeing the write just before it.
	for range 20 {
		if fromStandby, saw, took := read(); !fromStandby || !saw {
			t.Fatalf("caught up: read from the standby %v, saw the write %v (took %s)", fromStandby, saw, took)
		}
	}
	if got := count("standby", "replayed"); got != 20 {
		t.Errorf("reads served by the standby: %v, want 20", got)
	}
	gauges := gather(t, reg)
	if gauges["ledgerd_standby_up"] != 1 {
		t.Errorf("ledgerd_standby_up = %v, want 1", gauges["ledgerd_standby_up"])
	}

	// Paused replay: the read waits MaxWait, then goes to the primary, and still sees the write;
	// the lag shows in bytes.
	if _, err := onStandby.Exec(ctx, `SELECT pg_wal_replay_pause()`); err != nil {
		t.Fatal(err)
	}
	fromStandby, saw, took := read()
	if fromStandby || !saw || took < maxWait {
		t.Errorf("replay paused: read from the standby %v, saw the write %v after %s; want the primary after at least %s", fromStandby, saw, took, maxWait)
	}
	if got := count("primary", "lagging"); got != 1 {
		t.Errorf("reads sent to the primary for lag: %v, want 1", got)
	}
	if lag := gather(t, reg)["ledgerd_standby_replay_lag_bytes"]; lag <= 0 {
		t.Errorf("replay lag with replay paused: %v bytes, want more than 0", lag)
	}
	if _, err := onStandby.Exec(ctx, `SELECT pg_wal_replay_resume()`); err != nil {
		t.Fatal(err)
	}
	if fromStandby, saw, _ := read(); !fromStandby || !saw {
		t.Errorf("replay resumed: read from the standby %v, saw the write %v", fromStandby, saw)
	}

	// Failover to a standby that lacks the primary's last transactions. The standby stops streaming,
	// the primary creates a series the standby never gets, dies, and the standby is promoted.
	key := func(service string) store.SeriesKey {
		return store.SeriesKey{ProjectID: 1, Service: service, Model: "m", Provider: "p"}
	}
	if _, err := st.EnsureProject(ctx, "p"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SeriesIDs(ctx, []store.SeriesKey{key("replicated")}); err != nil {
		t.Fatal(err)
	}
	if fromStandby, saw, _ := read(); !fromStandby || !saw { // the standby has it all
		t.Fatalf("before the failover: read from the standby %v, saw the write %v", fromStandby, saw)
	}
	for _, q := range []string{`ALTER SYSTEM SET primary_conninfo = ''`, `SELECT pg_reload_conf()`} {
		if _, err := onStandby.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the standby to stop streaming", func() bool {
		var streaming bool
		err := onStandby.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_wal_receiver)`).Scan(&streaming)
		return err == nil && !streaming
	})
	lost, err := st.SeriesIDs(ctx, []store.SeriesKey{key("lost")})
	if err != nil {
		t.Fatal(err)
	}
	epoch := st.Epoch()
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	dbtest.Promote(t, standby)
	// Another replica, already on the new primary, creates a series of its own.
	if _, err := onStandby.Exec(ctx, `INSERT INTO series (project_id, tenant, service, operation, provider, model, fallback_from)
		VALUES (1, '', 'after', '', 'p', 'm', '')`); err != nil {
		t.Fatal(err)
	}
	// The pool reconnects through the multi-host URL, to the promoted standby.
	waitFor(t, "the store to reach the promoted standby", func() bool { return st.Pool.Ping(ctx) == nil })
	if st.SameServer(epoch) == nil {
		t.Errorf("SameServer(%d) after the failover is nil, want ErrServerChanged (epoch now %d)", epoch, st.Epoch())
	}
	ids, err := st.SeriesIDs(ctx, []store.SeriesKey{key("replicated"), key("lost"), key("after")})
	if err != nil {
		t.Fatal(err)
	}
	for i, service := range []string{"replicated", "lost", "after"} {
		var got string
		err := onStandby.QueryRow(ctx, `SELECT service FROM series WHERE id = $1`, ids[i]).Scan(&got)
		if err != nil || got != service {
			t.Errorf("after the failover series %q has id %d, which the new primary knows as %q (%v); the old primary had given %q id %d",
				service, ids[i], got, err, "lost", lost[0])
		}
	}
	// Reads follow the promoted standby, which is now a primary.
	conn, err := reads.Acquire(ctx)
	if err != nil {
		t.Fatalf("read after the failover: %v", err)
	}
	conn.Release()
}

// counter returns ledgerd_reads_total{server, reason} (0 when absent).
func counter(t *testing.T, reg *prometheus.Registry, server, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "ledgerd_reads_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["server"] == server && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// gather returns the registry's unlabelled gauges by name.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if g := m.GetGauge(); g != nil && len(m.GetLabel()) == 0 {
				out[mf.GetName()] = g.GetValue()
			}
		}
	}
	return out
}

// waitFor polls cond for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for %s", what)
		}
	}
}
