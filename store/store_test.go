package store_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/store"
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
	dropped, err := st.DropPartitionsBefore(ctx, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
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
