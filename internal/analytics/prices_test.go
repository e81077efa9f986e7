package analytics_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/rollup"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/pricing"
	"github.com/ledgerd/ledgerd/schema"
)

// zone counts the tests' days: 2026-11-02 01:30Z is still 2026-11-01 there.
const zone = "America/New_York"

func catalog(t *testing.T) *pricing.Catalog {
	t.Helper()
	c, err := pricing.Load("")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ingestAll commits recs for project through a writer that prices with cat.
func ingestAll(t *testing.T, st *store.Store, cat *pricing.Catalog, project string, recs []schema.Attempt) int64 {
	t.Helper()
	ctx := context.Background()
	tz, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.EnsureProject(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	w := ingest.NewWriter(st, ingest.CatalogPrice(cat), ingest.Options{Timezone: tz, Registerer: prometheus.NewRegistry()})
	defer w.Close(ctx)
	if res, err := w.Submit(ctx, p.ID, recs); err != nil || res.Accepted != len(recs) {
		t.Fatalf("ingest: %+v %v", res, err)
	}
	return p.ID
}

// rec is a successful Claude Haiku 5.5 call of 333 input and 9 output tokens, which costs
// $0.0000378 ($0.0000333 + $0.0000045).
func priceRec(id string, at time.Time) schema.Attempt {
	return schema.Attempt{AttemptID: id, RequestID: id, AttemptNo: 1, StartedAt: at, LatencyMS: 900,
		Provider: "anthropic", Model: "claude-haiku-5-5", Service: "router", Operation: "default",
		Status: schema.StatusOK, InputTokens: 333, OutputTokens: 9}
}

func with(a schema.Attempt, f func(*schema.Attempt)) schema.Attempt { f(&a); return a }

func TestUnpriced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	st := store.New(pool)
	cat := catalog(t)
	day := time.Date(2026, 11, 2, 1, 30, 0, 0, time.UTC)
	acme := ingestAll(t, st, cat, "acme", []schema.Attempt{
		priceRec("priced", day),
		// an unknown model, seen on the local days 2026-11-01 (01:30Z) to 2026-11-04, 3 times
		with(priceRec("u1", day), func(a *schema.Attempt) { a.Model = "claude-haiku-5.5" }),
		with(priceRec("u2", day.Add(48*time.Hour)), func(a *schema.Attempt) {
			a.Model = "claude-haiku-5.5"
			a.Status = schema.StatusError
			a.ErrorClass = schema.ErrorTimeout
		}),
		with(priceRec("u3", day.Add(72*time.Hour)), func(a *schema.Attempt) { a.Model = "claude-haiku-5.5"; a.Fallback = true; a.FallbackFrom = "gpt-4o" }),
		// a known model without a batch price: in the catalog, yet its batch attempt is unpriced
		with(priceRec("b1", day.Add(24*time.Hour)), func(a *schema.Attempt) { a.Provider = "openai"; a.Model = "gpt-6-luna"; a.Batch = true }),
		// an answer without usage is not a missing price: its model is not listed
		with(priceRec("n1", day), func(a *schema.Attempt) {
			a.Provider, a.Model, a.UsageUnknown = "openai", "gpt-4o", true
			a.InputTokens, a.OutputTokens, a.CacheWriteTokens, a.CacheReadTokens, a.CacheWrite1hTokens, a.ReasoningTokens = 0, 0, 0, 0, 0, 0
		}),
	})
	beta := ingestAll(t, st, cat, "beta", []schema.Attempt{
		with(priceRec("other", day), func(a *schema.Attempt) { a.Model = "only-in-beta" }),
	})
	got, err := analytics.Unpriced(ctx, pool, cat, acme)
	if err != nil {
		t.Fatal(err)
	}
	want := []analytics.UnpricedModel{
		// most unpriced first; names near the unknown one are suggested
		{Provider: "anthropic", Model: "claude-haiku-5.5", Attempts: 3, FirstSeen: "2026-11-01", LastSeen: "2026-11-04",
			Nearest: []string{"claude-haiku-5-5", "claude-haiku-4-5", "claude-haiku-4-5-20251001"}},
		{Provider: "openai", Model: "gpt-6-luna", Attempts: 1, FirstSeen: "2026-11-02", LastSeen: "2026-11-02", InCatalog: true},
	}
	if !equalUnpriced(got, want) {
		t.Errorf("acme unpriced:\n got %+v\nwant %+v", got, want)
	}
	// Each project sees its own models only.
	got, err = analytics.Unpriced(ctx, pool, cat, beta)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Model != "only-in-beta" {
		t.Errorf("beta unpriced: %+v", got)
	}
	// A catalog that knows the model by an alias says so.
	custom := writeCatalog(t, `models:
  - provider: anthropic
    id: haiku-custom
    aliases: [claude-haiku-5.5]
    prices:
      - effective_from: 2026-01-01
        source: test
        input_per_mtok: "1"
        output_per_mtok: "1"
`)
	got, err = analytics.Unpriced(ctx, pool, custom, acme)
	if err != nil {
		t.Fatal(err)
	}
	if !got[0].InCatalog || got[0].Nearest != nil || !got[1].InCatalog {
		t.Errorf("with the alias: %+v", got)
	}
}

func equalUnpriced(a, b []analytics.UnpricedModel) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Provider != y.Provider || x.Model != y.Model || x.Attempts != y.Attempts || x.FirstSeen != y.FirstSeen ||
			x.LastSeen != y.LastSeen || x.InCatalog != y.InCatalog || strings.Join(x.Nearest, ",") != strings.Join(y.Nearest, ",") {
			return false
		}
	}
	return true
}

func writeCatalog(t *testing.T, yaml string) *pricing.Catalog {
	t.Helper()
	path := t.TempDir() + "/prices.yaml"
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := pricing.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMismatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	st := store.New(pool)
	cat := catalog(t)
	at := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	const cost = 37_800 // ledgerd's cost of rec, in nano-dollars
	router := func(id string, client money.Nanos) schema.Attempt {
		return with(priceRec(id, at), func(a *schema.Attempt) { a.CostUSD = usd(client) })
	}
	acme := ingestAll(t, st, cat, "acme", []schema.Attempt{
		router("exact", cost),           // equal: not a mismatch
		router("one-percent", cost+378), // off by exactly 1%: not a mismatch
		router("just-over", cost+379),   // off by more than 1%
		router("double", 2*cost),        // the client doubles the price
		router("zero", 0),               // the client says free
		priceRec("no-client", at),       // no client cost: not compared
		with(router("unpriced", 5), func(a *schema.Attempt) { a.Model = "unknown-model" }),             // no ledgerd cost: not compared
		with(router("late", 0), func(a *schema.Attempt) { a.StartedAt = at.Add(30 * 24 * time.Hour) }), // outside the range
		with(router("search", 1), func(a *schema.Attempt) { a.Service = "search" }),                    // another service
	})
	ingestAll(t, st, cat, "beta", []schema.Attempt{router("beta", 0)}) // another project
	from, to := at.Add(-time.Hour), at.Add(24*time.Hour)
	got, err := analytics.Mismatches(ctx, pool, acme, from, to)
	if err != nil {
		t.Fatal(err)
	}
	want := []analytics.Mismatch{
		// just-over, double and zero differ: client 37,800+379 + 75,600 + 0 against 3 × 37,800;
		// the double and the zero cancel out in Difference, not in AbsDifference, which ranks rows
		{Service: "router", Provider: "anthropic", Model: "claude-haiku-5-5", Compared: 5, Attempts: 3,
			ClientCost: cost + 379 + 2*cost, LedgerCost: 3 * cost, Difference: 379, AbsDifference: 379 + cost + cost, Example: "zero"},
		{Service: "search", Provider: "anthropic", Model: "claude-haiku-5-5", Compared: 1, Attempts: 1,
			ClientCost: 1, LedgerCost: cost, Difference: 1 - cost, AbsDifference: cost - 1, Example: "search"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	// The same attempts are the rollups' cost_mismatch_attempts.
	var rolled int64
	if err := pool.QueryRow(ctx, `SELECT sum(cost_mismatch_attempts) FROM rollup_hourly
		WHERE project_id = $1 AND bucket >= $2 AND bucket < $3`, acme, from, to).Scan(&rolled); err != nil {
		t.Fatal(err)
	}
	if rolled != 4 {
		t.Errorf("rollups count %d mismatches, want 4", rolled)
	}
	for _, c := range []struct {
		name     string
		from, to time.Time
	}{
		{"empty range", to, from},                         // to before from
		{"too long", from, from.Add(32 * 24 * time.Hour)}, // more than 31 days of raw rows
	} {
		if _, err := analytics.Mismatches(ctx, pool, acme, c.from, c.to); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
}

// TestMismatchWhereIsTheWriters pins the condition to the one the writer counts in the rollups.
func TestMismatchWhereIsTheWriters(t *testing.T) {
	t.Parallel()
	for _, s := range rollup.Sums {
		if s.Col == "cost_mismatch_attempts" {
			if want := "count(*) FILTER (WHERE " + analytics.MismatchWhere + ")"; s.Expr != want {
				t.Errorf("the writer counts %q, prices compares %q", s.Expr, want)
			}
			return
		}
	}
	t.Error("rollup.Sums has no cost_mismatch_attempts")
}
