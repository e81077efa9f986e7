package pricing

import (
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/money"
)

// litellmFile builds a LiteLLM price map the size of the published
// model_prices_and_context_window.json (thousands of entries) from the shapes LiteLLM documents
// and ships: chat models with cache, batch, reasoning and long-context prices under every
// provider prefix, embeddings, image, audio, rerank and search models priced per pixel, second or
// query, the "sample_spec" template, a "last_updated" string some copies add at the top, and the
// Azure entry whose batch prices cut input and output by different fractions. It returns the
// file and how many entries of each kind it holds.
func litellmFile(t testing.TB) (data []byte, chat, notToken int) {
	t.Helper()
	top := map[string]any{
		"last_updated": "2026-11-30",
		"sample_spec": map[string]any{
			"input_cost_per_token": 0.0, "output_cost_per_token": 0.0,
			"litellm_provider": "one of https://docs.litellm.ai/docs/providers", "mode": "one of: chat, embedding, ...",
		},
		// Azure's US data-zone price: batch input 6e-08 of 1.1e-07 (45.45% off), batch output
		// 2.2e-07 of 4.4e-07 (50% off).
		"azure/us/gpt-4.1-nano-2025-04-14": map[string]any{
			"litellm_provider": "azure", "mode": "chat", "max_tokens": 32768,
			"input_cost_per_token": json.Number("1.1e-07"), "output_cost_per_token": json.Number("4.4e-07"),
			"cache_read_input_token_cost":  json.Number("2.75e-08"),
			"input_cost_per_token_batches": json.Number("6e-08"), "output_cost_per_token_batches": json.Number("2.2e-07"),
			"supports_function_calling": true, "supported_modalities": []string{"text", "image"},
		},
	}
	notToken = 2 // sample_spec, last_updated
	chat = 1
	providers := []string{"openai", "azure", "anthropic", "bedrock", "vertex_ai-language-models", "gemini", "mistral", "groq", "together_ai", "deepinfra", "fireworks_ai", "openrouter"}
	for i := 0; i < 2400; i++ {
		prov := providers[i%len(providers)]
		in := int64(50 + i%400) // nano-dollars per token × 1000, i.e. $0.05 .. $0.45 per million
		e := map[string]any{
			"litellm_provider": prov, "mode": "chat", "max_input_tokens": 128000, "max_output_tokens": 8192,
			"input_cost_per_token": json.Number(fmt.Sprintf("%de-09", in)), "output_cost_per_token": json.Number(fmt.Sprintf("%de-09", 4*in)),
			"supports_vision": i%2 == 0, "supports_prompt_caching": i%3 == 0,
			"supported_endpoints": []string{"/v1/chat/completions"},
		}
		switch i % 6 {
		case 0: // Anthropic-style cache prices with a 1-hour write and a long-context tier
			e["cache_creation_input_token_cost"] = json.Number(fmt.Sprintf("%de-09", in*5/4))
			e["cache_creation_input_token_cost_above_1hr"] = json.Number(fmt.Sprintf("%de-09", in*2))
			e["cache_read_input_token_cost"] = json.Number(fmt.Sprintf("%de-10", in))
			e["input_cost_per_token_above_200k_tokens"] = json.Number(fmt.Sprintf("%de-09", in*2))
		case 1: // same batch discount on both sides
			e["input_cost_per_token_batches"] = json.Number(fmt.Sprintf("%de-09", in/2))
			e["output_cost_per_token_batches"] = json.Number(fmt.Sprintf("%de-09", 2*in))
		case 2: // a separate reasoning price and nulls LiteLLM writes for unknown figures
			e["output_cost_per_reasoning_token"] = json.Number(fmt.Sprintf("%de-09", 5*in))
			e["cache_read_input_token_cost"] = nil
		case 3: // a search price object beside the token prices
			e["search_context_cost_per_query"] = map[string]any{"search_context_size_low": 0.025, "search_context_size_high": 0.05}
		}
		key := fmt.Sprintf("%s/model-%04d", prov, i)
		if i%5 == 0 {
			key = fmt.Sprintf("model-%04d", i)
		}
		top[key] = e
		chat++
	}
	for i := 0; i < 300; i++ { // embeddings: output priced at 0, still token-priced
		top[fmt.Sprintf("openai/embed-%03d", i)] = map[string]any{"litellm_provider": "openai", "mode": "embedding",
			"input_cost_per_token": json.Number("2e-08"), "output_cost_per_token": 0}
		chat++
	}
	for i := 0; i < 400; i++ { // image, audio, rerank and search models: no per-token prices
		var e map[string]any
		switch i % 4 {
		case 0:
			e = map[string]any{"litellm_provider": "openai", "mode": "image_generation", "input_cost_per_pixel": 4.0054321e-08, "output_cost_per_pixel": 0.0}
		case 1:
			e = map[string]any{"litellm_provider": "openai", "mode": "audio_transcription", "input_cost_per_second": 0.0001}
		case 2:
			e = map[string]any{"litellm_provider": "cohere", "mode": "rerank", "input_cost_per_query": 0.002}
		case 3:
			e = map[string]any{"litellm_provider": "perplexity", "mode": "search", "search_cost_per_query": 0.005}
		}
		top[fmt.Sprintf("media/model-%03d", i)] = e
		notToken++
	}
	data, err := json.MarshalIndent(top, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return data, chat, notToken
}

// TestLiteLLMRealFile loads a generated file of LiteLLM's size and shapes through Load, as
// `ledgerd serve --prices` and `costcalc prices --prices` do: it must load, price every chat and
// embedding entry, skip the rest by reason, and price Azure's split batch discount exactly.
func TestLiteLLMRealFile(t *testing.T) {
	t.Parallel()
	data, chat, notToken := litellmFile(t)
	path := filepath.Join(t.TempDir(), "model_prices_and_context_window.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if chat+notToken < 3000 {
		t.Fatalf("only %d entries generated", chat+notToken)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	_, rep, err := LoadReported(path)
	if err != nil {
		t.Fatal(err)
	}
	counts := rep.Counts()
	if rep.Priced != chat || counts[SkipNotTokenPriced] != notToken-1 || counts[SkipNotObject] != 1 {
		t.Errorf("report %s; want %d priced, %d not priced per token, 1 not an entry", rep.Summary(), chat, notToken-1)
	}
	if w := rep.Warnings(); len(w) != 1 || !strings.Contains(w[0], `"last_updated"`) || !strings.Contains(w[0], "a string") {
		t.Errorf("warnings = %q, want one naming last_updated", w)
	}
	if s := rep.Summary(); !strings.Contains(s, "2,701 models priced") || !strings.Contains(s, "401 not priced per token") {
		t.Errorf("summary = %q", s)
	}

	m, ok := c.Lookup("azure", "us/gpt-4.1-nano-2025-04-14")
	if !ok {
		t.Fatal("azure/us/gpt-4.1-nano-2025-04-14 not imported")
	}
	p := m.Prices[0]
	if p.BatchDiscount == nil || p.BatchOutputDiscount == nil || p.BatchDiscount.String() != "0.454545455" || p.BatchOutputDiscount.String() != "0.5" {
		t.Fatalf("batch discounts %v / %v, want 0.454545455 input, 0.5 output", p.BatchDiscount, p.BatchOutputDiscount)
	}
	// One million input and one million output tokens in a batch: $0.06 + $0.22, as the file's
	// batch prices say (the input discount is held to nine places: 0.11 × 0.545454545).
	u := Usage{Provider: "azure", Model: "azure/us/gpt-4.1-nano-2025-04-14", At: time.Now(), InputTokens: 1_000_000, OutputTokens: 1_000_000, Batch: true}
	got, err := c.Cost(u)
	if err != nil {
		t.Fatal(err)
	}
	if want := money.Nanos(60_000_000 + 220_000_000); got.Total != want || got.Output != 220_000_000 {
		t.Errorf("batch cost %v (output %v), want %v", got.Total, got.Output, want)
	}
	// The exact path (CostTimes) agrees with the int64 one.
	slow, err := c.CostTimes(u, big.NewRat(1, 1))
	if err != nil {
		t.Fatal(err)
	}
	slow.Version, got.Version = Version{}, Version{}
	if slow != got {
		t.Errorf("CostTimes %+v, Cost %+v", slow, got)
	}
}

// TestLiteLLMSkips checks that an entry ledgerd cannot represent is skipped with its reason while
// the rest of the file loads, and that a file not shaped like LiteLLM's still fails clearly.
func TestLiteLLMSkips(t *testing.T) {
	t.Parallel()
	good := `"ok": {"litellm_provider": "openai", "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06}`
	cases := []struct {
		name, src string
		reason    SkipReason
		detail    string
	}{
		// a price that is not a number is a broken entry, not a free model
		{"string price", `{"m": {"litellm_provider": "openai", "input_cost_per_token": "cheap", "output_cost_per_token": 1e-06}, ` + good + `}`, SkipUnsupported, "input_cost_per_token"},
		// booleans are not prices
		{"bool price", `{"m": {"litellm_provider": "openai", "input_cost_per_token": 1e-06, "output_cost_per_token": true}, ` + good + `}`, SkipUnsupported, "output_cost_per_token"},
		// a batch price above the base price is no discount
		{"batch above base", `{"m": {"litellm_provider": "openai", "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06, "input_cost_per_token_batches": 2e-06}, ` + good + `}`, SkipUnsupported, "between 0 and 1"},
		// negative prices are refused
		{"negative", `{"m": {"litellm_provider": "openai", "input_cost_per_token": -1e-06, "output_cost_per_token": 2e-06}, ` + good + `}`, SkipUnsupported, "decimal"},
		// absurd exponents are refused before math/big sees them
		{"huge exponent", `{"m": {"litellm_provider": "openai", "input_cost_per_token": 1e-999999, "output_cost_per_token": 1e-06}, ` + good + `}`, SkipUnsupported, "decimal"},
		// a top-level value that is not an entry
		{"array", `{"m": [1, 2], ` + good + `}`, SkipNotObject, "an array"},
		{"last_updated", `{"m": "2026-11-30", ` + good + `}`, SkipNotObject, "a string"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			models, rep, err := parseFile([]byte(tc.src), "prices.json")
			if err != nil {
				t.Fatalf("parseFile: %v", err)
			}
			if len(models) != 1 || models[0].ID != "ok" {
				t.Errorf("models %+v, want only ok", models)
			}
			if len(rep.Skipped) != 1 || rep.Skipped[0].Entry != "m" || rep.Skipped[0].Reason != tc.reason || !strings.Contains(rep.Skipped[0].Detail, tc.detail) {
				t.Errorf("skipped %+v, want m: %s mentioning %q", rep.Skipped, tc.reason, tc.detail)
			}
			if w := rep.Warnings(); len(w) != 1 || !strings.Contains(w[0], `"m"`) {
				t.Errorf("warnings %q", w)
			}
		})
	}
}
