package pricing

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"

	"github.com/ledgerd/ledgerd/money"
)

// Cost prices one request. It fails with ErrUnpriced when the model is unknown, has no price in
// effect at u.At, or (for a batch request) has no known batch price; with ErrUsage when the token
// counts are impossible. It runs in int64 when every intermediate provably fits, which covers any
// real request, and falls back to CostTimes's exact rational arithmetic otherwise; both give the
// same result.
func (c *Catalog) Cost(u Usage) (Cost, error) {
	if err := checkTokens(u); err != nil {
		return Cost{}, err
	}
	m, p, err := c.priceIn(u)
	if err != nil {
		return Cost{}, err
	}
	if out, ok, err := priceOne(m, p, u); ok {
		return out, err
	}
	return price(*m, *p, u, 1, big.NewRat(1, 1))
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
	if err := checkTokens(u); err != nil {
		return Cost{}, err
	}
	if n == nil || n.Sign() < 0 {
		return Cost{}, fmt.Errorf("%w: the number of requests must be a non-negative number", ErrUsage)
	}
	totalIn := u.InputTokens + u.CacheWriteTokens + u.CacheReadTokens
	if requests < 0 || requests == 0 && totalIn+u.OutputTokens > 0 {
		return Cost{}, fmt.Errorf("%w: usage of %d requests", ErrUsage, requests)
	}
	m, p, err := c.priceIn(u)
	if err != nil {
		return Cost{}, err
	}
	return price(*m, *p, u, max(requests, 1), n)
}

// priceIn finds u's model and the price version in effect at u.At. Both are the catalog's own:
// callers must not change them.
func (c *Catalog) priceIn(u Usage) (*Model, *Price, error) {
	i, ok := c.find(u.Provider, u.Model)
	if !ok {
		return nil, nil, fmt.Errorf("%w: no price for model %q of provider %q", ErrUnpriced, u.Model, u.Provider)
	}
	m := &c.models[i]
	v := priceIndex(m.Prices, u.At)
	if v < 0 {
		return nil, nil, fmt.Errorf("%w: %s/%s has no price in effect at %s (its first price starts %s)",
			ErrUnpriced, m.Provider, m.ID, u.At.UTC().Format("2006-01-02 15:04:05Z07:00"),
			m.Prices[0].EffectiveFrom.Format("2006-01-02"))
	}
	return m, &m.Prices[v], nil
}

// checkTokens rejects token counts that no request can have.
func checkTokens(u Usage) error {
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
	return nil
}

// noBatchPrice is the error for a batch request on a version without a batch discount.
func noBatchPrice(p *Price) error {
	return fmt.Errorf("%w: %s has no batch price", ErrUnpriced, p.Key)
}

// maxFastTokens bounds each token count priceOne accepts: 2^40 is over a trillion tokens, far
// beyond any request, and keeps the sum of the four kinds below 2^42.
const maxFastTokens = 1 << 40

// nanosDen is the denominator of priceOne's scale: an amount in nano-dollars per million tokens ×
// (parts per billion kept after the batch discount) / 1e15 is nano-dollars.
const nanosDen = 1_000_000 * uint64(ratioOne)

// priceOne prices one request, u, with version p of model m, as price(m, p, u, 1, 1) does but in
// machine integers. u's counts must have passed checkTokens. ok is false, and the caller must use
// price, when the counts, rates or batch discount are outside the bounds under which every
// intermediate provably fits in int64:
//
//   - every count is below 2^40 (so total input cannot wrap), and every rate used and the
//     discount are non-negative, the discount at most 1;
//   - (input + output + cache writes + cache reads) × the largest rate used is at most
//     MaxInt64. Every component, Total and NoCache is at most that product (reasoning and 1-hour
//     writes are parts of output and writes), so every amount fits;
//   - each amount a is scaled as a × keep / 1e15 with keep ≤ 1e9: the 128-bit product is below
//     2^93, its high word below 2^29 < 1e15 as bits.Div64 needs, and the quotient below 2^44.
//
// The rounding is price's: half away from zero, once per figure, and the amounts are never
// negative.
func priceOne(m *Model, p *Price, u Usage) (out Cost, ok bool, err error) {
	if max(u.InputTokens, u.OutputTokens, u.CacheWriteTokens, u.CacheReadTokens) >= maxFastTokens {
		return Cost{}, false, nil
	}
	totalIn := u.InputTokens + u.CacheWriteTokens + u.CacheReadTokens
	rates, long := &p.Rates, false
	for i := range p.LongContext {
		if totalIn > p.LongContext[i].AboveInputTokens {
			rates, long = &p.LongContext[i].Rates, true
		}
	}
	keepIn, keepOut := uint64(ratioOne), uint64(ratioOne)
	if u.Batch {
		if p.BatchDiscount == nil {
			return Cost{}, true, noBatchPrice(p)
		}
		din, dout := batchDiscounts(p)
		if din < 0 || din > ratioOne || dout < 0 || dout > ratioOne {
			return Cost{}, false, nil
		}
		keepIn, keepOut = uint64(ratioOne-din), uint64(ratioOne-dout)
	}
	top := max(rates.Input, rates.Output, rates.CacheWrite5m, rates.CacheWrite1h, rates.CacheRead)
	low := min(rates.Input, rates.Output, rates.CacheWrite5m, rates.CacheWrite1h, rates.CacheRead)
	if rates.Reasoning != nil {
		top, low = max(top, *rates.Reasoning), min(low, *rates.Reasoning)
	}
	if low < 0 {
		return Cost{}, false, nil
	}
	if hi, lo := bits.Mul64(uint64(totalIn+u.OutputTokens), uint64(top)); hi != 0 || lo > math.MaxInt64 {
		return Cost{}, false, nil
	}

	output := u.OutputTokens * int64(rates.Output)
	if rates.Reasoning != nil {
		output = (u.OutputTokens-u.ReasoningTokens)*int64(rates.Output) + u.ReasoningTokens*int64(*rates.Reasoning)
	}
	input := u.InputTokens * int64(rates.Input)
	write5m := (u.CacheWriteTokens - u.CacheWrite1hTokens) * int64(rates.CacheWrite5m)
	write1h := u.CacheWrite1hTokens * int64(rates.CacheWrite1h)
	read := u.CacheReadTokens * int64(rates.CacheRead)
	return Cost{
		Total:        scaleNanos(input+write5m+write1h+read, keepIn, output, keepOut),
		Input:        scaleNanos(input, keepIn, 0, 0),
		Output:       scaleNanos(0, 0, output, keepOut),
		CacheWrite5m: scaleNanos(write5m, keepIn, 0, 0),
		CacheWrite1h: scaleNanos(write1h, keepIn, 0, 0),
		CacheRead:    scaleNanos(read, keepIn, 0, 0),
		NoCache:      scaleNanos(totalIn*int64(rates.Input), keepIn, output, keepOut),
		LongContext:  long,
		Version:      m.version(*p),
	}, true, nil
}

// batchDiscounts returns the batch discounts of the input side (input and cache) and of the
// output of a version whose BatchDiscount is set.
func batchDiscounts(p *Price) (in, out Ratio) {
	in, out = *p.BatchDiscount, *p.BatchDiscount
	if p.BatchOutputDiscount != nil {
		out = *p.BatchOutputDiscount
	}
	return in, out
}

// scaleNanos returns (a × keepA + b × keepB) / 1e15 rounded half away from zero, for 0 ≤ a, b and
// a + b ≤ MaxInt64 and keeps ≤ 1e9 (see priceOne for why it cannot overflow: the 128-bit sum of
// the two products stays below 2^94, its high word below 1e15).
func scaleNanos(a int64, keepA uint64, b int64, keepB uint64) money.Nanos {
	hi, lo := bits.Mul64(uint64(a), keepA)
	hiB, loB := bits.Mul64(uint64(b), keepB)
	lo, carry := bits.Add64(lo, loB, 0)
	hi += hiB + carry
	q, r := bits.Div64(hi, lo, nanosDen)
	if r >= nanosDen-r {
		q++
	}
	return money.Nanos(q)
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
	// scaleIn and scaleOut turn a sum of tokens × nano-dollars per million into nano-dollars:
	// × (1 − discount) × n / 1e6, the input side's discount for input and cache, the output's for
	// output.
	scaleIn := new(big.Rat).Mul(n, big.NewRat(1, 1_000_000))
	scaleOut := new(big.Rat).Set(scaleIn)
	if u.Batch {
		if p.BatchDiscount == nil {
			return Cost{}, noBatchPrice(&p)
		}
		din, dout := batchDiscounts(&p)
		scaleIn.Mul(scaleIn, new(big.Rat).Sub(big.NewRat(1, 1), din.Rat()))
		scaleOut.Mul(scaleOut, new(big.Rat).Sub(big.NewRat(1, 1), dout.Rat()))
	}

	output := outputAmount(rates, u)
	parts := []struct {
		dst   *money.Nanos
		amt   *big.Int
		scale *big.Rat
	}{
		{&out.Input, amount(u.InputTokens, rates.Input), scaleIn},
		{&out.Output, output, scaleOut},
		{&out.CacheWrite5m, amount(u.CacheWriteTokens-u.CacheWrite1hTokens, rates.CacheWrite5m), scaleIn},
		{&out.CacheWrite1h, amount(u.CacheWrite1hTokens, rates.CacheWrite1h), scaleIn},
		{&out.CacheRead, amount(u.CacheReadTokens, rates.CacheRead), scaleIn},
	}
	total := new(big.Rat)
	for _, part := range parts {
		exact := new(big.Rat).Mul(new(big.Rat).SetInt(part.amt), part.scale)
		total.Add(total, exact)
		v, err := rounded(exact)
		if err != nil {
			return Cost{}, err
		}
		*part.dst = v
	}
	var err error
	if out.Total, err = rounded(total); err != nil {
		return Cost{}, err
	}
	nocache := new(big.Rat).Mul(new(big.Rat).SetInt(amount(totalIn.Int64(), rates.Input)), scaleIn)
	nocache.Add(nocache, new(big.Rat).Mul(new(big.Rat).SetInt(output), scaleOut))
	if out.NoCache, err = rounded(nocache); err != nil {
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

// rounded rounds an exact amount of nano-dollars to whole nano-dollars, half away from zero.
func rounded(a *big.Rat) (money.Nanos, error) {
	q := money.RoundRat(a)
	if !q.IsInt64() {
		return 0, fmt.Errorf("cost: %w", money.ErrRange)
	}
	return money.Nanos(q.Int64()), nil
}
