package estimate

import (
	"fmt"
	"math/big"
	"time"

	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/pricing"
)

// Traffic is the token usage of a group of attempts observed over some window, as ledgerd's
// GET /v1/summary reports it: totals, not single requests.
type Traffic struct {
	Attempts           int64
	InputTokens        int64
	OutputTokens       int64
	CacheWriteTokens   int64
	CacheWrite1hTokens int64
	CacheReadTokens    int64
	ReasoningTokens    int64
}

// RepriceNote states the approximation Reprice makes, for showing beside its figures.
const RepriceNote = "Re-priced traffic is billed on its token totals, at non-batch prices; a long-context tier " +
	"applies when the average attempt of a model's traffic exceeds its threshold, not request by request as the ledger does."

// MonthScale is the factor that turns an amount observed over window into a month of
// daysPerMonth days: daysPerMonth × 24 h / window.
func MonthScale(window time.Duration, daysPerMonth *big.Rat) (*big.Rat, error) {
	if window <= 0 {
		return nil, fmt.Errorf("the observed window must be positive")
	}
	if daysPerMonth == nil || daysPerMonth.Sign() <= 0 {
		return nil, fmt.Errorf("days per month must be positive")
	}
	s := new(big.Rat).Mul(daysPerMonth, big.NewRat(int64(24*time.Hour), 1))
	return s.Quo(s, big.NewRat(int64(window), 1)), nil
}

// Scale multiplies an amount by an exact factor, rounding once to nano-dollars, half away from
// zero.
func Scale(n money.Nanos, f *big.Rat) (money.Nanos, error) {
	q := money.RoundRat(new(big.Rat).Mul(big.NewRat(int64(n), 1), f))
	if !q.IsInt64() {
		return 0, fmt.Errorf("scale %s: %w", n, money.ErrRange)
	}
	return money.Nanos(q.Int64()), nil
}

// Reprice prices t on another model at the prices in effect at at, scaled by scale (1 for the
// observed window, MonthScale for a month), rounding once. It makes the approximation RepriceNote
// states (pricing.Catalog.CostAggregate). An unknown model is an *UnknownModelError.
func Reprice(c *pricing.Catalog, model string, at time.Time, t Traffic, scale *big.Rat) (pricing.Cost, error) {
	m, err := resolve(c, model)
	if err != nil {
		return pricing.Cost{}, err
	}
	u := pricing.Usage{Provider: m.Provider, Model: m.ID, At: at, InputTokens: t.InputTokens, OutputTokens: t.OutputTokens,
		CacheWriteTokens: t.CacheWriteTokens, CacheWrite1hTokens: t.CacheWrite1hTokens, CacheReadTokens: t.CacheReadTokens,
		ReasoningTokens: t.ReasoningTokens}
	cost, err := c.CostAggregate(u, t.Attempts, scale)
	if err != nil {
		return pricing.Cost{}, fmt.Errorf("price %s: %w", m.ID, err)
	}
	return cost, nil
}
