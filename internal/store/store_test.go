package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/store"
)

// TestKeys covers the key life cycle: a key authenticates as its project, only its hash is stored,
// and a revoked, unknown or malformed key is refused.
func TestKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(dbtest.New(t))
	key, err := st.CreateKey(ctx, "checkout")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(key, store.KeyPrefix) || len(key) != len(store.KeyPrefix)+48 {
		t.Fatalf("key %q", key)
	}
	var stored int
	if err := st.Pool.QueryRow(ctx, `SELECT count(*) FROM api_keys WHERE position($1::bytea in hash) > 0`, []byte(key)).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Fatal("the plain key is stored")
	}
	p, err := st.Authenticate(ctx, key)
	if err != nil || p.Name != "checkout" {
		t.Fatalf("authenticate: %+v, %v", p, err)
	}
	cases := []struct {
		name string
		key  string
	}{
		{"unknown key", store.KeyPrefix + strings.Repeat("0", 48)}, // well formed, never issued
		{"no prefix", strings.TrimPrefix(key, store.KeyPrefix)},    // not a ledgerd key
		{"too long", key + strings.Repeat("x", 200)},               // refused before hashing
	}
	for _, c := range cases {
		if _, err := st.Authenticate(ctx, c.key); !errors.Is(err, store.ErrBadKey) {
			t.Errorf("%s: %v, want ErrBadKey", c.name, err)
		}
	}
	if err := st.RevokeKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Authenticate(ctx, key); !errors.Is(err, store.ErrBadKey) {
		t.Errorf("revoked key: %v", err)
	}
	if err := st.RevokeKey(ctx, key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoking twice: %v", err)
	}
	if _, err := st.EnsureProject(ctx, " "); err == nil {
		t.Error("an empty project name was accepted")
	}
}

// TestPartitions checks that partitions are created for the months records need, once, and that
// retention drops whole months before the cutoff only.
func TestPartitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(dbtest.New(t))
	months := []time.Time{
		time.Date(2026, 9, 30, 23, 59, 0, 0, time.UTC),
		time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 10, 15, 0, 0, 0, 0, time.FixedZone("x", -5*3600)),
		time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC),
	}
	if err := st.EnsurePartitions(ctx, months...); err != nil {
		t.Fatal(err)
	}
	if err := store.New(st.Pool).EnsurePartitions(ctx, months...); err != nil { // another replica
		t.Fatal(err)
	}
	got, err := st.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := "attempts_p202609 attempts_p202610 attempts_p202611"; strings.Join(got, " ") != want {
		t.Fatalf("partitions %v, want %s", got, want)
	}
	dropped, err := st.DropPartitionsBefore(ctx, novemberFirst)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(dropped, " ") != "attempts_p202609 attempts_p202610" {
		t.Fatalf("dropped %v", dropped)
	}
	if err := st.EnsurePartitions(ctx, months[0]); err != nil { // recreated on demand
		t.Fatal(err)
	}
}

// TestPartitionsAhead checks that the month holding now and the next one get their partitions
// before any record needs them (across a year's end too), and that behind a long read of
// attempts the call gives up after its lock wait instead of queueing every commit behind it.
func TestPartitionsAhead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(dbtest.New(t))
	cases := []struct {
		now  time.Time
		want string
	}{
		{time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC), "attempts_p202611 attempts_p202612"},
		{time.Date(2026, 12, 31, 23, 59, 0, 0, time.FixedZone("x", 3*3600)), "attempts_p202611 attempts_p202612 attempts_p202701"},
		{time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), "attempts_p202611 attempts_p202612 attempts_p202701"}, // nothing to do
	}
	for _, c := range cases {
		if err := st.PartitionsAhead(ctx, c.now, time.Second); err != nil {
			t.Fatalf("at %s: %v", c.now, err)
		}
		if got, err := st.Partitions(ctx); err != nil || strings.Join(got, " ") != c.want {
			t.Fatalf("at %s: partitions %v (%v), want %s", c.now, got, err, c.want)
		}
	}

	// A reader of attempts holds off the next partition: PartitionsAhead fails after its wait,
	// and succeeds once the read ends.
	tx := readingAttempts(t, st)
	later := time.Date(2027, 1, 15, 0, 0, 0, 0, time.UTC)       // needs 2027-02
	bounded, cancel := context.WithTimeout(ctx, 10*time.Second) // without the lock wait, it would wait for the reader
	defer cancel()
	err := store.New(st.Pool).PartitionsAhead(bounded, later, 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "lock timeout") {
		t.Fatalf("behind a reader: %v, want a lock timeout", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.PartitionsAhead(ctx, later, time.Second); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Partitions(ctx); !slices.Contains(got, "attempts_p202702") {
		t.Fatalf("partitions %v after the read ended", got)
	}
}

// septemberAndNovember returns a store on a new ledger with the partitions of September and
// November 2026, for drops before novemberFirst.
func septemberAndNovember(t *testing.T) *store.Store {
	t.Helper()
	st := store.New(dbtest.New(t))
	if err := st.EnsurePartitions(context.Background(), time.Date(2026, 9, 3, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 3, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	return st
}

var novemberFirst = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// readingAttempts begins a transaction that has read attempts, as a long dashboard query would,
// and so holds its lock on the table until rolled back (at the latest when the test ends).
func readingAttempts(t *testing.T, st *store.Store) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := st.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, `SELECT count(*) FROM attempts`); err != nil {
		t.Fatal(err)
	}
	return tx
}

// TestDropPartitionsBehindReader checks that retention does not stall the ledger: while a long
// read holds attempts, dropping an old month waits for it, and other reads (and so commits) of
// attempts go on meanwhile instead of queueing behind the drop.
func TestDropPartitionsBehindReader(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := septemberAndNovember(t)
	reader := readingAttempts(t, st)
	type result struct {
		dropped []string
		err     error
	}
	done := make(chan result, 1)
	go func() {
		d, err := st.DropPartitionsBefore(ctx, novemberFirst)
		done <- result{d, err}
	}()
	// Wait until the drop waits for the reader.
	for waiting := false; !waiting; time.Sleep(20 * time.Millisecond) {
		if err := st.Pool.QueryRow(ctx, `SELECT count(*) > 0 FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND (query LIKE 'ALTER TABLE attempts%' OR query LIKE 'DROP TABLE%')`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			t.Fatalf("the drop did not wait for the reader: %v, %v", r.dropped, r.err)
		default:
		}
	}
	bounded, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var n int
	if err := st.Pool.QueryRow(bounded, `SELECT count(*) FROM attempts`).Scan(&n); err != nil {
		t.Fatalf("a read while the drop waits: %v", err)
	}
	if err := reader.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || strings.Join(r.dropped, " ") != "attempts_p202609" {
		t.Fatalf("dropped %v, %v", r.dropped, r.err)
	}
	if got, err := st.Partitions(ctx); err != nil || strings.Join(got, " ") != "attempts_p202611" {
		t.Fatalf("partitions %v, %v", got, err)
	}
}

// TestDropPartitionsFinishesDetach checks that a detach left half done (a drop interrupted while
// it waited for a reader) is finished by the next drop.
func TestDropPartitionsFinishesDetach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := septemberAndNovember(t)
	reader := readingAttempts(t, st)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := st.DropPartitionsBefore(short, novemberFirst); err == nil {
		t.Fatal("the drop did not wait for the reader")
	}
	var pending bool
	if err := st.Pool.QueryRow(ctx, `SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = 'attempts_p202609'::regclass`).Scan(&pending); err != nil || !pending {
		t.Fatalf("detach pending %v, %v; want a detach left half done", pending, err)
	}
	if err := reader.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	dropped, err := st.DropPartitionsBefore(ctx, novemberFirst)
	if err != nil || strings.Join(dropped, " ") != "attempts_p202609" {
		t.Fatalf("dropped %v, %v", dropped, err)
	}
}

// TestDropPartitionsFinishesDrop checks that a month detached by a drop that stopped before
// dropping it (or whose interrupted detach its session finished after the caller gave up) is no
// longer listed as a partition, and is dropped by the next drop.
func TestDropPartitionsFinishesDrop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := septemberAndNovember(t)
	if _, err := st.Pool.Exec(ctx, `ALTER TABLE attempts DETACH PARTITION attempts_p202609`); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Partitions(ctx); err != nil || strings.Join(got, " ") != "attempts_p202611" {
		t.Fatalf("partitions %v, %v", got, err)
	}
	dropped, err := st.DropPartitionsBefore(ctx, novemberFirst)
	if err != nil || strings.Join(dropped, " ") != "attempts_p202609" {
		t.Fatalf("dropped %v, %v", dropped, err)
	}
	var left *string
	if err := st.Pool.QueryRow(ctx, `SELECT to_regclass('attempts_p202609')::text`).Scan(&left); err != nil || left != nil {
		t.Fatalf("attempts_p202609 still there (%v, %v)", left, err)
	}
}

// TestSeriesIDs checks that a series gets one id whoever asks, and that ids are stable.
func TestSeriesIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(dbtest.New(t))
	p, err := st.EnsureProject(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	a := store.SeriesKey{ProjectID: p.ID, Service: "router", Operation: "default", Provider: "anthropic", Model: "claude-haiku-5-5"}
	b := a
	b.FallbackFrom = "claude-sonnet-5-5"
	first, err := st.SeriesIDs(ctx, []store.SeriesKey{a, b, a})
	if err != nil {
		t.Fatal(err)
	}
	if first[0] == 0 || first[0] == first[1] || first[2] != first[0] {
		t.Fatalf("ids of a, b, a: %v", first)
	}
	for _, st := range []*store.Store{st, store.New(st.Pool)} { // cached, and another replica's
		again, err := st.SeriesIDs(ctx, []store.SeriesKey{b, a, b})
		if err != nil {
			t.Fatal(err)
		}
		if want := []int64{first[1], first[0], first[1]}; !slices.Equal(again, want) {
			t.Fatalf("ids of b, a, b: %v, want %v", again, want)
		}
	}
}

// TestSettings covers the settings table, including InitSetting's first-writer-wins rule.
func TestSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(dbtest.New(t))
	if _, err := st.Setting(ctx, "timezone"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing setting: %v", err)
	}
	if v, err := st.InitSetting(ctx, "secret", "one"); err != nil || v != "one" {
		t.Fatalf("init: %q %v", v, err)
	}
	if v, err := st.InitSetting(ctx, "secret", "two"); err != nil || v != "one" {
		t.Fatalf("second init: %q %v", v, err)
	}
	if err := st.SetSetting(ctx, "secret", "three"); err != nil {
		t.Fatal(err)
	}
	if v, _ := st.Setting(ctx, "secret"); v != "three" {
		t.Fatalf("after set: %q", v)
	}
}
