package pricing

import (
	"fmt"
	"math/big"

	"github.com/ledgerd/ledgerd/money"
)

// Cost prices one request. It fails with ErrUnpriced when the model is unknown, has no price in
// effect at u.At, or (for a batch request) has no known batch price; with ErrUsage when the token
// counts are impossible.
func (c *Catalog) Cost(u Usage) (Cost, error) {
	return c.CostTimes(u, big.NewRat(1, 1))
}

// CostTimes prices n identical requests like u, n being any non-negative rational (an average
// number of calls a day, for instance). Each request is judged against the long-context threshold
// on its own; the amounts are multiplied exactly and rounded once, so a daily or monthly estimate
// carries no per-call rounding error.
func (c *Catalog) CostTimes(u Usage, n *big.Rat) (Cost, error) {
	return c.CostAggregate(u, 1, n)
}

// CostAggregate prices usage u that sums several requests (a day of a ledger's traffic, say), n
// times: every token of u is billed exactly, and each long-context threshold is judged on the
// average request, u's total input / requests. That is exact when the requests are alike and an
// approximation otherwise, since a provider judges each request on its own. requests must be
// positive, or zero for a usage of no tokens.
func (c *Catalog) CostAggregate(u Usage, requests int64, n *big.Rat) (Cost, error) {
	if err := checkUsage(u, n); err != nil {
		return Cost{}, err
	}
	totalIn := u.InputTokens + u.CacheWriteTokens + u.CacheReadTokens
	if requests < 0 || requests == 0 && totalIn+u.OutputTokens > 0 {
		return Cost{}, fmt.Errorf("%w: usage of %d requests", ErrUsage, requests)
	}
	m, ok := c.Lookup(u.Provider, u.Model)
	if !ok {
		return Cost{}, fmt.Errorf("%w: no price for model %q of provider %q", ErrUnpriced, u.Model, u.Provider)
	}
	p, ok := m.PriceAt(u.At)
	if !ok {
		return Cost{}, fmt.Errorf("%w: %s/%s has no price in effect at %s (its first price starts %s)",
			ErrUnpriced, m.Provider, m.ID, u.At.UTC().Format("2006-01-02 15:04:05Z07:00"),
			m.Prices[0].EffectiveFrom.Format("2006-01-02"))
	}
	return price(m, p, u, max(requests, 1), n)
}

func checkUsage(u Usage, n *big.Rat) error {
	for _, v := range []int64{u.InputTokens, u.OutputTokens, u.CacheWriteTokens, u.CacheWrite1hTokens, u.CacheReadTokens, u.ReasoningTokens} {
		if v < 0 {
			return fmt.Errorf("%w: negative token count", ErrUsage)
		}
	}
	if u.CacheWrite1hTokens > u.CacheWriteTokens {
		return fmt.Errorf("%w: 1-hour cache writes (%d) exceed all cache writes (%d)", ErrUsage, u.CacheWrite1hTokens, u.CacheWriteTokens)
	}
	if u.ReasoningTokens > u.OutputTokens {
		return fmt.Errorf("%w: reasoning tokens (%d) exceed output tokens (%d)", ErrUsage, u.ReasoningTokens, u.OutputTokens)
	}
	if n == nil || n.Sign() < 0 {
		return fmt.Errorf("%w: the number of requests must be a non-negative number", ErrUsage)
	}
	return nil
}

// price applies version p of model m to u, which sums requests requests, n times.
func price(m Model, p Price, u Usage, requests int64, n *big.Rat) (Cost, error) {
	out := Cost{Version: m.version(p)}
	rates := p.Rates
	totalIn := big.NewInt(u.InputTokens + u.CacheWriteTokens + u.CacheReadTokens)
	for _, t := range p.LongContext {
		// The average request's input exceeds the threshold: total > threshold × requests.
		if totalIn.Cmp(new(big.Int).Mul(big.NewInt(t.AboveInputTokens), big.NewInt(requests))) > 0 {
			rates, out.LongContext = t.Rates, true
		}
	}
	// scale turns a sum of tokens × nano-dollars per million into nano-dollars: × (1 − discount)
	// × n / 1e6.
	scale := new(big.Rat).Mul(n, big.NewRat(1, 1_000_000))
	if u.Batch {
		if p.BatchDiscount == nil {
			return Cost{}, fmt.Errorf("%w: %s has no batch price", ErrUnpriced, p.Key)
		}
		scale.Mul(scale, new(big.Rat).Sub(big.NewRat(1, 1), p.BatchDiscount.Rat()))
	}

	output := outputAmount(rates, u)
	parts := []struct {
		dst *money.Nanos
		amt *big.Int
	}{
		{&out.Input, amount(u.InputTokens, rates.Input)},
		{&out.Output, output},
		{&out.CacheWrite5m, amount(u.CacheWriteTokens-u.CacheWrite1hTokens, rates.CacheWrite5m)},
		{&out.CacheWrite1h, amount(u.CacheWrite1hTokens, rates.CacheWrite1h)},
		{&out.CacheRead, amount(u.CacheReadTokens, rates.CacheRead)},
	}
	total := new(big.Int)
	for _, part := range parts {
		total.Add(total, part.amt)
		v, err := scaled(part.amt, scale)
		if err != nil {
			return Cost{}, err
		}
		*part.dst = v
	}
	var err error
	if out.Total, err = scaled(total, scale); err != nil {
		return Cost{}, err
	}
	nocache := amount(totalIn.Int64(), rates.Input)
	if out.NoCache, err = scaled(nocache.Add(nocache, output), scale); err != nil {
		return Cost{}, err
	}
	return out, nil
}

// outputAmount prices the output tokens, the reasoning part at the reasoning price when the rates
// have one.
func outputAmount(r Rates, u Usage) *big.Int {
	if r.Reasoning == nil {
		return amount(u.OutputTokens, r.Output)
	}
	a := amount(u.OutputTokens-u.ReasoningTokens, r.Output)
	return a.Add(a, amount(u.ReasoningTokens, *r.Reasoning))
}

// amount is tokens × price per million, in units of 1e-9 dollars per million tokens.
func amount(tokens int64, perM money.Nanos) *big.Int {
	return new(big.Int).Mul(big.NewInt(tokens), big.NewInt(int64(perM)))
}

// scaled multiplies an exact amount by scale and rounds it to whole nano-dollars, half away from
// zero.
func scaled(a *big.Int, scale *big.Rat) (money.Nanos, error) {
	q := money.RoundRat(new(big.Rat).Mul(new(big.Rat).SetInt(a), scale))
	if !q.IsInt64() {
		return 0, fmt.Errorf("cost: %w", money.ErrRange)
	}
	return money.Nanos(q.Int64()), nil
}
