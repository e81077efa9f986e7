package pricing_test

import (
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/pricing"
)

// TestCostAggregate prices summed usage of Claude Haiku 5.5, whose prices rise for requests above
// 100,000 input tokens ($0.10 / $0.50 per million below, $0.50 / $2.50 above).
func TestCostAggregate(t *testing.T) {
	t.Parallel()
	c, err := pricing.Load("")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	u := func(in, out int64) pricing.Usage {
		return pricing.Usage{Provider: "anthropic", Model: "claude-haiku-5-5", At: at, InputTokens: in, OutputTokens: out}
	}
	cases := []struct {
		name     string
		u        pricing.Usage
		requests int64
		n        *big.Rat
		want     money.Nanos
		long     bool
		err      error
	}{
		// 10 requests of 50,000 input on average: base prices for every token, though the sum is
		// far above the threshold
		{"average below", u(500_000, 1_000), 10, big.NewRat(1, 1), 50_000_000 + 500_000, false, nil},
		// an average of exactly the threshold is not above it
		{"average at", u(1_000_000, 0), 10, big.NewRat(1, 1), 100_000_000, false, nil},
		// above it, every token is billed at the tier
		{"average above", u(1_000_010, 1_000), 10, big.NewRat(1, 1), 500_005_000 + 2_500_000, true, nil},
		// totals that do not divide evenly are billed exactly, scaled by n before the one rounding:
		// a third of $0.000113 (rounding the average request to 333 and 9 tokens would say $0.0000378)
		{"uneven totals", u(1_000, 26), 3, big.NewRat(1, 3), 37_667, false, nil},
		// no requests and no tokens cost nothing
		{"nothing", u(0, 0), 0, big.NewRat(1, 1), 0, false, nil},
		// tokens without requests cannot be
		{"tokens of no request", u(10, 0), 0, big.NewRat(1, 1), 0, false, pricing.ErrUsage},
		// nor can a negative number of requests
		{"negative requests", u(10, 0), -1, big.NewRat(1, 1), 0, false, pricing.ErrUsage},
	}
	for _, tc := range cases {
		got, err := c.CostAggregate(tc.u, tc.requests, tc.n)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got.Total != tc.want || got.LongContext != tc.long {
			t.Errorf("%s: %s (long context %v), want %s (%v)", tc.name, got.Total, got.LongContext, tc.want, tc.long)
		}
	}
}
