package main

import (
	"encoding/json"
	"fmt"
	"math/big"
	"text/tabwriter"
	"time"

	"github.com/ledgerd/ledgerd/internal/estimate"
	"github.com/ledgerd/ledgerd/internal/numfmt"
	"github.com/ledgerd/ledgerd/money"
)

func runCache(e env, args []string) error {
	var (
		c             common
		model, ttl    string
		hit           string
		prefix, calls int64
		asJSON        bool
	)
	fs := newFlags("cache", e, &c)
	fs.StringVar(&model, "model", "", "model `id` or alias")
	fs.Int64Var(&prefix, "prefix-tokens", 0, "tokens in the prompt prefix that would be cached")
	fs.Int64Var(&calls, "calls", 0, "calls that send the prefix")
	fs.StringVar(&ttl, "ttl", "5m", "cache TTL: 5m or 1h")
	fs.StringVar(&hit, "hit-rate", "", "share of calls that read the cache, 0 to 1 or a percentage (default: all but the first call)")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if model == "" || prefix <= 0 || calls <= 0 {
		return usagef("cache needs --model, and positive --prefix-tokens and --calls")
	}
	if ttl != "5m" && ttl != "1h" {
		return usagef("--ttl must be 5m or 1h, not %q", ttl)
	}
	plan := estimate.CachePlan{Model: model, PrefixTokens: prefix, Calls: calls, TTL1h: ttl == "1h"}
	if hit != "" {
		r, err := parseRatio("hit-rate", hit)
		if err != nil {
			return err
		}
		plan.HitRate = r
	}
	cat, at, err := c.setup(e)
	if err != nil {
		return err
	}
	plan.At = at
	r, err := estimate.Cache(cat, plan)
	if err != nil {
		return err
	}
	if asJSON {
		return cacheJSON(e, at, plan, r)
	}
	return cacheText(e, at, plan, r)
}

func cacheText(e env, at time.Time, p estimate.CachePlan, r estimate.CacheReport) error {
	w := e.stdout
	fmt.Fprintf(w, "%s: a %s-token prefix sent on %s calls, cached with the %s TTL. Prices as of %s (%s).\n",
		r.Model, numfmt.Count(p.PrefixTokens), numfmt.Count(p.Calls), r.TTL, at.Format("2006-01-02"), r.Version.Key)
	fmt.Fprintln(w, "Only the prefix is priced; the rest of each call costs the same either way.")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tWRITES\tREADS\tCOST\tPREFIX UNITS\tVS NO CACHING")
	for _, s := range r.Scenarios {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, count(s.Writes), count(s.Reads), s.Cost.USDFine(),
			ratOrDash(s.Units, 2), change(s.VsNoCache))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "A prefix unit is the cost of sending the prefix once without caching.")
	switch {
	case r.BreakEvenReads < 0:
		fmt.Fprintln(w, "Break-even: never; a cache read costs no less than plain input on this model.")
	case r.BreakEvenReads == 0:
		fmt.Fprintln(w, "Break-even: at once; a cache write costs less than plain input on this model.")
	default:
		fmt.Fprintf(w, "Break-even: caching pays off once each write is followed by at least %d read(s) within the TTL.\n", r.BreakEvenReads)
	}
	return nil
}

func ratOrDash(r *big.Rat, places int) string {
	if r == nil {
		return "-"
	}
	return decimal(r, places)
}

// change formats a cost ratio as a percentage change, e.g. 0.1575 as "-84.25% (6.35x cheaper)".
func change(r *big.Rat) string {
	if r == nil {
		return "-"
	}
	pct := new(big.Rat).Mul(new(big.Rat).Sub(r, big.NewRat(1, 1)), big.NewRat(100, 1))
	s := pct.FloatString(2) + "%"
	if pct.Sign() > 0 {
		s = "+" + s
	}
	if r.Sign() > 0 && r.Cmp(big.NewRat(1, 1)) < 0 {
		s += " (" + new(big.Rat).Inv(r).FloatString(2) + "x cheaper)"
	}
	return s
}

type scenarioOut struct {
	Name      string      `json:"name"`
	Writes    string      `json:"writes"`
	Reads     string      `json:"reads"`
	CostUSD   money.Nanos `json:"cost_usd"`
	Units     string      `json:"prefix_units,omitempty"`
	VsNoCache string      `json:"vs_no_caching,omitempty"`
}

func cacheJSON(e env, at time.Time, p estimate.CachePlan, r estimate.CacheReport) error {
	out := struct {
		PricesAt       time.Time     `json:"prices_at"`
		Provider       string        `json:"provider"`
		Model          string        `json:"model"`
		PriceVersion   string        `json:"price_version"`
		PrefixTokens   int64         `json:"prefix_tokens"`
		Calls          int64         `json:"calls"`
		TTL            string        `json:"ttl"`
		BreakEvenReads int64         `json:"break_even_reads"`
		Scenarios      []scenarioOut `json:"scenarios"`
	}{PricesAt: at, Provider: r.Provider, Model: r.Model, PriceVersion: r.Version.Key, PrefixTokens: p.PrefixTokens,
		Calls: p.Calls, TTL: r.TTL, BreakEvenReads: r.BreakEvenReads}
	for _, s := range r.Scenarios {
		so := scenarioOut{Name: s.Name, Writes: decimal(s.Writes, 9), Reads: decimal(s.Reads, 9), CostUSD: s.Cost}
		if s.Units != nil {
			so.Units = decimal(s.Units, 9)
		}
		if s.VsNoCache != nil {
			so.VsNoCache = decimal(s.VsNoCache, 9)
		}
		out.Scenarios = append(out.Scenarios, so)
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
