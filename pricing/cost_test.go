package pricing

import (
	"errors"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/money"
)

// testYAML is a model with round prices, so each rule's expected cost can be checked by hand:
// $1 input, $5 output, $1.25 5m write, $2 1h write, $0.10 read, 50% batch, and a tier above 1,000
// input tokens at twice input and 1.5x output.
const testYAML = `
models:
  - provider: test
    id: m
    aliases: [m-2026]
    prices:
      - effective_from: 2026-01-01
        source: test
        input_per_mtok: "1"
        output_per_mtok: "5"
        cache_write_5m_per_mtok: "1.25"
        cache_write_1h_per_mtok: "2"
        cache_read_per_mtok: "0.10"
        batch_discount: "0.5"
        long_context:
          - above_input_tokens: 1000
            input_per_mtok: "2"
            output_per_mtok: "7.50"
            cache_write_5m_per_mtok: "2.50"
            cache_write_1h_per_mtok: "4"
            cache_read_per_mtok: "0.20"
      - effective_from: 2026-06-01
        source: test, later
        input_per_mtok: "3"
        output_per_mtok: "5"
  - provider: test
    id: thinker
    prices:
      - effective_from: 2026-01-01
        source: test
        input_per_mtok: "1"
        output_per_mtok: "2"
        reasoning_per_mtok: "4"
`

func testCatalog(t *testing.T, src string) *Catalog {
	t.Helper()
	models, _, err := parseFile([]byte(src), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := build(models)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func embeddedCatalog(t *testing.T) *Catalog {
	t.Helper()
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var jan = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func TestCostRules(t *testing.T) {
	t.Parallel()
	c := testCatalog(t, testYAML)
	cases := []struct {
		name string
		u    Usage
		want Cost // in micro-dollars (1,000 nanos) for readability; Version is not compared
	}{
		{
			// plain input and output at base prices: 1,000 × $1/M + 100 × $5/M
			name: "input and output",
			u:    Usage{InputTokens: 1000, OutputTokens: 100},
			want: Cost{Total: 1500, Input: 1000, Output: 500, NoCache: 1500},
		},
		{
			// 5-minute cache writes at 1.25x; NoCache bills them as plain input
			name: "5m cache write",
			u:    Usage{CacheWriteTokens: 800},
			want: Cost{Total: 1000, CacheWrite5m: 1000, NoCache: 800},
		},
		{
			// the 1-hour part of the writes is billed at 2x and the rest at 1.25x
			name: "1h cache write",
			u:    Usage{CacheWriteTokens: 800, CacheWrite1hTokens: 300},
			want: Cost{Total: 625 + 600, CacheWrite5m: 625, CacheWrite1h: 600, NoCache: 800},
		},
		{
			// cache reads at 0.1x; NoCache bills them as plain input
			name: "cache read",
			u:    Usage{CacheReadTokens: 900, InputTokens: 100},
			want: Cost{Total: 190, Input: 100, CacheRead: 90, NoCache: 1000},
		},
		{
			// batch halves every component, cache writes and reads included
			name: "batch",
			u:    Usage{InputTokens: 100, OutputTokens: 100, CacheWriteTokens: 400, CacheReadTokens: 400, Batch: true},
			want: Cost{Total: 50 + 250 + 250 + 20, Input: 50, Output: 250, CacheWrite5m: 250, CacheRead: 20, NoCache: 450 + 250},
		},
		{
			// total input of exactly the threshold is not above it: base prices
			name: "long context missed at the threshold",
			u:    Usage{InputTokens: 500, CacheReadTokens: 500, OutputTokens: 10},
			want: Cost{Total: 500 + 50 + 50, Input: 500, Output: 50, CacheRead: 50, NoCache: 1050},
		},
		{
			// one token over, counting cache writes and reads: every token of the request,
			// output included, moves to the tier's prices
			name: "long context hit counts cached input",
			u:    Usage{InputTokens: 1, CacheWriteTokens: 500, CacheReadTokens: 500, OutputTokens: 10},
			want: Cost{Total: 2 + 1250 + 100 + 75, Input: 2, Output: 75, CacheWrite5m: 1250, CacheRead: 100, NoCache: 2002 + 75, LongContext: true},
		},
		{
			// batch, long context and cache multipliers multiply together
			name: "batch with long context and cache",
			u:    Usage{InputTokens: 1000, CacheWriteTokens: 1000, CacheWrite1hTokens: 1000, CacheReadTokens: 1000, OutputTokens: 1000, Batch: true},
			want: Cost{Total: 1000 + 3750 + 2000 + 100, Input: 1000, Output: 3750, CacheWrite1h: 2000, CacheRead: 100, NoCache: 3000 + 3750, LongContext: true},
		},
		{
			// reasoning tokens are inside the output count and never billed again
			name: "reasoning inside output",
			u:    Usage{OutputTokens: 100, ReasoningTokens: 80},
			want: Cost{Total: 500, Output: 500, NoCache: 500},
		},
		{
			// the alias prices as the family, the version chosen by date
			name: "alias and later version",
			u:    Usage{Model: "M-2026", At: time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC), InputTokens: 1000},
			want: Cost{Total: 3000, Input: 3000, NoCache: 3000},
		},
		{
			// a separate reasoning price applies to the reasoning part of the output only
			name: "reasoning price",
			u:    Usage{Model: "thinker", OutputTokens: 100, ReasoningTokens: 60},
			want: Cost{Total: 40*2 + 60*4, Output: 40*2 + 60*4, NoCache: 40*2 + 60*4},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := tc.u
			u.Provider = "test"
			if u.Model == "" {
				u.Model = "m"
			}
			if u.At.IsZero() {
				u.At = jan
			}
			got, err := c.Cost(u)
			if err != nil {
				t.Fatal(err)
			}
			got.Version = Version{}
			if want := micro(tc.want); got != want {
				t.Errorf("Cost(%+v)\n got %+v\nwant %+v", tc.u, got, want)
			}
		})
	}
}

// micro scales a Cost written in micro-dollars to nano-dollars.
func micro(c Cost) Cost {
	for _, p := range []*money.Nanos{&c.Total, &c.Input, &c.Output, &c.CacheWrite5m, &c.CacheWrite1h, &c.CacheRead, &c.NoCache} {
		*p *= 1000
	}
	return c
}

func TestRounding(t *testing.T) {
	t.Parallel()
	c := testCatalog(t, `
models:
  - provider: test
    id: tiny
    prices:
      - effective_from: 2026-01-01
        source: test
        input_per_mtok: "0.0015"
        output_per_mtok: "0.0015"
        batch_discount: "0.5"
`)
	cases := []struct {
		name string
		u    Usage
		want Cost
	}{
		// 1.5 nano-dollars rounds away from zero to 2
		{"half up", Usage{InputTokens: 1}, Cost{Total: 2, Input: 2, NoCache: 2}},
		// 4.5 rounds to 5, not to the even 4
		{"half away, not even", Usage{InputTokens: 3}, Cost{Total: 5, Input: 5, NoCache: 5}},
		// 0.75 after the batch discount rounds to 1
		{"batch", Usage{InputTokens: 1, Batch: true}, Cost{Total: 1, Input: 1, NoCache: 1}},
		// the total is rounded once from the exact sum (3.0), so it is less than the rounded
		// components (2 + 2)
		{"once per record", Usage{InputTokens: 1, OutputTokens: 1}, Cost{Total: 3, Input: 2, Output: 2, NoCache: 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := tc.u
			u.Provider, u.Model, u.At = "test", "tiny", jan
			got, err := c.Cost(u)
			if err != nil {
				t.Fatal(err)
			}
			got.Version = Version{}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCostTimesKeepsThresholdPerRequest(t *testing.T) {
	t.Parallel()
	c := testCatalog(t, testYAML)
	u := Usage{Provider: "test", Model: "m", At: jan, InputTokens: 600, OutputTokens: 1}
	// 1,000 requests of 600 input tokens stay below the 1,000-token threshold each, although
	// together they hold 600,000 input tokens.
	got, err := c.CostTimes(u, big.NewRat(1000, 1))
	if err != nil {
		t.Fatal(err)
	}
	if got.LongContext || got.Total != 605_000_000 {
		t.Errorf("CostTimes = %+v, want 605000000 without long context", got)
	}
	// A third of a request is priced exactly and rounded once: 605,000/3 = 201,666.67 nanos.
	third, err := c.CostTimes(u, big.NewRat(1, 3))
	if err != nil {
		t.Fatal(err)
	}
	if third.Total != 201_667 {
		t.Errorf("CostTimes(1/3).Total = %d, want 201667", third.Total)
	}
}

func TestCostErrors(t *testing.T) {
	t.Parallel()
	c := testCatalog(t, testYAML)
	cases := []struct {
		name string
		u    Usage
		want error
	}{
		// an unknown model is unpriced, never $0
		{"unknown model", Usage{Provider: "test", Model: "nope", At: jan}, ErrUnpriced},
		// a known model under another provider is not the same price
		{"other provider", Usage{Provider: "openai", Model: "m", At: jan}, ErrUnpriced},
		// before the first version there is no price
		{"before first price", Usage{Provider: "test", Model: "m", At: jan.AddDate(-1, 0, 0)}, ErrUnpriced},
		// the later version has no batch discount: a batch request there is unpriced
		{"no batch price", Usage{Provider: "test", Model: "m", At: jan.AddDate(0, 6, 0), Batch: true}, ErrUnpriced},
		// negative counts cannot happen
		{"negative", Usage{Provider: "test", Model: "m", At: jan, InputTokens: -1}, ErrUsage},
		// the 1-hour writes are part of the writes
		{"1h above writes", Usage{Provider: "test", Model: "m", At: jan, CacheWriteTokens: 1, CacheWrite1hTokens: 2}, ErrUsage},
		// reasoning is part of the output
		{"reasoning above output", Usage{Provider: "test", Model: "m", At: jan, OutputTokens: 1, ReasoningTokens: 2}, ErrUsage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := c.Cost(tc.u); !errors.Is(err, tc.want) {
				t.Errorf("Cost(%+v) error = %v, want %v", tc.u, err, tc.want)
			}
		})
	}
	if _, err := c.CostTimes(Usage{Provider: "test", Model: "m", At: jan}, big.NewRat(-1, 1)); !errors.Is(err, ErrUsage) {
		t.Errorf("CostTimes(-1) error = %v, want ErrUsage", err)
	}
}

func TestVersionByEffectiveDate(t *testing.T) {
	t.Parallel()
	c := embeddedCatalog(t)
	cut := time.Date(2026, 10, 7, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		at   time.Time
		want money.Nanos // 1M cache-read tokens on Sonnet 5.5
		from string
	}{
		// the launch price before Anthropic's cache-read cut
		{"before the cut", cut.Add(-time.Nanosecond), 200_000_000, "2026-09-28"},
		// a version applies from its effective instant itself
		{"at the cut", cut, 100_000_000, "2026-10-07"},
		// and stays until the next version
		{"after the cut", cut.AddDate(0, 1, 0), 100_000_000, "2026-10-07"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := c.Cost(Usage{Provider: "anthropic", Model: "claude-sonnet-5-5", At: tc.at, CacheReadTokens: 1_000_000})
			if err != nil {
				t.Fatal(err)
			}
			if got.Total != tc.want || got.Version.EffectiveFrom.Format("2006-01-02") != tc.from {
				t.Errorf("at %s: %s with %s, want %s with version from %s", tc.at, got.Total, got.Version.Key, tc.want, tc.from)
			}
		})
	}
}

// TestWorkedFigures checks the figures of shared/PRICING.md against the embedded catalog.
func TestWorkedFigures(t *testing.T) {
	t.Parallel()
	c := embeddedCatalog(t)
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	router := func(model string) Usage {
		return Usage{Provider: "anthropic", Model: model, At: at, InputTokens: 333, OutputTokens: 9}
	}
	month := func(callsPerDay int64) *big.Rat { return big.NewRat(callsPerDay*30, 1) }
	cases := []struct {
		name string
		u    Usage
		n    *big.Rat
		want money.Nanos
	}{
		// 333 × $0.10/M + 9 × $0.50/M = $0.0000378 a call
		{"haiku per call", router("claude-haiku-5-5"), big.NewRat(1, 1), 37_800},
		// 2,000 calls a day for 30 days: about $2 a month
		{"haiku 2000/day month", router("claude-haiku-5-5"), month(2000), 2_268_000_000},
		// Sonnet 5.5 at the same counts: about $45 a month
		{"sonnet 2000/day month", router("claude-sonnet-5-5"), month(2000), 45_360_000_000},
		// 50,000 calls a day on Haiku: about $57 a month
		{"haiku 50000/day month", router("claude-haiku-5-5"), month(50_000), 56_700_000_000},
		// Sonnet 4 above 200K total input: $6 / $22.50 for the whole request
		{"sonnet 4 long context", Usage{Provider: "anthropic", Model: "claude-sonnet-4-20250514", At: at, InputTokens: 150_000, CacheReadTokens: 100_000, OutputTokens: 1000}, big.NewRat(1, 1), 900_000_000 + 60_000_000 + 22_500_000},
		// gpt-4o: $2.50 input, $1.25 cached input, $10 output
		{"gpt-4o cached input", Usage{Provider: "openai", Model: "gpt-4o", At: at, InputTokens: 1000, CacheReadTokens: 1000, OutputTokens: 100}, big.NewRat(1, 1), 2_500_000 + 1_250_000 + 1_000_000},
		// gpt-4o batch input is $1.25
		{"gpt-4o batch", Usage{Provider: "openai", Model: "gpt-4o", At: at, InputTokens: 1000, Batch: true}, big.NewRat(1, 1), 1_250_000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := c.CostTimes(tc.u, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if got.Total != tc.want {
				t.Errorf("got %s, want %s", got.Total, tc.want)
			}
		})
	}
}

// TestCachingFigures checks the prompt-caching figures of shared/PRICING.md: a 3,856-token system
// prompt over 20 calls costs 3.15 units cached against 20 uncached, and 25% more than uncached
// when a changing prefix makes every call write.
func TestCachingFigures(t *testing.T) {
	t.Parallel()
	c := embeddedCatalog(t)
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	prompt := func(u Usage, n int64) money.Nanos {
		t.Helper()
		u.Provider, u.Model, u.At = "anthropic", "claude-haiku-5-5", at
		got, err := c.CostTimes(u, big.NewRat(n, 1))
		if err != nil {
			t.Fatal(err)
		}
		return got.Total
	}
	const p = 3856
	uncached := prompt(Usage{InputTokens: p}, 20)
	cached := prompt(Usage{CacheWriteTokens: p}, 1) + prompt(Usage{CacheReadTokens: p}, 19)
	broken := prompt(Usage{CacheWriteTokens: p}, 20)
	if r := big.NewRat(int64(cached), int64(uncached)); r.Cmp(big.NewRat(315, 2000)) != 0 {
		t.Errorf("cached/uncached = %s, want 3.15/20", r.RatString())
	}
	if r := big.NewRat(int64(broken), int64(uncached)); r.Cmp(big.NewRat(5, 4)) != 0 {
		t.Errorf("broken/uncached = %s, want 1.25", r.RatString())
	}
	// The record's own NoCache figure says the same: one broken call against its uncached price.
	one, err := c.Cost(Usage{Provider: "anthropic", Model: "claude-haiku-5-5", At: at, CacheWriteTokens: p})
	if err != nil {
		t.Fatal(err)
	}
	if big.NewRat(int64(one.Total), int64(one.NoCache)).Cmp(big.NewRat(5, 4)) != 0 {
		t.Errorf("one write: total %s, nocache %s, want a 1.25 ratio", one.Total, one.NoCache)
	}
}

// TestCostFastPath checks Cost's int64 path against the rational path on every price version of
// the embedded catalog and on synthetic prices at its bounds, and that it is taken where it should
// be: fast says whether priceOne may answer on its own.
func TestCostFastPath(t *testing.T) {
	t.Parallel()
	emb := embeddedCatalog(t)
	usages := []struct {
		name string
		u    Usage
		fast bool
	}{
		// nothing used costs nothing
		{"empty", Usage{}, true},
		// every kind of token, 1-hour writes and reasoning included
		{"all kinds", Usage{InputTokens: 3_214, OutputTokens: 1_187, ReasoningTokens: 612, CacheWriteTokens: 12_480,
			CacheWrite1hTokens: 4_096, CacheReadTokens: 48_913}, true},
		// the same as a batch request: halved, or unpriced where the batch price is unknown
		{"batch", Usage{InputTokens: 3_214, OutputTokens: 1_187, ReasoningTokens: 612, CacheWriteTokens: 12_480,
			CacheWrite1hTokens: 4_096, CacheReadTokens: 48_913, Batch: true}, true},
		// at each threshold of the catalog (100K, 200K, 272K): not above it
		{"at 100K", Usage{InputTokens: 40_000, CacheReadTokens: 60_000, OutputTokens: 1}, true},
		{"at 200K", Usage{InputTokens: 150_000, CacheWriteTokens: 50_000, OutputTokens: 1}, true},
		{"at 272K", Usage{InputTokens: 72_000, CacheReadTokens: 200_000, OutputTokens: 1}, true},
		// one token above each threshold: the whole request at the tier's prices
		{"above 100K", Usage{InputTokens: 40_001, CacheReadTokens: 60_000, OutputTokens: 1}, true},
		{"above 200K", Usage{InputTokens: 150_000, CacheWriteTokens: 50_001, CacheWrite1hTokens: 1, OutputTokens: 1}, true},
		{"above 272K", Usage{InputTokens: 72_001, CacheReadTokens: 200_000, OutputTokens: 9, Batch: true}, true},
		// odd counts that round in both directions
		{"rounding", Usage{InputTokens: 333, OutputTokens: 9, CacheReadTokens: 7, CacheWriteTokens: 3, CacheWrite1hTokens: 1}, true},
		// a count of 2^40 is more than the fast path vouches for
		{"2^40 tokens", Usage{InputTokens: 1 << 40}, false},
		// impossible counts fail before any arithmetic, with the rational path's error
		{"negative", Usage{InputTokens: -1}, true},
	}
	for i := range emb.models {
		m := &emb.models[i]
		for j := range m.Prices {
			p := &m.Prices[j]
			for _, tc := range usages {
				u := tc.u
				u.Provider, u.Model, u.At = m.Provider, m.ID, p.EffectiveFrom
				sameCost(t, emb, u)
				if checkTokens(u) != nil {
					continue
				}
				if _, ok, _ := priceOne(m, p, u); ok != tc.fast {
					t.Errorf("%s on %s: fast path taken %v, want %v", tc.name, p.Key, ok, tc.fast)
				}
			}
		}
	}

	// Synthetic prices at the fast path's bounds: a rate such that 7 tokens cost exactly
	// MaxInt64 in nano-dollars per million tokens.
	const edge = money.Nanos(math.MaxInt64 / 7)
	half, over, negative := Ratio(ratioOne/2), Ratio(ratioOne+1), Ratio(-1)
	synthetic := []struct {
		name     string
		rates    Rates
		discount *Ratio
		u        Usage
		fast     bool
	}{
		// 7 × edge is MaxInt64: still fast
		{"product at MaxInt64", Rates{Input: edge}, nil, Usage{InputTokens: 7}, true},
		// 8 × edge is not
		{"product above MaxInt64", Rates{Input: edge}, nil, Usage{InputTokens: 8}, false},
		// the bound counts the largest rate used, the reasoning rate included
		{"reasoning rate at the bound", Rates{Input: 1, Reasoning: new(edge)}, nil, Usage{OutputTokens: 7, ReasoningTokens: 7}, true},
		{"reasoning rate over the bound", Rates{Input: 1, Reasoning: new(edge)}, &half, Usage{OutputTokens: 8, ReasoningTokens: 1, Batch: true}, false},
		// so large a cost does not fit in nano-dollars: the rational path's range error
		{"out of range", Rates{Output: money.Nanos(math.MaxInt64)}, nil, Usage{OutputTokens: 1 << 30}, false},
		// rates below zero and discounts outside [0, 1] are left to the rational path
		{"negative rate", Rates{Input: 5, CacheRead: -3}, nil, Usage{InputTokens: 7, CacheReadTokens: 1}, false},
		{"discount above 1", Rates{Input: 5}, &over, Usage{InputTokens: 7, Batch: true}, false},
		{"negative discount", Rates{Input: 5}, &negative, Usage{InputTokens: 7, Batch: true}, false},
		// a discount outside [0, 1] does not matter when the request is not a batch
		{"discount unused", Rates{Input: 5}, &over, Usage{InputTokens: 7}, true},
	}
	for _, tc := range synthetic {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := Price{Key: "synthetic/m@2026-01-01#0", EffectiveFrom: jan, Source: "test", Rates: tc.rates, BatchDiscount: tc.discount}
			c, err := build([]Model{{Provider: "synthetic", ID: "m", Prices: []Price{p}}})
			if err != nil {
				t.Fatal(err)
			}
			u := tc.u
			u.Provider, u.Model, u.At = "synthetic", "m", jan
			sameCost(t, c, u)
			if _, ok, _ := priceOne(&c.models[0], &c.models[0].Prices[0], u); ok != tc.fast {
				t.Errorf("fast path taken %v, want %v", ok, tc.fast)
			}
		})
	}
}

// TestCostAllocations guards the per-record hot path: once a spelling has been seen, pricing a
// record allocates nothing, whatever the case of its names.
func TestCostAllocations(t *testing.T) {
	c := embeddedCatalog(t)
	at := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	for _, u := range []Usage{
		{Provider: "anthropic", Model: "claude-sonnet-4-5-20250929", At: at, InputTokens: 10, CacheWriteTokens: 5, CacheWrite1hTokens: 2, CacheReadTokens: 300_000},
		{Provider: "OpenAI", Model: " GPT-6.1-Sol", At: at, InputTokens: 10, OutputTokens: 20, ReasoningTokens: 5},
		{Provider: "", Model: "gemini/gemini-4-argon", At: at, InputTokens: 10, Batch: true},
	} {
		if n := testing.AllocsPerRun(100, func() {
			if _, err := c.Cost(u); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("Cost(%s, %s) allocates %v times a call", u.Provider, u.Model, n)
		}
	}
}
