package pricing

import (
	"errors"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/money"
)

func loadLiteLLMSample(t *testing.T) *Catalog {
	t.Helper()
	data, err := os.ReadFile("testdata/litellm_sample.json")
	if err != nil {
		t.Fatal(err)
	}
	models, _, err := parseFile(data, "litellm_sample.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := build(models)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLiteLLMImport(t *testing.T) {
	t.Parallel()
	c := loadLiteLLMSample(t)
	nanos := func(p *money.Nanos) money.Nanos {
		if p == nil {
			return -1
		}
		return *p
	}
	cases := []struct {
		name            string
		provider, model string
		check           func(Price) bool
	}{
		// per-token floats become exact dollars per million: 3e-06 is exactly $3
		{"exact decimals", "anthropic", "claude-sonnet-4-20250514", func(p Price) bool {
			return p.Input == 3*money.PerDollar && p.Output == 15*money.PerDollar &&
				p.CacheWrite5m == 3_750_000_000 && p.CacheWrite1h == 6*money.PerDollar && p.CacheRead == 300_000_000
		}},
		// the batch prices become a 50% discount
		{"batch discount", "anthropic", "claude-sonnet-4-20250514", func(p Price) bool {
			return p.BatchDiscount != nil && p.BatchDiscount.String() == "0.5"
		}},
		// every _above_200k_tokens key lands in one tier, the 1-hour write included
		{"long-context tier", "anthropic", "claude-sonnet-4-20250514", func(p Price) bool {
			return len(p.LongContext) == 1 && p.LongContext[0].AboveInputTokens == 200_000 &&
				p.LongContext[0].Input == 6*money.PerDollar && p.LongContext[0].Output == 22_500_000_000 &&
				p.LongContext[0].CacheWrite5m == 7_500_000_000 && p.LongContext[0].CacheWrite1h == 12*money.PerDollar &&
				p.LongContext[0].CacheRead == 600_000_000
		}},
		// a cache price the file lacks is billed as input (OpenAI writes)
		{"missing cache write", "openai", "gpt-4o", func(p Price) bool {
			return p.CacheWrite5m == p.Input && p.CacheRead == 1_250_000_000
		}},
		// the bare entry wins over the provider-prefixed one
		{"bare entry wins", "openai", "gpt-4o", func(p Price) bool { return p.Input == 2_500_000_000 }},
		// a provider prefix is stripped from the id; a tier lacking a price keeps the base one
		{"prefixed id", "gemini", "gemini-2.5-pro", func(p Price) bool {
			return p.Input == 1_250_000_000 && len(p.LongContext) == 1 && p.LongContext[0].CacheWrite5m == p.CacheWrite5m
		}},
		// a reasoning price equal to the output price adds nothing
		{"reasoning same as output", "gemini", "gemini-2.5-pro", func(p Price) bool { return p.Reasoning == nil }},
		// a distinct reasoning price is kept, under the normalised provider
		{"reasoning price", "vertex_ai", "gemini-2.5-flash-preview-04-17", func(p Price) bool { return nanos(p.Reasoning) == 3_500_000_000 }},
		// float noise beyond fifteen places per token is rounded off
		{"float noise", "openai", "noisy-model", func(p Price) bool { return p.Input == 3*money.PerDollar && p.Output == 100_000_000 }},
		// no batch prices: batch requests stay unpriced
		{"no batch", "openai", "noisy-model", func(p Price) bool { return p.BatchDiscount == nil }},
		// a free output price is a price, not a missing one
		{"zero output", "openai", "text-embedding-3-small", func(p Price) bool { return p.Output == 0 && p.Input == 20_000_000 }},
		// dateless prices apply to every attempt
		{"epoch", "openai", "gpt-4o", func(p Price) bool { return p.EffectiveFrom.Equal(time.Unix(0, 0)) }},
		// the source names the file
		{"source", "openai", "gpt-4o", func(p Price) bool { return strings.Contains(p.Source, "litellm_sample.json") }},
	}
	for _, tc := range cases {
		m, ok := c.Lookup(tc.provider, tc.model)
		if !ok {
			t.Errorf("%s: %s/%s not imported", tc.name, tc.provider, tc.model)
			continue
		}
		if !tc.check(m.Prices[0]) {
			t.Errorf("%s: %s/%s imported as %+v", tc.name, tc.provider, tc.model, m.Prices[0])
		}
	}
	for _, skipped := range []string{"sample_spec", "dall-e-3", "whisper-1"} {
		if _, ok := c.Lookup("", skipped); ok {
			t.Errorf("%s has no token prices and should be skipped", skipped)
		}
	}
}

// TestLiteLLMMatchesCatalog prices the same long-context batch request with the imported Sonnet 4
// and the embedded one: both describe Anthropic's prices and must agree to the nano-dollar.
func TestLiteLLMMatchesCatalog(t *testing.T) {
	t.Parallel()
	imported := loadLiteLLMSample(t)
	embedded := embeddedCatalog(t)
	u := Usage{Provider: "anthropic", Model: "claude-sonnet-4-20250514", At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		InputTokens: 150_001, CacheWriteTokens: 40_000, CacheWrite1hTokens: 10_000, CacheReadTokens: 10_000, OutputTokens: 3_333, Batch: true}
	for _, n := range []*big.Rat{big.NewRat(1, 1), big.NewRat(7, 3)} {
		a, err := imported.CostTimes(u, n)
		if err != nil {
			t.Fatal(err)
		}
		b, err := embedded.CostTimes(u, n)
		if err != nil {
			t.Fatal(err)
		}
		a.Version, b.Version = Version{}, Version{}
		if a != b || !a.LongContext {
			t.Errorf("×%s: imported %+v, embedded %+v", n.RatString(), a, b)
		}
	}
}

func TestLiteLLMErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src, want string
	}{
		// a JSON object that is no LiteLLM map (no entry names its provider) is not taken for one
		{"not litellm", `{"gpt-4o": {"input": 2.5, "output": 10}, "claude": {"input": 3}}`, "neither a ledgerd catalog"},
		// nothing but values that are not entries
		{"only strings", `{"last_updated": "2026-11-30"}`, "neither a ledgerd catalog"},
		// a file with nothing to import is refused rather than silently empty
		{"nothing priced", `{"dall-e-3": {"litellm_provider": "openai", "input_cost_per_pixel": 4e-08}}`, "no model"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := parseFile([]byte(tc.src), "prices.json")
			if !errors.Is(err, ErrCatalog) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v, want ErrCatalog mentioning %q", err, tc.want)
			}
		})
	}
}
