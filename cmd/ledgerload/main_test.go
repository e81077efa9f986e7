package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/internal/app"
	"github.com/ledgerd/ledgerd/internal/apptest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/store"
)

// TestCommand runs the command line against a real ledgerd.
func TestCommand(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	key, err := store.New(pool).CreateKey(context.Background(), "ledgerload-test")
	if err != nil {
		t.Fatal(err)
	}
	base := apptest.Start(t, app.Options{DatabaseURL: dbURL})
	var out, errOut bytes.Buffer
	ackPath := t.TempDir() + "/acks.jsonl"
	err = command(context.Background(), []string{"--url", base, "--key", key, "--days", "3", "--count", "700",
		"--batch", "100", "--rate", "0", "--seed", "4", "--ack-log", ackPath, "--quiet"}, &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), "acknowledged 700 ") || !strings.Contains(errOut.String(), "history scenario") {
		t.Errorf("summary:\n%s\nstderr:\n%s", out.String(), errOut.String())
	}
	var rows int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM attempts`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 700 {
		t.Errorf("stored %d rows, want 700", rows)
	}
	cases := []struct {
		name string
		args []string
	}{
		{"missing key", []string{"--url", base, "--key", ""}},                                             // a key is required
		{"unknown scenario", []string{"--key", "k", "--scenario", "weekly"}},                              // only known scenarios
		{"demo with a window", []string{"--key", "k", "--scenario", "demo", "--days", "3"}},               // the demo fixes its window
		{"steady with a window", []string{"--key", "k", "--scenario", "steady", "--start", "2026-01-01"}}, // steady load is live
		{"bad start", []string{"--key", "k", "--start", "yesterday"}},                                     // dates are parsed strictly
		{"stray argument", []string{"--key", "k", "extra"}},                                               // no positional arguments
	}
	for _, c := range cases {
		var o, e bytes.Buffer
		if err = command(context.Background(), c.args, &o, &e); err == nil || errors.Is(err, ErrIncomplete) {
			t.Errorf("%s: got %v, want a usage error", c.name, err)
		}
	}
}
