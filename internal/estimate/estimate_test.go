package estimate

import (
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/pricing"
)

var at = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func catalog(t *testing.T) *pricing.Catalog {
	t.Helper()
	c, err := pricing.Load("")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestProjectWorkedFigures checks the ticket-router figures of shared/PRICING.md.
func TestProjectWorkedFigures(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	cases := []struct {
		name        string
		model       string
		callsPerDay int64
		days        *big.Rat
		perCall     money.Nanos
		daily       money.Nanos
		monthly     money.Nanos
	}{
		// Haiku 5.5 at 2,000 calls a day: $0.0000378 a call, about $2 a month
		{"haiku 2000", "claude-haiku-5-5", 2000, nil, 37_800, 75_600_000, 2_268_000_000},
		// Sonnet 5.5 at the same counts: about $45 a month
		{"sonnet 2000", "claude-sonnet-5-5", 2000, nil, 756_000, 1_512_000_000, 45_360_000_000},
		// Haiku at 50,000 calls a day: about $57 a month
		{"haiku 50000", "claude-haiku-5-5", 50_000, nil, 37_800, 1_890_000_000, 56_700_000_000},
		// a fractional month (30.5 days) is exact
		{"fractional month", "claude-haiku-5-5", 2000, big.NewRat(61, 2), 37_800, 75_600_000, 2_305_800_000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, err := Project(c, Workload{Model: tc.model, At: at, CallsPerDay: big.NewRat(tc.callsPerDay, 1),
				DaysPerMonth: tc.days, InputTokens: 333, OutputTokens: 9})
			if err != nil {
				t.Fatal(err)
			}
			if e.PerCall.Total != tc.perCall || e.Daily.Total != tc.daily || e.Monthly.Total != tc.monthly {
				t.Errorf("got %s / %s / %s, want %s / %s / %s", e.PerCall.Total, e.Daily.Total, e.Monthly.Total, tc.perCall, tc.daily, tc.monthly)
			}
		})
	}
}

func TestProjectErrors(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	_, err := Project(c, Workload{Model: "claude-haiku-5.5", At: at, CallsPerDay: big.NewRat(1, 1)})
	var unknown *UnknownModelError
	if !errors.As(err, &unknown) || !errors.Is(err, pricing.ErrUnpriced) || unknown.Nearest[0] != "claude-haiku-5-5" {
		t.Errorf("unknown model error = %v", err)
	}
	if _, err := Project(c, Workload{Model: "gpt-4o", At: at, CallsPerDay: big.NewRat(-1, 1)}); err == nil {
		t.Error("negative calls per day accepted")
	}
	if _, err := Project(c, Workload{Model: "gpt-6-sol", At: at, CallsPerDay: big.NewRat(1, 1), Batch: true}); !errors.Is(err, pricing.ErrUnpriced) {
		t.Errorf("batch without a batch price: error = %v, want ErrUnpriced", err)
	}
}

// TestCacheFigures checks the caching figures of shared/PRICING.md: 3.15 units against 20 for a
// 3,856-token prompt over 20 calls, and 25% more than no caching when every call writes.
func TestCacheFigures(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	cases := []struct {
		name      string
		plan      CachePlan
		units     []*big.Rat // no caching, cached, changing prefix
		breakEven int64
	}{
		// 5-minute writes: 1.25 + 19 × 0.1 = 3.15 units; pays off after one read
		{"5m", CachePlan{Model: "claude-haiku-5-5", At: at, PrefixTokens: 3856, Calls: 20},
			[]*big.Rat{big.NewRat(20, 1), big.NewRat(315, 100), big.NewRat(25, 1)}, 1},
		// 1-hour writes: 2 + 19 × 0.1 = 3.9 units; pays off after two reads
		{"1h", CachePlan{Model: "claude-haiku-5-5", At: at, PrefixTokens: 3856, Calls: 20, TTL1h: true},
			[]*big.Rat{big.NewRat(20, 1), big.NewRat(39, 10), big.NewRat(40, 1)}, 2},
		// a 50% hit rate: 10 writes and 10 reads = 12.5 + 1 units
		{"hit rate", CachePlan{Model: "claude-haiku-5-5", At: at, PrefixTokens: 3856, Calls: 20, HitRate: big.NewRat(1, 2)},
			[]*big.Rat{big.NewRat(20, 1), big.NewRat(135, 10), big.NewRat(25, 1)}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := Cache(c, tc.plan)
			if err != nil {
				t.Fatal(err)
			}
			for i, s := range r.Scenarios {
				if s.Units.Cmp(tc.units[i]) != 0 {
					t.Errorf("%s: %s units, want %s", s.Name, s.Units.FloatString(4), tc.units[i].FloatString(4))
				}
			}
			if r.BreakEvenReads != tc.breakEven {
				t.Errorf("break-even reads = %d, want %d", r.BreakEvenReads, tc.breakEven)
			}
		})
	}
	r, _ := Cache(c, cases[0].plan)
	if got := r.Scenarios[2].VsNoCache; got.Cmp(big.NewRat(5, 4)) != 0 {
		t.Errorf("changing prefix vs no caching = %s, want 1.25", got.FloatString(4))
	}
}

func TestBreakEven(t *testing.T) {
	t.Parallel()
	cases := []struct {
		write, read, plain money.Nanos
		want               int64
	}{
		{125, 10, 100, 1},   // Anthropic 5m: 25 extra paid back by one 90 saving
		{200, 10, 100, 2},   // Anthropic 1h: 100 extra needs two reads
		{100, 50, 100, 1},   // OpenAI: writes at input, any read saves
		{90, 50, 100, 0},    // a write cheaper than input pays at once
		{125, 100, 100, -1}, // never: reads cost as much as input
	}
	for _, tc := range cases {
		if got := breakEven(tc.write, tc.read, tc.plain); got != tc.want {
			t.Errorf("breakEven(%d, %d, %d) = %d, want %d", tc.write, tc.read, tc.plain, got, tc.want)
		}
	}
}
