package pricing

import (
	"bytes"
	"encoding/json"
	"errors"
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

// parseLiteLLM reads LiteLLM's model_prices_and_context_window.json. A file of someone else's
// thousands of entries must load, so an entry is skipped, never fatal: entries without both an
// input and an output price per token (image, audio and rerank models, the "sample_spec"
// template), values that are not objects (a "last_updated" string) and entries whose prices
// ledgerd cannot represent are listed in the report with the reason. Only a file in which no entry
// looks like LiteLLM's (none has "litellm_provider"), or in which nothing could be priced, is
// refused. Per-token prices are read from the JSON number's text, never as float64. When a model
// appears both bare and with a provider prefix ("gpt-4o", "openai/gpt-4o"), the bare entry wins.
func parseLiteLLM(top map[string]json.RawMessage, name string) ([]Model, LoadReport, error) {
	rep := LoadReport{File: name, Format: "LiteLLM price map"}
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
	seen := map[string]string{}
	var models []Model
	litellmShaped := false
	for _, k := range keys {
		m, shaped, err := litellmModel(k, top[k], name)
		litellmShaped = litellmShaped || shaped
		var skip *Skip
		switch {
		case errors.Is(err, errNotObject):
			skip = &Skip{Entry: k, Reason: SkipNotObject, Detail: err.Error()}
		case errors.Is(err, errNotTokenPriced):
			skip = &Skip{Entry: k, Reason: SkipNotTokenPriced}
		case err != nil:
			skip = &Skip{Entry: k, Reason: SkipUnsupported, Detail: err.Error()}
		}
		if skip != nil {
			rep.Skipped = append(rep.Skipped, *skip)
			continue
		}
		id := m.Provider + "\x00" + strings.ToLower(m.ID)
		if first, dup := seen[id]; dup {
			rep.Skipped = append(rep.Skipped, Skip{Entry: k, Reason: SkipDuplicate, Detail: "same model as " + first})
			continue
		}
		seen[id] = k
		models = append(models, m)
	}
	if !litellmShaped {
		return nil, rep, fmt.Errorf("%w: %s: neither a ledgerd catalog (no \"models\" list) nor a LiteLLM price map (no entry has \"litellm_provider\")", ErrCatalog, name)
	}
	if len(models) == 0 {
		return nil, rep, fmt.Errorf("%w: %s: no model with per-token input and output prices (%s)", ErrCatalog, name, rep.skipCounts())
	}
	rep.Priced = len(models)
	return models, rep, nil
}

// errNotObject and errNotTokenPriced tell parseLiteLLM why litellmModel left an entry out.
var (
	errNotObject      = errors.New("not an object")
	errNotTokenPriced = errors.New("no per-token input and output prices")
)

// litellmModel converts one entry. shaped says the entry looks like LiteLLM's (an object with
// "litellm_provider"), whether or not it could be converted. The error wraps errNotObject or
// errNotTokenPriced for entries that are not models priced per token, and otherwise says which
// price ledgerd cannot represent.
func litellmModel(key string, raw json.RawMessage, source string) (m Model, shaped bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var e map[string]any
	if err := dec.Decode(&e); err != nil || e == nil {
		return Model{}, false, fmt.Errorf("%w: %s", errNotObject, jsonKind(raw))
	}
	provider, _ := e["litellm_provider"].(string)
	shaped = provider != ""
	in, hasIn := e["input_cost_per_token"]
	out, hasOut := e["output_cost_per_token"]
	if provider == "" || !hasIn || !hasOut || key == "sample_spec" {
		return Model{}, shaped, errNotTokenPriced
	}
	id := key
	if p, rest, ok := strings.Cut(key, "/"); ok && (p == provider || NormalizeProvider(p) == NormalizeProvider(provider)) {
		id = rest
	}
	p := Price{EffectiveFrom: litellmEpoch, Source: "LiteLLM price file " + source}
	if p.Input, err = litellmRate(in); err != nil {
		return Model{}, true, fmt.Errorf("input_cost_per_token: %w", err)
	}
	if p.Output, err = litellmRate(out); err != nil {
		return Model{}, true, fmt.Errorf("output_cost_per_token: %w", err)
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
				return Model{}, true, fmt.Errorf("%s: %w", f.key, err)
			}
		}
	}
	if v, ok := e["output_cost_per_reasoning_token"]; ok && v != nil {
		r, err := litellmRate(v)
		if err != nil {
			return Model{}, true, fmt.Errorf("output_cost_per_reasoning_token: %w", err)
		}
		if r != p.Output {
			p.Reasoning = &r
		}
	}
	if p.BatchDiscount, p.BatchOutputDiscount, err = litellmBatch(e, p.Rates); err != nil {
		return Model{}, true, err
	}
	if p.LongContext, err = litellmTiers(e, p.Rates); err != nil {
		return Model{}, true, err
	}
	m = Model{Provider: provider, ID: id, Prices: []Price{p}}
	if err := finish(&m); err != nil {
		return Model{}, true, err
	}
	return m, true, nil
}

// jsonKind names the kind of a JSON value that is not an object, for the skip warning.
func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "empty"
	}
	switch t[0] {
	case '"':
		return "a string"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '{':
		return "a malformed object"
	default:
		return "a number"
	}
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

// litellmBatch derives the batch discounts from the batch prices: the input's, and the output's
// when it differs. A file giving only one side's batch price gives that discount to both.
func litellmBatch(e map[string]any, base Rates) (in, out *Ratio, err error) {
	var found [2]*Ratio
	for i, f := range []struct {
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
			return nil, nil, fmt.Errorf("%s: %w", f.key, err)
		}
		r, err := ratioFromRat(new(big.Rat).Sub(big.NewRat(1, 1), big.NewRat(int64(b), int64(f.base))))
		if err != nil {
			return nil, nil, fmt.Errorf("%s: batch discount %w", f.key, err)
		}
		found[i] = &r
	}
	switch {
	case found[0] == nil && found[1] == nil:
		return nil, nil, nil
	case found[0] == nil:
		return found[1], nil, nil
	case found[1] == nil || *found[0] == *found[1]:
		return found[0], nil, nil
	default:
		return found[0], found[1], nil
	}
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
