// Package estimate projects what a workload will cost from the price catalog, before any call is
// made: a call's cost scaled to a day and a month, and what prompt caching saves or wastes. All
// arithmetic is exact (math/big rationals on top of pricing's integer nano-dollars); each amount
// is rounded once, to nano-dollars, half away from zero.
package estimate

import (
	"fmt"
	"math/big"
	"time"

	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/pricing"
)

// DefaultDaysPerMonth is the month length estimates use unless told otherwise.
const DefaultDaysPerMonth = 30

// Workload describes a steady stream of identical calls to one model.
type Workload struct {
	// Model is an id or alias, optionally prefixed with its provider ("openai/gpt-4o").
	Model string
	// At selects the price version, usually now.
	At time.Time
	// CallsPerDay and DaysPerMonth may be fractional; nil DaysPerMonth means DefaultDaysPerMonth.
	CallsPerDay      *big.Rat
	DaysPerMonth     *big.Rat
	InputTokens      int64
	OutputTokens     int64
	CacheWriteTokens int64
	CacheReadTokens  int64
	Batch            bool
}

// Breakdown is a cost split by kind of token.
type Breakdown struct {
	Total        money.Nanos `json:"total_usd"`
	Input        money.Nanos `json:"input_usd"`
	Output       money.Nanos `json:"output_usd"`
	CacheWrite5m money.Nanos `json:"cache_write_5m_usd"`
	CacheWrite1h money.Nanos `json:"cache_write_1h_usd"`
	CacheRead    money.Nanos `json:"cache_read_usd"`
	// NoCache is the same usage with caching off (cache tokens billed as input).
	NoCache money.Nanos `json:"nocache_usd"`
}

func breakdown(c pricing.Cost) Breakdown {
	return Breakdown{Total: c.Total, Input: c.Input, Output: c.Output, CacheWrite5m: c.CacheWrite5m,
		CacheWrite1h: c.CacheWrite1h, CacheRead: c.CacheRead, NoCache: c.NoCache}
}

// Estimate is the projected cost of a Workload.
type Estimate struct {
	Provider string
	// Model is the catalog's canonical id for the workload's model.
	Model        string
	Version      pricing.Version
	CallsPerDay  *big.Rat
	DaysPerMonth *big.Rat
	// LongContext says each call is above a long-context threshold and priced at the tier.
	LongContext bool
	PerCall     Breakdown
	Daily       Breakdown
	Monthly     Breakdown
}

// UnknownModelError reports a model the catalog does not know, with the nearest known ids.
type UnknownModelError struct {
	Model   string
	Nearest []string
}

// Error says which model is unknown and what it may have meant.
func (e *UnknownModelError) Error() string {
	msg := fmt.Sprintf("unknown model %q", e.Model)
	if len(e.Nearest) > 0 {
		msg += fmt.Sprintf("; did you mean %s?", joinOr(e.Nearest))
	}
	return msg
}

// Unwrap makes errors.Is(err, pricing.ErrUnpriced) hold for an unknown model.
func (e *UnknownModelError) Unwrap() error { return pricing.ErrUnpriced }

func joinOr(names []string) string {
	out := ""
	for i, n := range names {
		switch {
		case i == 0:
		case i == len(names)-1:
			out += " or "
		default:
			out += ", "
		}
		out += n
	}
	return out
}

// resolve finds the model or explains, with suggestions, that it is unknown.
func resolve(c *pricing.Catalog, model string) (pricing.Model, error) {
	m, ok := c.Lookup("", model)
	if !ok {
		return pricing.Model{}, &UnknownModelError{Model: model, Nearest: c.Suggest(model, 3)}
	}
	return m, nil
}

// Project prices w per call, per day and per month.
func Project(c *pricing.Catalog, w Workload) (Estimate, error) {
	m, err := resolve(c, w.Model)
	if err != nil {
		return Estimate{}, err
	}
	if w.CallsPerDay == nil || w.CallsPerDay.Sign() < 0 {
		return Estimate{}, fmt.Errorf("calls per day must be a non-negative number")
	}
	days := w.DaysPerMonth
	if days == nil {
		days = big.NewRat(DefaultDaysPerMonth, 1)
	}
	if days.Sign() <= 0 {
		return Estimate{}, fmt.Errorf("days per month must be positive")
	}
	u := pricing.Usage{Provider: m.Provider, Model: m.ID, At: w.At, InputTokens: w.InputTokens, OutputTokens: w.OutputTokens,
		CacheWriteTokens: w.CacheWriteTokens, CacheReadTokens: w.CacheReadTokens, Batch: w.Batch}
	e := Estimate{Provider: m.Provider, Model: m.ID, CallsPerDay: w.CallsPerDay, DaysPerMonth: days}
	for _, p := range []struct {
		n   *big.Rat
		dst *Breakdown
	}{
		{big.NewRat(1, 1), &e.PerCall},
		{w.CallsPerDay, &e.Daily},
		{new(big.Rat).Mul(w.CallsPerDay, days), &e.Monthly},
	} {
		cost, err := c.CostTimes(u, p.n)
		if err != nil {
			return Estimate{}, fmt.Errorf("price %s: %w", m.ID, err)
		}
		*p.dst = breakdown(cost)
		e.Version, e.LongContext = cost.Version, cost.LongContext
	}
	return e, nil
}
