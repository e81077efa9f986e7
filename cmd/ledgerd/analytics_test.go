package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/store"
)

// TestRollupsAndBudgetCommands runs `ledgerd budget set` and `ledgerd rollups rebuild` on a fresh
// ledger: each case's command line, the output it must print, and the setting it leaves.
func TestRollupsAndBudgetCommands(t *testing.T) {
	t.Setenv("LEDGERD_TIMEZONE", "") // not parallel: the environment must not choose a timezone
	ctx := context.Background()
	dbURL := dbtest.NewURL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st := store.New(pool)
	if _, err := st.EnsureProject(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if err := st.SetSetting(ctx, "timezone", "Europe/Paris"); err != nil {
		t.Fatal(err)
	}
	budget := func() *int64 {
		var b *int64
		if err := pool.QueryRow(ctx, `SELECT monthly_budget_nanos FROM projects WHERE name = 'acme'`).Scan(&b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name  string
		args  []string
		usage bool   // refused as a usage error
		out   string // printed
		check func() bool
	}{
		// Sets the budget in exact nano-dollars.
		{"budget", []string{"budget", "set", "--project", "acme", "--usd", "1250.50"}, false, "monthly budget $1,250.50",
			func() bool { b := budget(); return b != nil && *b == 1_250_500_000_000 }},
		// Needs an amount or --clear, not both.
		{"budget without amount", []string{"budget", "set", "--project", "acme"}, true, "", nil},
		{"budget negative", []string{"budget", "set", "--project", "acme", "--usd", "-5"}, true, "", nil},
		// Removes it.
		{"budget cleared", []string{"budget", "set", "--project", "acme", "--clear"}, false, "no monthly budget",
			func() bool { return budget() == nil }},
		// Without --timezone, the ledger's own timezone is kept.
		{"rebuild in place", []string{"rollups", "rebuild"}, false, "days counted in Europe/Paris (were Europe/Paris)",
			func() bool { tz, _ := st.Setting(ctx, "timezone"); return tz == "Europe/Paris" }},
		// With it, the timezone changes.
		{"rebuild for New York", []string{"rollups", "rebuild", "--timezone", "America/New_York"}, false,
			"days counted in America/New_York (were Europe/Paris)",
			func() bool { tz, _ := st.Setting(ctx, "timezone"); return tz == "America/New_York" }},
		{"unknown timezone", []string{"rollups", "rebuild", "--timezone", "Mars/Olympus"}, true, "", nil},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		err := dispatch(ctx, append(c.args, "--database-url", dbURL), &out, &errOut)
		if c.usage {
			if !errors.Is(err, errUsage) {
				t.Errorf("%s: %v, want a usage error", c.name, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v (%s)", c.name, err, errOut.String())
			continue
		}
		if !strings.Contains(out.String(), c.out) || !c.check() {
			t.Errorf("%s: printed %q, want %q; or the ledger did not change", c.name, out.String(), c.out)
		}
	}
}
