package main

import (
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ledgerd/ledgerd/internal/estimate"
	"github.com/ledgerd/ledgerd/internal/numfmt"
	"github.com/ledgerd/ledgerd/money"
)

func runEstimate(e env, args []string) error {
	var (
		c                            common
		ms                           models
		calls, days                  string
		in, out, cacheWrite, cacheRd int64
		batch, asJSON, asCSV         bool
	)
	fs := newFlags("estimate", e, &c)
	fs.Var(&ms, "model", "model `id` or alias; repeat or separate with commas to compare models")
	fs.StringVar(&calls, "calls-per-day", "", "calls a day (`number`, may be fractional)")
	fs.StringVar(&days, "days-per-month", strconv.Itoa(estimate.DefaultDaysPerMonth), "days in a month (`number`)")
	fs.Int64Var(&in, "input-tokens", 0, "uncached input tokens per call")
	fs.Int64Var(&out, "output-tokens", 0, "output tokens per call, reasoning included")
	fs.Int64Var(&cacheWrite, "cache-write-tokens", 0, "tokens written to the prompt cache (5-minute TTL) per call")
	fs.Int64Var(&cacheRd, "cache-read-tokens", 0, "tokens read from the prompt cache per call")
	fs.BoolVar(&batch, "batch", false, "price with the provider's batch discount")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	fs.BoolVar(&asCSV, "csv", false, "print CSV")
	if err := parse(fs, args); err != nil {
		return err
	}
	if len(ms) == 0 || calls == "" {
		return usagef("estimate needs --model and --calls-per-day")
	}
	tokensGiven := false
	fs.Visit(func(f *flag.Flag) {
		tokensGiven = tokensGiven || strings.HasSuffix(f.Name, "-tokens")
	})
	if !tokensGiven {
		// Without them a call would be priced at $0.00: the size of a call is what is priced.
		return usagef("estimate needs the tokens of one call: --input-tokens and --output-tokens (and --cache-write-tokens, --cache-read-tokens when the prompt is cached)")
	}
	if asJSON && asCSV {
		return usagef("--json and --csv exclude each other")
	}
	if in < 0 || out < 0 || cacheWrite < 0 || cacheRd < 0 {
		return usagef("token counts cannot be negative")
	}
	perDay, err := parseAmount("calls-per-day", calls)
	if err != nil {
		return err
	}
	perMonth, err := parseDaysPerMonth(days)
	if err != nil {
		return err
	}
	cat, at, err := c.setup(e)
	if err != nil {
		return err
	}
	var ests []estimate.Estimate
	for _, m := range ms {
		est, err := estimate.Project(cat, estimate.Workload{Model: m, At: at, CallsPerDay: perDay, DaysPerMonth: perMonth,
			InputTokens: in, OutputTokens: out, CacheWriteTokens: cacheWrite, CacheReadTokens: cacheRd, Batch: batch})
		if err != nil {
			return err
		}
		ests = append(ests, est)
	}
	switch {
	case asJSON:
		return estimateJSON(e, at, ests)
	case asCSV:
		return estimateCSV(e, ests)
	}
	return estimateText(e, at, ests, in, out, cacheWrite, cacheRd, batch)
}

func estimateText(e env, at time.Time, ests []estimate.Estimate, in, out, cw, cr int64, batch bool) error {
	w := e.stdout
	mode := ""
	if batch {
		mode = ", batch prices"
	}
	fmt.Fprintf(w, "Per call: %s input, %s output, %s cache write, %s cache read tokens%s.\n",
		numfmt.Count(in), numfmt.Count(out), numfmt.Count(cw), numfmt.Count(cr), mode)
	fmt.Fprintf(w, "%s calls a day; a month is %s days (--days-per-month). Prices as of %s.\n\n",
		count(ests[0].CallsPerDay), count(ests[0].DaysPerMonth), at.Format("2006-01-02"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tPER CALL\tPER DAY\tPER MONTH\tPRICE VERSION")
	for _, est := range ests {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", est.Model, est.PerCall.Total.USDFine(), est.Daily.Total.USD(), est.Monthly.Total.USD(), est.Version.Key)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nMonthly breakdown:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODEL\tINPUT\tOUTPUT\tCACHE WRITE\tCACHE READ\tWITHOUT CACHING\tLONG CONTEXT")
	for _, est := range ests {
		m := est.Monthly
		long := "no"
		if est.LongContext {
			long = "yes: tier prices"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", est.Model, m.Input.USD(), m.Output.USD(),
			(m.CacheWrite5m + m.CacheWrite1h).USD(), m.CacheRead.USD(), m.NoCache.USD(), long)
	}
	return tw.Flush()
}

type estimateOut struct {
	Provider     string       `json:"provider"`
	Model        string       `json:"model"`
	PriceVersion string       `json:"price_version"`
	CallsPerDay  string       `json:"calls_per_day"`
	DaysPerMonth string       `json:"days_per_month"`
	PerCallUSD   money.Nanos  `json:"per_call_usd"`
	DailyUSD     money.Nanos  `json:"daily_usd"`
	MonthlyUSD   money.Nanos  `json:"monthly_usd"`
	LongContext  bool         `json:"long_context"`
	Breakdown    breakdownOut `json:"breakdown"`
}

type breakdownOut struct {
	PerCall estimate.Breakdown `json:"per_call"`
	Daily   estimate.Breakdown `json:"daily"`
	Monthly estimate.Breakdown `json:"monthly"`
}

func estimateJSON(e env, at time.Time, ests []estimate.Estimate) error {
	out := struct {
		PricesAt  time.Time     `json:"prices_at"`
		Estimates []estimateOut `json:"estimates"`
	}{PricesAt: at, Estimates: []estimateOut{}}
	for _, est := range ests {
		out.Estimates = append(out.Estimates, estimateOut{
			Provider: est.Provider, Model: est.Model, PriceVersion: est.Version.Key,
			CallsPerDay: decimal(est.CallsPerDay, 9), DaysPerMonth: decimal(est.DaysPerMonth, 9),
			PerCallUSD: est.PerCall.Total, DailyUSD: est.Daily.Total, MonthlyUSD: est.Monthly.Total,
			LongContext: est.LongContext,
			Breakdown:   breakdownOut{PerCall: est.PerCall, Daily: est.Daily, Monthly: est.Monthly},
		})
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func estimateCSV(e env, ests []estimate.Estimate) error {
	w := csv.NewWriter(e.stdout)
	w.Write([]string{"provider", "model", "price_version", "calls_per_day", "days_per_month", "per_call_usd", "daily_usd", "monthly_usd",
		"monthly_input_usd", "monthly_output_usd", "monthly_cache_write_usd", "monthly_cache_read_usd", "monthly_nocache_usd", "long_context"})
	for _, est := range ests {
		m := est.Monthly
		w.Write([]string{est.Provider, est.Model, est.Version.Key, decimal(est.CallsPerDay, 9), decimal(est.DaysPerMonth, 9),
			est.PerCall.Total.String(), est.Daily.Total.String(), m.Total.String(), m.Input.String(), m.Output.String(),
			(m.CacheWrite5m + m.CacheWrite1h).String(), m.CacheRead.String(), m.NoCache.String(), strconv.FormatBool(est.LongContext)})
	}
	w.Flush()
	return w.Error()
}
