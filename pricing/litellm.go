package pricing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ledgerd/ledgerd/money"
)

// litellmEpoch is the effective date of every price imported from a LiteLLM file: the file has no
// dates, so its prices apply to every attempt.
var litellmEpoch = time.Unix(0, 0).UTC()

// litellmTier matches the long-context keys, such as input_cost_per_token_above_200k_tokens.
var litellmTier = regexp.MustCompile(`^(input_cost_per_token|output_cost_per_token|cache_read_input_token_cost|cache_creation_input_token_cost|cache_creation_input_token_cost_above_1hr)_above_(\d{1,6})k_tokens$`)

// parseLiteLLM reads LiteLLM's model_prices_and_context_window.json. Entries without both an
// input and an output price per token (image, audio and rerank models) and the "sample_spec"
// entry are skipped. Per-token prices are read from the JSON number's text, never as float64.
// When a model appears both bare and with a provider prefix ("gpt-4o", "openai/gpt-4o"), the bare
// entry wins.
func parseLiteLLM(top map[string]json.RawMessage, name string) ([]Model, error) {
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		pi, pj := strings.Contains(keys[i], "/"), strings.Contains(keys[j], "/")
		if pi != pj {
			return !pi
		}
		return keys[i] < keys[j]
	})
	seen := map[string]bool{}
	var models []Model
	for _, k := range keys {
		if k == "sample_spec" {
			continue
		}
		m, ok, err := litellmModel(k, top[k], name)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %q: %v", ErrCatalog, name, k, err)
		}
		id := m.Provider + "\x00" + strings.ToLower(m.ID)
		if !ok || seen[id] {
			continue
		}
		seen[id] = true
		models = append(models, m)
	}
	if len(models) == 0 {
		return nil, fmt.Errorf("%w: %s: no model with per-token input and output prices", ErrCatalog, name)
	}
	return models, nil
}

// litellmModel converts one entry; ok is false for entries that carry no token prices.
func litellmModel(key string, raw json.RawMessage, source string) (Model, bool, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var e map[string]any
	if err := dec.Decode(&e); err != nil {
		return Model{}, false, fmt.Errorf("not an object: %w", err)
	}
	provider, _ := e["litellm_provider"].(string)
	in, hasIn := e["input_cost_per_token"]
	out, hasOut := e["output_cost_per_token"]
	if provider == "" || !hasIn || !hasOut {
		return Model{}, false, nil
	}
	id := key
	if p, rest, ok := strings.Cut(key, "/"); ok && (p == provider || NormalizeProvider(p) == NormalizeProvider(provider)) {
		id = rest
	}
	p := Price{EffectiveFrom: litellmEpoch, Source: "LiteLLM price file " + source}
	var err error
	if p.Input, err = litellmRate(in); err != nil {
		return Model{}, false, fmt.Errorf("input_cost_per_token: %w", err)
	}
	if p.Output, err = litellmRate(out); err != nil {
		return Model{}, false, fmt.Errorf("output_cost_per_token: %w", err)
	}
	p.CacheWrite5m, p.CacheWrite1h, p.CacheRead = p.Input, p.Input, p.Input
	fields := []struct {
		key string
		dst *money.Nanos
	}{
		{"cache_creation_input_token_cost", &p.CacheWrite5m},
		{"cache_creation_input_token_cost_above_1hr", &p.CacheWrite1h},
		{"cache_read_input_token_cost", &p.CacheRead},
	}
	for _, f := range fields {
		if v, ok := e[f.key]; ok && v != nil {
			if *f.dst, err = litellmRate(v); err != nil {
				return Model{}, false, fmt.Errorf("%s: %w", f.key, err)
			}
		}
	}
	if v, ok := e["output_cost_per_reasoning_token"]; ok && v != nil {
		r, err := litellmRate(v)
		if err != nil {
			return Model{}, false, fmt.Errorf("output_cost_per_reasoning_token: %w", err)
		}
		if r != p.Output {
			p.Reasoning = &r
		}
	}
	if p.BatchDiscount, err = litellmBatch(e, p.Rates); err != nil {
		return Model{}, false, err
	}
	if p.LongContext, err = litellmTiers(e, p.Rates); err != nil {
		return Model{}, false, err
	}
	m := Model{Provider: provider, ID: id, Prices: []Price{p}}
	if err := finish(&m); err != nil {
		return Model{}, false, err
	}
	return m, true, nil
}

// litellmRate reads a per-token price: a JSON number (kept as its literal text by UseNumber) or a
// decimal string.
func litellmRate(v any) (money.Nanos, error) {
	switch v := v.(type) {
	case json.Number:
		return perTokenRate(v.String())
	case string:
		return perTokenRate(v)
	default:
		return 0, fmt.Errorf("%v is not a number", v)
	}
}

// litellmBatch derives the batch discount from the batch prices; input and output must agree.
func litellmBatch(e map[string]any, base Rates) (*Ratio, error) {
	var found *big.Rat
	for _, f := range []struct {
		key  string
		base money.Nanos
	}{
		{"input_cost_per_token_batches", base.Input},
		{"output_cost_per_token_batches", base.Output},
	} {
		v, ok := e[f.key]
		if !ok || v == nil || f.base == 0 {
			continue
		}
		b, err := litellmRate(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.key, err)
		}
		d := new(big.Rat).Sub(big.NewRat(1, 1), big.NewRat(int64(b), int64(f.base)))
		if found != nil && found.Cmp(d) != 0 {
			return nil, fmt.Errorf("batch prices for input and output imply different discounts")
		}
		found = d
	}
	if found == nil {
		return nil, nil
	}
	r, err := ratioFromRat(found)
	if err != nil {
		return nil, fmt.Errorf("batch discount: %w", err)
	}
	return &r, nil
}

// litellmTiers collects the *_above_Nk_tokens prices into tiers; a price a tier lacks is the base
// price of the same kind.
func litellmTiers(e map[string]any, base Rates) ([]Tier, error) {
	byThreshold := map[int64]*Tier{}
	for k, v := range e {
		sub := litellmTier.FindStringSubmatch(k)
		if sub == nil || v == nil {
			continue
		}
		n, _ := strconv.ParseInt(sub[2], 10, 64)
		r, err := litellmRate(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		t := byThreshold[n*1000]
		if t == nil {
			t = &Tier{AboveInputTokens: n * 1000, Rates: base}
			byThreshold[n*1000] = t
		}
		switch sub[1] {
		case "input_cost_per_token":
			t.Input = r
		case "output_cost_per_token":
			t.Output = r
		case "cache_read_input_token_cost":
			t.CacheRead = r
		case "cache_creation_input_token_cost":
			t.CacheWrite5m = r
		case "cache_creation_input_token_cost_above_1hr":
			t.CacheWrite1h = r
		}
	}
	var tiers []Tier
	for _, t := range byThreshold {
		tiers = append(tiers, *t)
	}
	sort.Slice(tiers, func(i, j int) bool { return tiers[i].AboveInputTokens < tiers[j].AboveInputTokens })
	return tiers, nil
}
