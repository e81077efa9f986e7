package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/pricing"
	"github.com/ledgerd/ledgerd/schema"
)

// TestReprice runs `ledgerd reprice` on a ledger whose Claude Haiku 5.5 attempts were priced with
// the embedded catalog, with a price file that doubles its price from 2026-11-02.
func TestReprice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewURL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st := store.New(pool)
	if err := st.SetSetting(ctx, "timezone", "America/New_York"); err != nil {
		t.Fatal(err)
	}
	p, err := st.EnsureProject(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := pricing.Load("")
	if err != nil {
		t.Fatal(err)
	}
	tz, _ := time.LoadLocation("America/New_York")
	w := ingest.NewWriter(st, ingest.CatalogPrice(cat), ingest.Options{Timezone: tz, Registerer: prometheus.NewRegistry()})
	var recs []schema.Attempt
	// One $0.0000378 call at 03:00 UTC each day: 2026-11-01 to 11-04 local (22:00 or 23:00 the day before).
	for d := range 4 {
		recs = append(recs, schema.Attempt{AttemptID: string(rune('a' + d)), RequestID: "r", AttemptNo: 1,
			StartedAt: time.Date(2026, 11, 2+d, 3, 0, 0, 0, time.UTC), LatencyMS: 900, Provider: "anthropic",
			Model: "claude-haiku-5-5", Service: "router", Operation: "default", Status: schema.StatusOK,
			InputTokens: 333, OutputTokens: 9})
	}
	if _, err := w.Submit(ctx, p.ID, recs); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}

	prices := "../../internal/reprice/testdata/prices-b.yaml"
	cases := []struct {
		name string
		args []string
		// want are lines the output must hold, err the error it must fail with.
		want []string
		err  error
	}{
		// Local days 2026-11-02 and 11-03 hold the calls of 11-03 and 11-04 03:00 UTC, both at the
		// doubled price; a dry run says so and writes nothing.
		{"dry run", []string{"--from", "2026-11-02", "--to", "2026-11-04", "--dry-run"},
			[]string{"Dry run, nothing written: would reprice attempts that started in [2026-11-02T05:00:00Z, 2026-11-04T05:00:00Z).",
				"Examined 2 attempts; changed 2: 0 newly priced, 0 newly unpriced, 0 unpriced now.",
				"Cost of the priced attempts: $0.0000756 before, $0.0001512 after (+$0.0000756)."}, nil},
		// The same, written, with the reminder to restart the servers.
		{"write", []string{"--from", "2026-11-02", "--to", "2026-11-04"},
			[]string{"Repriced attempts that started in [2026-11-02T05:00:00Z, 2026-11-04T05:00:00Z).",
				"Examined 2 attempts; changed 2: 0 newly priced, 0 newly unpriced, 0 unpriced now.",
				"restart them with this same price file."}, nil},
		// RFC 3339 bounds, JSON output: the calls of 11-02 and 11-05 03:00 UTC (after the new
		// price's UTC midnight) change, the two repriced above do not.
		{"json", []string{"--from", "2026-11-02T00:00:00Z", "--to", "2026-11-06T00:00:00Z", "--json"},
			[]string{`"attempts": 4,`, `"changed": 2,`, `"cost_before_usd": "0.000226800",`, `"cost_after_usd": "0.000302400",`}, nil},
		// Bounds are required and must parse.
		{"no bounds", nil, nil, errUsage},
		{"bad bound", []string{"--from", "yesterday", "--to", "2026-11-04"}, nil, errUsage},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		args := append([]string{"reprice", "--database-url", dbURL, "--prices", prices}, c.args...)
		err := dispatch(ctx, args, &out, &errOut)
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("%s: %v, want %v", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, errOut.String())
		}
		for _, line := range c.want {
			if !strings.Contains(out.String(), line) {
				t.Errorf("%s: output lacks %q:\n%s", c.name, line, out.String())
			}
		}
	}
}
