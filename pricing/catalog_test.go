package pricing

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLookup(t *testing.T) {
	t.Parallel()
	c := embeddedCatalog(t)
	cases := []struct {
		provider, model string
		want            string // canonical provider/id, "" for not found
	}{
		{"anthropic", "claude-haiku-5-5", "anthropic/claude-haiku-5-5"},             // exact id
		{"anthropic", "claude-sonnet-4-0", "anthropic/claude-sonnet-4-20250514"},    // alias
		{"anthropic", "claude-sonnet-4-5-20250929", "anthropic/claude-sonnet-4-5"},  // dated alias to its family
		{"Anthropic", " CLAUDE-Haiku-5-5 ", "anthropic/claude-haiku-5-5"},           // case and spaces ignored
		{"", "gpt-4o-2024-11-20", "openai/gpt-4o"},                                  // any provider
		{"", "anthropic/claude-sonnet-5-5", "anthropic/claude-sonnet-5-5"},          // provider prefix in the model
		{"anthropic", "anthropic/claude-sonnet-5-5", "anthropic/claude-sonnet-5-5"}, // prefix repeating the provider
		{"google", "gemini-4-argon", "gemini/gemini-4-argon"},                       // google is gemini
		{"gcp.gemini", "models/gemini-4-argon", "gemini/gemini-4-argon"},            // OTel name and Gemini's models/ prefix
		{"openai", "gpt-4o-2024-05-13", "openai/gpt-4o-2024-05-13"},                 // a differently priced snapshot is not an alias
		{"openai", "claude-haiku-5-5", ""},                                          // wrong provider
		{"anthropic", "claude-haiku-5", ""},                                         // no prefix matching
		{"azure.ai.openai", "gpt-4o", ""},                                           // Azure prices are not OpenAI's
		{"openai", "anthropic/claude-haiku-5-5", ""},                                // a prefix naming another provider
		{"anthropic", "claude-sonnet-4-5-20250929-v1:0", ""},                        // Bedrock ids are not Anthropic's
		{"", "", ""}, // empty
		{"anthropic", "claude-haiku-5-5\x00anthropic", ""},                              // separator smuggling
		{"anthropic", strings.Repeat("x", 10_000), ""},                                  // long garbage
		{"gemini", "gemini-4-ARGON", "gemini/gemini-4-argon"},                           // upper-case id
		{"vertex_ai-language-models", "gemini-4-argon", ""},                             // Vertex is another provider
		{"", "claude-fable-5-1", "anthropic/claude-fable-5-1"},                          // a current model
		{"openai", "gpt-6.1-sol", "openai/gpt-6.1-sol"},                                 // dots in ids
		{"OpenAI", "GPT-6-LUNA", "openai/gpt-6-luna"},                                   // upper-case provider and id
		{"anthropic", "claude-haiku-4-5-20251001", "anthropic/claude-haiku-4-5"},        // Haiku 4.5 snapshot
		{"claude", "claude-opus-5-5", "anthropic/claude-opus-5-5"},                      // provider spelled as the product
		{"anthropic", "models/claude-opus-5-5", "anthropic/claude-opus-5-5"},            // stray models/ prefix
		{"openai", "openai/gpt-4o", "openai/gpt-4o"},                                    // LiteLLM-style id
		{"anthropic", "claude-sonnet-5", "anthropic/claude-sonnet-5"},                   // not confused with 5-5
		{"anthropic", "claude-sonnet-4-6", "anthropic/claude-sonnet-4-6"},               // Sonnet 4.6
		{"", "gpt-6-sol", "openai/gpt-6-sol"},                                           // GPT-6 Sol
		{"anthropic", "claude-sonnet-4-20250514", "anthropic/claude-sonnet-4-20250514"}, // the dated id is canonical here
	}
	for _, tc := range cases {
		// The second lookup answers from the spellings the catalog remembers.
		for range 2 {
			m, ok := c.Lookup(tc.provider, tc.model)
			got := ""
			if ok {
				got = m.Provider + "/" + m.ID
			}
			if got != tc.want {
				t.Errorf("Lookup(%q, %q) = %q, want %q", tc.provider, tc.model, got, tc.want)
			}
		}
	}
}

// TestLookupRemembersBoundedly checks that the spellings a catalog remembers stay within maxFound,
// that unknown names take no room, and that lookups past the bound still answer correctly.
func TestLookupRemembersBoundedly(t *testing.T) {
	t.Parallel()
	c := embeddedCatalog(t)
	for i := range maxFound + 10 {
		if _, ok := c.Lookup("openai", fmt.Sprintf("no-such-model-%d", i)); ok {
			t.Fatalf("no-such-model-%d found", i)
		}
	}
	if found := c.found.Load(); found != nil {
		t.Fatalf("%d unknown names remembered", len(*found))
	}
	for i := range maxFound + 10 {
		name := strings.Repeat(" ", i) + "GPT-4o"
		if m, ok := c.Lookup("openai", name); !ok || m.ID != "gpt-4o" {
			t.Fatalf("Lookup(openai, %d spaces + GPT-4o) = %s, %v", i, m.ID, ok)
		}
	}
	if n := len(*c.found.Load()); n != maxFound {
		t.Errorf("%d spellings remembered, want the bound %d", n, maxFound)
	}
}

// TestCostConcurrent prices the same records from several goroutines while the catalog learns
// their spellings; run with -race it guards the remembered lookups.
func TestCostConcurrent(t *testing.T) {
	t.Parallel()
	c := embeddedCatalog(t)
	at := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	var usages []Usage
	for _, m := range c.Models() {
		for _, name := range append([]string{m.ID, strings.ToUpper(m.ID), m.Provider + "/" + m.ID}, m.Aliases...) {
			usages = append(usages, Usage{Provider: m.Provider, Model: name, At: at, InputTokens: 1_000, OutputTokens: 100})
		}
	}
	fresh := embeddedCatalog(t)
	want := make([]Cost, len(usages))
	for i, u := range usages {
		var err error
		if want[i], err = fresh.CostTimes(u, big.NewRat(1, 1)); err != nil && !errors.Is(err, ErrUnpriced) {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for k := range 20 * len(usages) {
				i := (k + g*7) % len(usages)
				if got, _ := c.Cost(usages[i]); got != want[i] {
					t.Errorf("Cost(%s) = %+v, want %+v", usages[i].Model, got, want[i])
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestLookupReturnsCopies(t *testing.T) {
	t.Parallel()
	c := embeddedCatalog(t)
	m, _ := c.Lookup("openai", "gpt-4o")
	m.Aliases[0] = "changed"
	m.Prices[0].Input = 0
	again, _ := c.Lookup("openai", "gpt-4o")
	if again.Aliases[0] == "changed" || again.Prices[0].Input == 0 {
		t.Error("a caller changed the catalog through a looked-up model")
	}
}

func TestSuggest(t *testing.T) {
	t.Parallel()
	c := embeddedCatalog(t)
	cases := []struct {
		model string
		n     int
		first string
	}{
		{"claude-haiku-5.5", 3, "claude-haiku-5-5"},   // dots for dashes
		{"claude-sonet-5-5", 3, "claude-sonnet-5-5"},  // a typo
		{"gpt4o", 3, "gpt-4o"},                        // a missing dash
		{"CLAUDE-OPUS-5-5-X", 1, "claude-opus-5-5"},   // case and a suffix
		{"gemini-4-argonn", 2, "gemini-4-argon"},      // one letter too many
		{"claude-sonnet-4", 1, "claude-sonnet-4-0"},   // the alias is nearest
		{"gpt-6-so", 2, "gpt-6-sol"},                  // a truncated id
		{"claude-haiku-4.5", 1, "claude-haiku-4-5"},   // Haiku 4.5 written with a dot
		{"gpt-6.1-sool", 1, "gpt-6.1-sol"},            // dotted id with a typo
		{"claude-fable", 1, "claude-fable-5-1"},       // family name only
		{"gpt-4o-2024-05-14", 1, "gpt-4o-2024-05-13"}, // a near date
		{"sonnet-4-0", 1, "claude-sonnet-4-0"},        // the family without its prefix
		{"claude-haiku-9", 3, "claude-haiku-4-5"},     // an id that does not exist, of a known family
	}
	for _, tc := range cases {
		got := c.Suggest(tc.model, tc.n)
		if len(got) == 0 || len(got) > tc.n || got[0] != tc.first {
			t.Errorf("Suggest(%q, %d) = %v, want at most %d names starting with %q", tc.model, tc.n, got, tc.n, tc.first)
		}
	}
	// Only close matches: an unrelated id gets no suggestion rather than the least far models,
	// and a provider keeps suggestions to its own models.
	for _, tc := range []struct {
		provider, model string
		want            []string
	}{
		{"acme", "acme-llm-2-preview", nil},
		{"", "totally-unknown-model", nil},
		{"openai", "claude-haiku-4-5", nil},
		{"anthropic", "anthropic/claude-haiku-9", []string{"claude-haiku-4-5"}},
	} {
		got := c.SuggestFor(tc.provider, tc.model, 1)
		if !slices.Equal(got, tc.want) {
			t.Errorf("SuggestFor(%q, %q) = %q, want %q", tc.provider, tc.model, got, tc.want)
		}
	}
	if got := c.Suggest("x", 0); got != nil {
		t.Errorf("Suggest(n=0) = %v, want nil", got)
	}
}

func TestNormalizeProvider(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"anthropic": "anthropic", " Anthropic ": "anthropic", "claude": "anthropic", // Anthropic
		"openai": "openai", "OpenAI": "openai", // OpenAI
		"gemini": "gemini", "google": "gemini", "gcp.gemini": "gemini", "google_ai_studio": "gemini", // Gemini API
		"gcp.vertex_ai": "vertex_ai", "vertex_ai-language-models": "vertex_ai", // Vertex AI, billed apart
		"aws.bedrock": "bedrock", "azure.ai.openai": "azure", // clouds
		"mistral": "mistral", // unknown names pass through lower-cased
	}
	for in, want := range cases {
		if got := NormalizeProvider(in); got != want {
			t.Errorf("NormalizeProvider(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestEmbeddedCatalog guards the rules of catalog.yaml: every figure has a source, keys are unique,
// and every current model named in shared/PRICING.md is present.
func TestEmbeddedCatalog(t *testing.T) {
	t.Parallel()
	c := embeddedCatalog(t)
	keys := map[string]bool{}
	for _, v := range c.Versions() {
		if keys[v.Key] {
			t.Errorf("duplicate version key %s", v.Key)
		}
		keys[v.Key] = true
	}
	for _, m := range c.Models() {
		for _, p := range m.Prices {
			if len(p.Source) < 20 {
				t.Errorf("%s: source %q does not say where the figures came from", p.Key, p.Source)
			}
			if p.EffectiveFrom.After(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
				t.Errorf("%s: effective date too far ahead", p.Key)
			}
		}
	}
	for _, want := range []string{"claude-haiku-5-5", "claude-sonnet-5-5", "claude-sonnet-4-20250514", "gpt-4o"} {
		if _, ok := c.Lookup("", want); !ok {
			t.Errorf("the catalog lacks %s", want)
		}
	}
}

func TestModelJSON(t *testing.T) {
	t.Parallel()
	c := embeddedCatalog(t)
	m, _ := c.Lookup("anthropic", "claude-haiku-5-5")
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"input_per_mtok":"0.100000000"`, // money as decimal strings
		`"batch_discount":"0.5"`,         // ratios as decimal strings
		`"above_input_tokens":100000`,    // thresholds as numbers
		`"effective_from":"2026-10-07T00:00:00Z"`,
		`"key":"anthropic/claude-haiku-5-5@2026-10-07#`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON of %s lacks %s:\n%s", m.ID, want, b)
		}
	}
	// The listing served by GET /v1/prices loads back as a price file with the same versions.
	all, err := json.Marshal(map[string]any{"models": c.Models()})
	if err != nil {
		t.Fatal(err)
	}
	back, _, err := parseFile(all, "prices.json")
	if err != nil {
		t.Fatal(err)
	}
	c2, err := build(back)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Versions(), c2.Versions()) {
		t.Errorf("versions changed in a JSON round trip:\n%v\n%v", c.Versions(), c2.Versions())
	}
}

func TestLoadUserFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	override := write("override.yaml", `
models:
  - provider: anthropic
    id: claude-haiku-5-5
    aliases: [claude-sonnet-4-0]
    prices:
      - effective_from: 2026-01-01
        source: our negotiated contract
        input_per_mtok: "0.05"
        output_per_mtok: "0.25"
`)
	c, err := Load(override)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := c.Lookup("anthropic", "claude-haiku-5-5")
	if len(m.Prices) != 1 || m.Prices[0].Input != 50_000_000 {
		t.Errorf("the user's model did not replace the embedded one: %+v", m)
	}
	if m, _ := c.Lookup("anthropic", "claude-sonnet-4-0"); m.ID != "claude-haiku-5-5" {
		t.Errorf("the user's alias did not shadow the embedded one: got %s", m.ID)
	}
	if m, _ := c.Lookup("anthropic", "claude-sonnet-4-20250514"); m.ID != "claude-sonnet-4-20250514" {
		t.Errorf("the shadowed model is no longer found by its id")
	}
	if m, ok := c.Lookup("openai", "gpt-4o"); !ok || m.ID != "gpt-4o" {
		t.Errorf("an embedded model the user file does not name is lost")
	}
	embeddedKeys := embeddedCatalog(t).Versions()
	for _, v := range c.Versions() {
		if v.Model == "claude-haiku-5-5" && slices.ContainsFunc(embeddedKeys, func(e Version) bool { return e.Key == v.Key }) {
			t.Errorf("an overriding version reuses an embedded key %s", v.Key)
		}
	}

	litellm := write("model_prices_and_context_window.json", `{
  "sample_spec": {"input_cost_per_token": 0, "output_cost_per_token": 0, "litellm_provider": "openai"},
  "my-model": {"litellm_provider": "openai", "mode": "chat", "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06}
}`)
	c, err = Load(litellm)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := c.Lookup("openai", "my-model"); !ok || m.Prices[0].Output != 2_000_000_000 {
		t.Errorf("LiteLLM file not merged: %+v %v", m, ok)
	}

	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) error = %v, want a not-exist error", err)
	}
	if _, err := Load(write("bad.yaml", "models: [{provider: x}]")); !errors.Is(err, ErrCatalog) {
		t.Errorf("Load(bad) error = %v, want ErrCatalog", err)
	}
}

func TestCatalogFileErrors(t *testing.T) {
	t.Parallel()
	price := func(fields string) string {
		return "models:\n  - provider: p\n    id: m\n    prices:\n      - " + fields + "\n"
	}
	ok := `{effective_from: 2026-01-01, source: s, input_per_mtok: "1", output_per_mtok: "2"}`
	cases := []struct {
		name, src, want string
	}{
		{"no models", "models: []", "no models"}, // an empty file is a mistake
		{"not yaml", "models: [", "yaml"},        // syntax
		{"unknown field", price(`{effective_from: 2026-01-01, source: s, input_per_mtok: "1", output_per_mtok: "2", inptu: 1}`), "inptu"}, // a typo is refused, not ignored
		{"no source", price(`{effective_from: 2026-01-01, input_per_mtok: "1", output_per_mtok: "2"}`), "source"},                         // every figure needs a source
		{"no output", price(`{effective_from: 2026-01-01, source: s, input_per_mtok: "1"}`), "output_per_mtok"},                           // a missing price is not $0
		// a date that is no date
		{"bad date", price(`{effective_from: soon, source: s, input_per_mtok: "1", output_per_mtok: "2"}`), "effective_from"},
		{"negative", price(`{effective_from: 2026-01-01, source: s, input_per_mtok: "-1", output_per_mtok: "2"}`), "decimal"}, // no negative prices
		{"hex", price(`{effective_from: 2026-01-01, source: s, input_per_mtok: "0x10", output_per_mtok: "2"}`), "decimal"},    // decimals only
		// absurd exponents are refused before math/big sees them
		{"huge exponent", price(`{effective_from: 2026-01-01, source: s, input_per_mtok: "1e999999", output_per_mtok: "2"}`), "decimal"},
		// a discount above 100% would pay the customer
		{"batch above 1", price(`{effective_from: 2026-01-01, source: s, input_per_mtok: "1", output_per_mtok: "2", batch_discount: "1.5"}`), "between 0 and 1"},
		// tiers must be ordered so the highest threshold crossed wins
		{"tiers not ascending", price(`{effective_from: 2026-01-01, source: s, input_per_mtok: "1", output_per_mtok: "2", long_context: [{above_input_tokens: 10}, {above_input_tokens: 5}]}`), "ascending"},
		// a model without any price is not a priced model
		{"no prices", "models:\n  - {provider: p, id: m}\n", "no prices"},
		// prices belong to a provider
		{"no provider", "models:\n  - id: m\n    prices:\n      - " + ok + "\n", "provider"},
		// two versions at one instant would make the choice arbitrary
		{"same date twice", "models:\n  - provider: p\n    id: m\n    prices:\n      - " + ok + "\n      - " + ok + "\n", "two prices"},
		// one name may not mean two models, whatever its case
		{"alias clash", "models:\n  - {provider: p, id: a, aliases: [x], prices: [" + ok + "]}\n  - {provider: p, id: b, aliases: [X], prices: [" + ok + "]}\n", "both answer"},
		// one model listed twice, provider spelled differently
		{"listed twice", "models:\n  - {provider: p, id: a, prices: [" + ok + "]}\n  - {provider: P, id: a, prices: [" + ok + "]}\n", "twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			models, _, err := parseFile([]byte(tc.src), "t.yaml")
			if err == nil {
				_, err = build(models)
			}
			if !errors.Is(err, ErrCatalog) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want ErrCatalog mentioning %q", err, tc.want)
			}
		})
	}
}
