package main

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ledgerd/ledgerd/internal/estimate"
	"github.com/ledgerd/ledgerd/internal/numfmt"
	"github.com/ledgerd/ledgerd/pricing"
)

func runPrices(e env, args []string) error {
	var (
		c      common
		model  string
		asJSON bool
		sum    bool
	)
	fs := newFlags("prices", e, &c)
	fs.StringVar(&model, "model", "", "show one model with every price version and its sources")
	fs.BoolVar(&asJSON, "json", false, "print JSON (every version; the same shape as a price file)")
	fs.BoolVar(&sum, "summary", false, "print only what the price file contributed: models priced, entries skipped by reason")
	if err := parse(fs, args); err != nil {
		return err
	}
	if sum {
		return pricesSummary(e, c)
	}
	cat, at, err := c.setup(e)
	if err != nil {
		return err
	}
	list := cat.Models()
	if model != "" {
		m, ok := cat.Lookup("", model)
		if !ok {
			return &estimate.UnknownModelError{Model: model, Nearest: cat.Suggest(model, 3)}
		}
		list = []pricing.Model{m}
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"models": list})
	}
	if model != "" {
		return modelText(e, list[0])
	}
	return pricesText(e, at, list)
}

// pricesSummary prints the price file's report: the catalog's size, the models the file priced
// and the entries it skipped, by reason.
func pricesSummary(e env, c common) error {
	file := c.prices
	if file == "" {
		file = e.getenv("LEDGERD_PRICES")
	}
	cat, rep, err := pricing.LoadReported(file)
	if err != nil {
		return err
	}
	for _, w := range rep.Warnings() {
		fmt.Fprintf(e.stderr, "warning: %s\n", w)
	}
	fmt.Fprintf(e.stdout, "catalog: %s models (the built-in catalog and the price file)\n", numfmt.Count(int64(len(cat.Models()))))
	if file == "" {
		fmt.Fprintln(e.stdout, "price file: none (--prices or $LEDGERD_PRICES)")
		return nil
	}
	fmt.Fprintf(e.stdout, "price file: %s\n", rep.Summary())
	return nil
}

// batchText is a version's batch discount: "-50%", or "-45.4545% input, -50% output" when the
// output has its own.
func batchText(p pricing.Price) string {
	if p.BatchDiscount == nil {
		return "unknown"
	}
	pct := func(r pricing.Ratio) string {
		return "-" + decimal(new(big.Rat).Mul(r.Rat(), big.NewRat(100, 1)), 4) + "%"
	}
	if p.BatchOutputDiscount != nil {
		return pct(*p.BatchDiscount) + " input, " + pct(*p.BatchOutputDiscount) + " output"
	}
	return pct(*p.BatchDiscount)
}

func tiersText(p pricing.Price) string {
	if len(p.LongContext) == 0 {
		return "-"
	}
	var parts []string
	for _, t := range p.LongContext {
		parts = append(parts, fmt.Sprintf(">%s: %s / %s", numfmt.Count(t.AboveInputTokens), t.Input.USDFine(), t.Output.USDFine()))
	}
	return strings.Join(parts, "; ")
}

func pricesText(e env, at time.Time, list []pricing.Model) error {
	w := e.stdout
	fmt.Fprintf(w, "Prices in US dollars per million tokens, in effect on %s (--at).\n", at.Format("2006-01-02"))
	fmt.Fprintln(w, "BATCH is the discount off every component of a batch request; LONG CONTEXT shows input / output prices")
	fmt.Fprintln(w, "for a request whose total input (uncached + cache writes + cache reads) exceeds the threshold.")
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tMODEL\tFROM\tINPUT\tOUTPUT\tWRITE 5M\tWRITE 1H\tREAD\tBATCH\tLONG CONTEXT\tNEXT CHANGE")
	var none []string
	for _, m := range list {
		p, ok := m.PriceAt(at)
		if !ok {
			none = append(none, fmt.Sprintf("%s/%s (from %s)", m.Provider, m.ID, m.Prices[0].EffectiveFrom.Format("2006-01-02")))
			continue
		}
		next := "-"
		for _, q := range m.Prices {
			if q.EffectiveFrom.After(at) {
				next = q.EffectiveFrom.Format("2006-01-02")
				break
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Provider, m.ID, p.EffectiveFrom.Format("2006-01-02"),
			p.Input.USDFine(), p.Output.USDFine(), p.CacheWrite5m.USDFine(), p.CacheWrite1h.USDFine(), p.CacheRead.USDFine(), batchText(p), tiersText(p), next)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(none) > 0 {
		fmt.Fprintf(w, "\nNo price in effect yet: %s.\n", strings.Join(none, ", "))
	}
	return nil
}

func modelText(e env, m pricing.Model) error {
	w := e.stdout
	fmt.Fprintf(w, "%s/%s", m.Provider, m.ID)
	if m.Name != "" {
		fmt.Fprintf(w, " (%s)", m.Name)
	}
	fmt.Fprintln(w)
	if len(m.Aliases) > 0 {
		fmt.Fprintf(w, "aliases: %s\n", strings.Join(m.Aliases, ", "))
	}
	for _, p := range m.Prices {
		fmt.Fprintf(w, "\nversion %s, from %s\n", p.Key, p.EffectiveFrom.Format(time.RFC3339))
		fmt.Fprintf(w, "source: %s\n", p.Source)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TOKENS\tINPUT\tOUTPUT\tWRITE 5M\tWRITE 1H\tREAD\tREASONING")
		rows := []struct {
			name string
			r    pricing.Rates
		}{{"all requests", p.Rates}}
		for _, t := range p.LongContext {
			rows = append(rows, struct {
				name string
				r    pricing.Rates
			}{fmt.Sprintf("input > %s", numfmt.Count(t.AboveInputTokens)), t.Rates})
		}
		for _, row := range rows {
			reasoning := "as output"
			if row.r.Reasoning != nil {
				reasoning = row.r.Reasoning.USDFine()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.name, row.r.Input.USDFine(), row.r.Output.USDFine(),
				row.r.CacheWrite5m.USDFine(), row.r.CacheWrite1h.USDFine(), row.r.CacheRead.USDFine(), reasoning)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(w, "batch: %s\n", batchText(p))
	}
	return nil
}
