package pricing

import (
	"encoding/json"
	"math/big"
	"slices"
	"testing"
	"time"
)

// checkParsed holds what any successfully parsed price file must satisfy: the catalog builds or
// fails cleanly, every model prices a request without panicking, and the JSON listing of the
// catalog loads back with the same versions.
func checkParsed(t *testing.T, models []Model) {
	c, err := build(models)
	if err != nil {
		return
	}
	for _, m := range c.Models() {
		if len(m.Prices) == 0 || m.Prices[0].Key == "" {
			t.Fatalf("model %s/%s without a keyed price", m.Provider, m.ID)
		}
		u := Usage{Provider: m.Provider, Model: m.ID, At: time.Now(), InputTokens: 250_000, OutputTokens: 7,
			CacheWriteTokens: 3, CacheWrite1hTokens: 1, CacheReadTokens: 5, ReasoningTokens: 2}
		if _, err := c.CostTimes(u, big.NewRat(3, 7)); err != nil && m.Prices[len(m.Prices)-1].EffectiveFrom.Before(u.At) {
			t.Fatalf("pricing %s/%s: %v", m.Provider, m.ID, err)
		}
	}
	b, err := json.Marshal(map[string]any{"models": c.Models()})
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	back, err := parseFile(b, "round-trip.json")
	if err != nil {
		t.Fatalf("the JSON listing does not load back: %v\n%s", err, b)
	}
	c2, err := build(back)
	if err != nil {
		t.Fatalf("the JSON listing does not build: %v", err)
	}
	if !slices.Equal(c.Versions(), c2.Versions()) {
		t.Fatalf("versions changed in a round trip:\n%v\n%v", c.Versions(), c2.Versions())
	}
}

func FuzzParseCatalog(f *testing.F) {
	f.Add([]byte(testYAML))
	f.Add(embedded)
	f.Add([]byte(`{"models": [{"provider": "p", "id": "m", "prices": [{"effective_from": "2026-01-01T12:00:00Z", "source": "s", "input_per_mtok": 1, "output_per_mtok": "2e-3"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		models, err := parseFile(data, "fuzz.yaml")
		if err != nil {
			return
		}
		checkParsed(t, models)
	})
}

func FuzzImportLiteLLM(f *testing.F) {
	f.Add([]byte(`{"m": {"litellm_provider": "openai", "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06}}`))
	f.Add([]byte(`{"a/m": {"litellm_provider": "a", "input_cost_per_token": "3e-06", "output_cost_per_token": 0, "input_cost_per_token_above_128k_tokens": 6e-06, "input_cost_per_token_batches": 1.5e-06}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var top map[string]json.RawMessage
		if json.Unmarshal(data, &top) != nil {
			return
		}
		models, err := parseFile(data, "fuzz.json")
		if err != nil {
			return
		}
		checkParsed(t, models)
	})
}
