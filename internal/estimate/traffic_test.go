package estimate

import (
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/money"
)

// TestReprice projects a week of ticket-router traffic (2,000 calls a day of 333 input and 9
// output tokens) on other models.
func TestReprice(t *testing.T) {
	t.Parallel()
	c := catalog(t)
	week := Traffic{Attempts: 14_000, InputTokens: 14_000 * 333, OutputTokens: 14_000 * 9}
	month, err := MonthScale(7*24*time.Hour, big.NewRat(30, 1))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		model string
		t     Traffic
		scale *big.Rat
		want  money.Nanos
		long  bool
	}{
		// the week on Haiku 5.5 costs 7 × $0.0756, the month $2.268 as Project says
		{"haiku week", "claude-haiku-5-5", week, big.NewRat(1, 1), 529_200_000, false},
		{"haiku month", "claude-haiku-5-5", week, month, 2_268_000_000, false},
		// on Sonnet 5.5, $45.36 a month
		{"sonnet month", "claude-sonnet-5-5", week, month, 45_360_000_000, false},
		// 10 attempts averaging 150,000 input tokens cross Haiku's 100,000-token tier: $0.50/M
		{"long average", "claude-haiku-5-5", Traffic{Attempts: 10, InputTokens: 1_500_000}, big.NewRat(1, 1), 750_000_000, true},
		// 1,000 attempts summing the same tokens stay under it: $0.10/M
		{"short average", "claude-haiku-5-5", Traffic{Attempts: 1_000, InputTokens: 1_500_000}, big.NewRat(1, 1), 150_000_000, false},
		// no traffic costs nothing
		{"nothing", "claude-haiku-5-5", Traffic{}, month, 0, false},
	}
	for _, tc := range cases {
		got, err := Reprice(c, tc.model, at, tc.t, tc.scale)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got.Total != tc.want || got.LongContext != tc.long {
			t.Errorf("%s: %s (long context %v), want %s (%v)", tc.name, got.Total, got.LongContext, tc.want, tc.long)
		}
	}
	var unknown *UnknownModelError
	if _, err := Reprice(c, "claude-sonet-5-5", at, week, month); !errors.As(err, &unknown) || len(unknown.Nearest) == 0 {
		t.Errorf("unknown model: %v", err)
	}
}

// TestScale checks month scaling and its one rounding.
func TestScale(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		window time.Duration
		days   *big.Rat
		amount money.Nanos
		want   money.Nanos
		err    bool
	}{
		// a week to a 30-day month: × 30/7, 7 nano-dollars become 30
		{"week", 7 * 24 * time.Hour, big.NewRat(30, 1), 7, 30, false},
		// 1 nano-dollar a week is 4.2857… a month: rounded once, to 4
		{"rounding", 7 * 24 * time.Hour, big.NewRat(30, 1), 1, 4, false},
		// 36 hours to a 30.5-day month: × 20.333…, half away from zero for negative amounts too
		{"hours", 36 * time.Hour, big.NewRat(61, 2), -3, -61, false},
		// an empty window cannot be scaled
		{"empty window", 0, big.NewRat(30, 1), 1, 0, true},
		// nor a month of no days
		{"no days", time.Hour, new(big.Rat), 1, 0, true},
		// an amount beyond int64 nano-dollars is an error, not a wrap
		{"overflow", time.Hour, big.NewRat(30, 1), 1 << 62, 0, true},
	}
	for _, tc := range cases {
		f, err := MonthScale(tc.window, tc.days)
		var got money.Nanos
		if err == nil {
			got, err = Scale(tc.amount, f)
		}
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%s: %s, %v; want %s (error %v)", tc.name, got, err, tc.want, tc.err)
		}
	}
}
