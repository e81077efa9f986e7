package estimate

import (
	"fmt"
	"math/big"
	"time"

	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/pricing"
)

// CachePlan describes a prompt prefix sent with every call of a run, to compare caching it with
// not caching it. Only the prefix is priced: the rest of each call costs the same either way.
type CachePlan struct {
	Model        string
	At           time.Time
	PrefixTokens int64
	Calls        int64
	// TTL1h writes the cache with the 1-hour TTL instead of the 5-minute one.
	TTL1h bool
	// HitRate is the share of calls that read the cache, between 0 and 1; the others write it.
	// Nil means the best case: the first call writes and every other call reads.
	HitRate *big.Rat
}

// Scenario is the cost of the prefix over the run under one caching behaviour.
type Scenario struct {
	Name string
	// Writes and Reads count the calls that write and read the cache (fractional under a hit rate).
	Writes *big.Rat
	Reads  *big.Rat
	Cost   money.Nanos
	// Units is Cost in multiples of sending the prefix once uncached (20 calls uncached = 20).
	Units *big.Rat
	// VsNoCache is Cost divided by the cost with no caching.
	VsNoCache *big.Rat
}

// CacheReport compares caching a prefix against not caching it.
type CacheReport struct {
	Provider string
	Model    string
	Version  pricing.Version
	TTL      string
	// Scenarios are: no caching, caching at the plan's hit rate, and a prefix that changes on every
	// call (every call writes, none reads).
	Scenarios []Scenario
	// BreakEvenReads is how many reads must follow each write before caching costs less than not
	// caching; -1 when reads cost no less than plain input, so caching never pays.
	BreakEvenReads int64
}

// Cache prices the plan's prefix with and without caching.
func Cache(c *pricing.Catalog, p CachePlan) (CacheReport, error) {
	m, err := resolve(c, p.Model)
	if err != nil {
		return CacheReport{}, err
	}
	if p.PrefixTokens <= 0 || p.Calls <= 0 {
		return CacheReport{}, fmt.Errorf("prefix tokens and calls must be positive")
	}
	calls := big.NewRat(p.Calls, 1)
	hit := p.HitRate
	if hit == nil {
		hit = big.NewRat(p.Calls-1, p.Calls)
	}
	if hit.Sign() < 0 || hit.Cmp(big.NewRat(1, 1)) > 0 {
		return CacheReport{}, fmt.Errorf("hit rate must be between 0 and 1")
	}
	r := CacheReport{Provider: m.Provider, Model: m.ID, TTL: "5m"}
	write := pricing.Usage{Provider: m.Provider, Model: m.ID, At: p.At, CacheWriteTokens: p.PrefixTokens}
	if p.TTL1h {
		write.CacheWrite1hTokens, r.TTL = p.PrefixTokens, "1h"
	}
	read := pricing.Usage{Provider: m.Provider, Model: m.ID, At: p.At, CacheReadTokens: p.PrefixTokens}
	plain := pricing.Usage{Provider: m.Provider, Model: m.ID, At: p.At, InputTokens: p.PrefixTokens}

	once := func(u pricing.Usage, n *big.Rat) (money.Nanos, error) {
		cost, err := c.CostTimes(u, n)
		if err != nil {
			return 0, fmt.Errorf("price %s: %w", m.ID, err)
		}
		r.Version = cost.Version
		return cost.Total, nil
	}
	unit, err := once(plain, big.NewRat(1, 1))
	if err != nil {
		return CacheReport{}, err
	}
	w1, err := once(write, big.NewRat(1, 1))
	if err != nil {
		return CacheReport{}, err
	}
	r1, err := once(read, big.NewRat(1, 1))
	if err != nil {
		return CacheReport{}, err
	}
	r.BreakEvenReads = breakEven(w1, r1, unit)

	reads := new(big.Rat).Mul(calls, hit)
	writes := new(big.Rat).Sub(calls, reads)
	plans := []struct {
		name          string
		writes, reads *big.Rat
	}{
		{"no caching", new(big.Rat), new(big.Rat)},
		{"cached", writes, reads},
		{"prefix changes every call", calls, new(big.Rat)},
	}
	var base money.Nanos
	for i, pl := range plans {
		var cost money.Nanos
		if i == 0 {
			if cost, err = once(plain, calls); err != nil {
				return CacheReport{}, err
			}
			base = cost
		} else {
			wc, err := once(write, pl.writes)
			if err != nil {
				return CacheReport{}, err
			}
			rc, err := once(read, pl.reads)
			if err != nil {
				return CacheReport{}, err
			}
			cost = wc + rc
		}
		s := Scenario{Name: pl.name, Writes: pl.writes, Reads: pl.reads, Cost: cost}
		if unit > 0 {
			s.Units = big.NewRat(int64(cost), int64(unit))
		}
		if base > 0 {
			s.VsNoCache = big.NewRat(int64(cost), int64(base))
		}
		r.Scenarios = append(r.Scenarios, s)
	}
	return r, nil
}

// breakEven is the least number of reads k after one write for which write + k × read costs less
// than k + 1 plain sends; -1 when reads cost no less than plain input.
func breakEven(write, read, plain money.Nanos) int64 {
	if write < plain {
		return 0
	}
	if read >= plain {
		return -1
	}
	// write + k·read < (k+1)·plain  ⇔  k > (write − plain) / (plain − read)
	return int64((write-plain)/(plain-read)) + 1
}
