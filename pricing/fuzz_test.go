package pricing

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/money"
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
	back, _, err := parseFile(b, "round-trip.json")
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
		models, _, err := parseFile(data, "fuzz.yaml")
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
		models, _, err := parseFile(data, "fuzz.json")
		if err != nil {
			return
		}
		checkParsed(t, models)
	})
}

// FuzzCostFastPath checks that Cost's int64 path prices exactly as the rational path (CostTimes
// with n = 1) does, errors included: on every price version of the embedded catalog and on a
// synthetic version made of the fuzzer's rates. Each input is tried as given, mostly huge numbers
// that the fast path must hand to the rational path, and folded into a real request's range,
// where the fast path does the work.
func FuzzCostFastPath(f *testing.F) {
	emb, err := Load("")
	if err != nil {
		f.Fatal(err)
	}
	type version struct {
		m *Model
		p *Price
	}
	var versions []version
	for i := range emb.models {
		m := &emb.models[i]
		for j := range m.Prices {
			versions = append(versions, version{m, &m.Prices[j]})
		}
	}
	for i := range versions {
		// A realistic request on every version: 2.5M nanos/M input, 10M output and so on.
		f.Add(uint16(i), int64(time.Hour), int64(3_214), int64(1_187), int64(12_480), int64(4_096), int64(48_913), int64(612), i%2 == 0,
			int64(2_500_000_000), int64(10_000_000_000), int64(3_125_000_000), int64(5_000_000_000), int64(250_000_000), int64(40_000_000_000), i%3 == 0,
			int64(500_000_000), false, int64(100_000), uint8(i))
	}
	// At the edges: the one-token-over threshold, 2^40 tokens, a rate whose product is MaxInt64.
	f.Add(uint16(0), int64(0), int64(100_001), int64(1), int64(0), int64(0), int64(0), int64(0), true,
		int64(7), int64(1), int64(1), int64(1), int64(1), int64(1), false, int64(1_000_000_000), false, int64(100_000), uint8(1))
	f.Add(uint16(1), int64(-1), int64(1<<40), int64(1<<40-1), int64(1<<40-1), int64(1<<39), int64(1<<40-1), int64(1<<39), false,
		int64(1<<22), int64(1<<22), int64(1<<22), int64(1<<22), int64(1<<22), int64(1<<22), true, int64(0), false, int64(1), uint8(2))
	f.Add(uint16(2), int64(0), int64(7), int64(0), int64(0), int64(0), int64(0), int64(0), false,
		int64(math.MaxInt64/7), int64(0), int64(0), int64(0), int64(0), int64(0), false, int64(-1), true, int64(1<<62), uint8(3))
	f.Fuzz(func(t *testing.T, pick uint16, offset, in, out, cw, cw1h, cr, reasoning int64, batch bool,
		rIn, rOut, rWrite5m, rWrite1h, rRead, rReasoning int64, hasReasoning bool,
		discount int64, noBatch bool, above int64, tierTimes uint8) {
		raw := Usage{InputTokens: in, OutputTokens: out, CacheWriteTokens: cw, CacheWrite1hTokens: cw1h,
			CacheReadTokens: cr, ReasoningTokens: reasoning, Batch: batch}
		folded := Usage{InputTokens: fold(in, 1<<21), OutputTokens: fold(out, 1<<21), CacheWriteTokens: fold(cw, 1<<21),
			CacheReadTokens: fold(cr, 1<<21), Batch: batch}
		folded.CacheWrite1hTokens = fold(cw1h, folded.CacheWriteTokens+1)
		folded.ReasoningTokens = fold(reasoning, folded.OutputTokens+1)

		v := versions[int(pick)%len(versions)]
		for i, u := range []Usage{raw, folded} {
			u.Provider, u.Model = v.m.Provider, v.m.ID
			u.At = v.p.EffectiveFrom.Add(time.Duration(offset))
			if i == 1 {
				u.At = v.p.EffectiveFrom.Add(time.Duration(fold(offset, int64(400*24*time.Hour))))
			}
			sameCost(t, emb, u)
		}

		for i, u := range []Usage{raw, folded} {
			r := Rates{Input: money.Nanos(rIn), Output: money.Nanos(rOut), CacheWrite5m: money.Nanos(rWrite5m),
				CacheWrite1h: money.Nanos(rWrite1h), CacheRead: money.Nanos(rRead)}
			d := Ratio(discount)
			if i == 1 {
				// Up to $1,000 per million tokens, the bound of the fast path at 2^23 tokens.
				r = Rates{Input: money.Nanos(fold(rIn, 1e12)), Output: money.Nanos(fold(rOut, 1e12)),
					CacheWrite5m: money.Nanos(fold(rWrite5m, 1e12)), CacheWrite1h: money.Nanos(fold(rWrite1h, 1e12)),
					CacheRead: money.Nanos(fold(rRead, 1e12))}
				rReasoning = fold(rReasoning, 1e12)
				d = Ratio(fold(discount, int64(ratioOne)+1))
			}
			if hasReasoning {
				r.Reasoning = new(money.Nanos(rReasoning))
			}
			tier := r
			times := money.Nanos(tierTimes%4 + 1)
			tier.Input, tier.Output, tier.CacheWrite5m, tier.CacheWrite1h, tier.CacheRead =
				r.Input*times, r.Output*times, r.CacheWrite5m*times, r.CacheWrite1h*times, r.CacheRead*times
			p := Price{Key: "synthetic/m@2026-01-01#0", EffectiveFrom: jan, Source: "fuzz", Rates: r,
				LongContext: []Tier{{AboveInputTokens: above, Rates: tier}}}
			if !noBatch {
				p.BatchDiscount = &d
			}
			c, err := build([]Model{{Provider: "synthetic", ID: "m", Prices: []Price{p}}})
			if err != nil {
				t.Fatal(err)
			}
			u.Provider, u.Model, u.At = "synthetic", "m", jan
			sameCost(t, c, u)
		}
	})
}

// fold maps v into [0, n), n > 0, so that a fuzzer's number becomes a plausible count or rate.
func fold(v, n int64) int64 {
	v %= n
	if v < 0 {
		v = -v
	}
	return v
}

// sameCost fails t unless Cost and the rational path give the same cost and the same error for u.
func sameCost(t *testing.T, c *Catalog, u Usage) {
	t.Helper()
	got, gotErr := c.Cost(u)
	want, wantErr := c.CostTimes(u, big.NewRat(1, 1))
	if got != want || fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("Cost(%+v)\n = %+v, %v\nwant %+v, %v", u, got, gotErr, want, wantErr)
	}
	for _, target := range []error{ErrUsage, ErrUnpriced, money.ErrRange} {
		if errors.Is(gotErr, target) != errors.Is(wantErr, target) {
			t.Fatalf("Cost(%+v): error %v, want %v", u, gotErr, wantErr)
		}
	}
}
