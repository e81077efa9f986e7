package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ledgerd/ledgerd/internal/estimate"
	"github.com/ledgerd/ledgerd/internal/numfmt"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/pricing"
)

// summary is the part of ledgerd's GET /v1/summary?group_by=provider,model answer (analytics.Summary)
// that ledger reads.
type summary struct {
	From     time.Time      `json:"from"`
	To       time.Time      `json:"to"`
	Timezone string         `json:"timezone"`
	Total    summaryStats   `json:"total"`
	Groups   []summaryGroup `json:"groups"`
}

type summaryGroup struct {
	Key struct {
		Provider     string `json:"provider"`
		Model        string `json:"model"`
		Fallback     bool   `json:"fallback"`
		FallbackFrom string `json:"fallback_from"`
	} `json:"key"`
	summaryStats
}

type summaryStats struct {
	Attempts           int64        `json:"attempts"`
	Requests           int64        `json:"requests"`
	CostUSD            *money.Nanos `json:"cost_usd"`
	UnpricedAttempts   int64        `json:"unpriced_attempts"`
	UsageUnknown       int64        `json:"usage_unknown_attempts"`
	InputTokens        int64        `json:"input_tokens"`
	OutputTokens       int64        `json:"output_tokens"`
	CacheWriteTokens   int64        `json:"cache_write_tokens"`
	CacheWrite1hTokens int64        `json:"cache_write_1h_tokens"`
	CacheReadTokens    int64        `json:"cache_read_tokens"`
	ReasoningTokens    int64        `json:"reasoning_tokens"`
}

func (s summaryStats) traffic() estimate.Traffic {
	return estimate.Traffic{Attempts: s.Attempts, InputTokens: s.InputTokens, OutputTokens: s.OutputTokens,
		CacheWriteTokens: s.CacheWriteTokens, CacheWrite1hTokens: s.CacheWrite1hTokens,
		CacheReadTokens: s.CacheReadTokens, ReasoningTokens: s.ReasoningTokens}
}

// maxSummaryBytes bounds the answer read from ledgerd.
const maxSummaryBytes = 32 << 20

// decodeSummary reads and checks a summary answer: counts that no ledger can hold are refused
// rather than priced.
func decodeSummary(r io.Reader) (summary, error) {
	var s summary
	dec := json.NewDecoder(io.LimitReader(r, maxSummaryBytes))
	if err := dec.Decode(&s); err != nil {
		return summary{}, fmt.Errorf("read the summary: %w", err)
	}
	if s.From.IsZero() || !s.From.Before(s.To) {
		return summary{}, errors.New("read the summary: its range is empty")
	}
	check := func(name string, st summaryStats) error {
		t := st.traffic()
		for _, v := range []int64{st.Attempts, st.Requests, st.UnpricedAttempts, t.InputTokens, t.OutputTokens,
			t.CacheWriteTokens, t.CacheWrite1hTokens, t.CacheReadTokens, t.ReasoningTokens} {
			if v < 0 {
				return fmt.Errorf("read the summary: %s has a negative count", name)
			}
		}
		if t.CacheWrite1hTokens > t.CacheWriteTokens || t.ReasoningTokens > t.OutputTokens || st.UnpricedAttempts > st.Attempts {
			return fmt.Errorf("read the summary: %s has inconsistent counts", name)
		}
		return nil
	}
	if err := check("the total", s.Total); err != nil {
		return summary{}, err
	}
	for _, g := range s.Groups {
		if g.Key.Model == "" {
			return summary{}, errors.New("read the summary: a group has no model")
		}
		if err := check(g.Key.Model, g.summaryStats); err != nil {
			return summary{}, err
		}
	}
	return s, nil
}

// parseSince reads a look-back of whole hours: "7d", "36h", or a Go duration such as "48h0m".
func parseSince(s string) (time.Duration, error) {
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days <= 0 || days > 400 {
			return 0, usagef("--since %q is not a number of days from 1 to 400", s)
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil || d <= 0 {
			return 0, usagef("--since %q is not a duration such as 7d or 36h", s)
		}
	}
	if d%time.Hour != 0 {
		return 0, usagef("--since %q is not a whole number of hours", s)
	}
	return d, nil
}

// fetchSummary asks ledgerd for the usage of [from, to) per provider and model. The key is never
// part of an error.
func fetchSummary(base, key string, from, to time.Time) (summary, error) {
	u, err := url.Parse(strings.TrimSuffix(base, "/") + "/v1/summary")
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return summary{}, usagef("--url %q is not an http(s) URL", base)
	}
	u.User = nil
	u.RawQuery = url.Values{"from": {from.Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)},
		"group_by": {"provider,model"}}.Encode()
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		return summary{}, fmt.Errorf("ask ledgerd: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Accept", "application/json")
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return summary{}, fmt.Errorf("ask ledgerd at %s: %w", u.Redacted(), errors.Unwrap(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return summary{}, fmt.Errorf("ledgerd at %s answered %s: %s", u.Redacted(), resp.Status, msg)
	}
	return decodeSummary(resp.Body)
}

// ledgerRow is one line of the projection: a group of the summary, or the total.
type ledgerRow struct {
	Provider           string       `json:"provider,omitempty"`
	Model              string       `json:"model,omitempty"`
	Fallback           bool         `json:"fallback,omitempty"`
	FallbackFrom       string       `json:"fallback_from,omitempty"`
	Attempts           int64        `json:"attempts"`
	Requests           int64        `json:"requests"`
	UnpricedAttempts   int64        `json:"unpriced_attempts"`
	UsageUnknown       int64        `json:"usage_unknown_attempts"`
	InputTokens        int64        `json:"input_tokens"`
	OutputTokens       int64        `json:"output_tokens"`
	CacheWriteTokens   int64        `json:"cache_write_tokens"`
	CacheWrite1hTokens int64        `json:"cache_write_1h_tokens"`
	CacheReadTokens    int64        `json:"cache_read_tokens"`
	ReasoningTokens    int64        `json:"reasoning_tokens"`
	CostUSD            *money.Nanos `json:"cost_usd"`
	MonthlyUSD         *money.Nanos `json:"monthly_usd"`
	AsModelCostUSD     *money.Nanos `json:"as_model_cost_usd,omitempty"`
	AsModelMonthlyUSD  *money.Nanos `json:"as_model_monthly_usd,omitempty"`
}

// asModel names the model the traffic was re-priced on.
type asModel struct {
	Provider     string    `json:"provider"`
	Model        string    `json:"model"`
	PriceVersion string    `json:"price_version"`
	PricesAt     time.Time `json:"prices_at"`
	Note         string    `json:"note"`
}

// projection is what ledger prints.
type projection struct {
	URL          string      `json:"url"`
	From         time.Time   `json:"from"`
	To           time.Time   `json:"to"`
	Timezone     string      `json:"timezone"`
	WindowDays   string      `json:"window_days"`
	DaysPerMonth string      `json:"days_per_month"`
	AsModel      *asModel    `json:"as_model,omitempty"`
	Groups       []ledgerRow `json:"groups"`
	Total        ledgerRow   `json:"total"`
}

func row(s summaryStats) ledgerRow {
	return ledgerRow{Attempts: s.Attempts, Requests: s.Requests, UnpricedAttempts: s.UnpricedAttempts, UsageUnknown: s.UsageUnknown,
		InputTokens: s.InputTokens, OutputTokens: s.OutputTokens, CacheWriteTokens: s.CacheWriteTokens,
		CacheWrite1hTokens: s.CacheWrite1hTokens, CacheReadTokens: s.CacheReadTokens, ReasoningTokens: s.ReasoningTokens,
		CostUSD: s.CostUSD}
}

// project scales the summary's costs to a month and, when model is set, re-prices every group on
// it.
func project(s summary, cat *pricing.Catalog, model string, at time.Time, days *big.Rat) (projection, error) {
	window := s.To.Sub(s.From)
	scale, err := estimate.MonthScale(window, days)
	if err != nil {
		return projection{}, err
	}
	p := projection{From: s.From, To: s.To, Timezone: s.Timezone, Groups: []ledgerRow{},
		WindowDays: decimal(big.NewRat(int64(window), int64(24*time.Hour)), 4), DaysPerMonth: decimal(days, 9)}
	monthly := func(c *money.Nanos) (*money.Nanos, error) {
		if c == nil {
			return nil, nil
		}
		m, err := estimate.Scale(*c, scale)
		return &m, err
	}
	var asTotal, asMonthTotal money.Nanos
	for _, g := range s.Groups {
		r := row(g.summaryStats)
		r.Provider, r.Model, r.Fallback, r.FallbackFrom = g.Key.Provider, g.Key.Model, g.Key.Fallback, g.Key.FallbackFrom
		if r.MonthlyUSD, err = monthly(r.CostUSD); err != nil {
			return projection{}, err
		}
		if model != "" {
			window, err := estimate.Reprice(cat, model, at, g.traffic(), big.NewRat(1, 1))
			if err != nil {
				return projection{}, err
			}
			month, err := estimate.Reprice(cat, model, at, g.traffic(), scale)
			if err != nil {
				return projection{}, err
			}
			r.AsModelCostUSD, r.AsModelMonthlyUSD = &window.Total, &month.Total
			asTotal += window.Total
			asMonthTotal += month.Total
			v := window.Version
			p.AsModel = &asModel{Provider: v.Provider, Model: v.Model, PriceVersion: v.Key, PricesAt: at, Note: estimate.RepriceNote}
		}
		p.Groups = append(p.Groups, r)
	}
	p.Total = row(s.Total)
	if p.Total.MonthlyUSD, err = monthly(p.Total.CostUSD); err != nil {
		return projection{}, err
	}
	if model != "" {
		if p.AsModel == nil { // no traffic: still say which model and price
			c, err := estimate.Reprice(cat, model, at, estimate.Traffic{}, big.NewRat(1, 1))
			if err != nil {
				return projection{}, err
			}
			v := c.Version
			p.AsModel = &asModel{Provider: v.Provider, Model: v.Model, PriceVersion: v.Key, PricesAt: at, Note: estimate.RepriceNote}
		}
		p.Total.AsModelCostUSD, p.Total.AsModelMonthlyUSD = &asTotal, &asMonthTotal
	}
	return p, nil
}

func runLedger(e env, args []string) error {
	var (
		c                    common
		base, key, since, as string
		days                 string
		asJSON               bool
	)
	fs := newFlags("ledger", e, &c)
	fs.StringVar(&base, "url", "", "ledgerd base `URL` (default $LEDGERD_URL, else http://127.0.0.1:8080)")
	fs.StringVar(&key, "key", "", "project API `key` (default $LEDGERD_KEY)")
	fs.StringVar(&since, "since", "7d", "look back this long from the last whole hour (`7d`, 36h)")
	fs.StringVar(&as, "as-model", "", "also price the same traffic on this `model`")
	fs.StringVar(&days, "days-per-month", strconv.Itoa(estimate.DefaultDaysPerMonth), "days in a month (`number`)")
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if base == "" {
		if base = e.getenv("LEDGERD_URL"); base == "" {
			base = "http://127.0.0.1:8080"
		}
	}
	if key == "" {
		if key = e.getenv("LEDGERD_KEY"); key == "" {
			return usagef("ledger needs --key (or LEDGERD_KEY): a project API key of the ledgerd at --url")
		}
	}
	window, err := parseSince(since)
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
	if as != "" {
		if _, ok := cat.Lookup("", as); !ok {
			return &estimate.UnknownModelError{Model: as, Nearest: cat.Suggest(as, 3)}
		}
	}
	to := e.now().UTC().Truncate(time.Hour)
	progress(e, "asking ledgerd at %s for %s of traffic...", base, window)
	s, err := fetchSummary(base, key, to.Add(-window), to)
	if err != nil {
		return err
	}
	p, err := project(s, cat, as, at, perMonth)
	if err != nil {
		return err
	}
	p.URL = strings.TrimSuffix(base, "/")
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	}
	return ledgerText(e, p)
}

func ledgerText(e env, p projection) error {
	w := e.stdout
	fmt.Fprintf(w, "Traffic recorded by ledgerd at %s over %s days, %s to %s (UTC); a month is %s days (--days-per-month).\n\n",
		p.URL, p.WindowDays, p.From.UTC().Format("2006-01-02 15:04"), p.To.UTC().Format("2006-01-02 15:04"), p.DaysPerMonth)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "PROVIDER\tMODEL\tATTEMPTS\tREQUESTS\tINPUT\tOUTPUT\tCACHE WRITE\tCACHE READ\tCOST\tPER MONTH"
	if p.AsModel != nil {
		head += "\tAS " + strings.ToUpper(p.AsModel.Model) + "\tPER MONTH"
	}
	fmt.Fprintln(tw, head)
	line := func(provider, model string, r ledgerRow) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", provider, model, numfmt.Count(r.Attempts), numfmt.Count(r.Requests),
			numfmt.Count(r.InputTokens), numfmt.Count(r.OutputTokens), numfmt.Count(r.CacheWriteTokens), numfmt.Count(r.CacheReadTokens),
			maybeUSD(r.CostUSD), maybeUSD(r.MonthlyUSD))
		if p.AsModel != nil {
			fmt.Fprintf(tw, "\t%s\t%s", maybeUSD(r.AsModelCostUSD), maybeUSD(r.AsModelMonthlyUSD))
		}
		fmt.Fprintln(tw)
	}
	for _, g := range p.Groups {
		name := g.Model
		if g.Fallback {
			name += " (fallback"
			if g.FallbackFrom != "" {
				name += " for " + g.FallbackFrom
			}
			name += ")"
		}
		line(g.Provider, name, g)
	}
	line("TOTAL", "", p.Total)
	if err := tw.Flush(); err != nil {
		return err
	}
	if n := p.Total.UnpricedAttempts; n > 0 {
		fmt.Fprintf(w, "\n%s attempts had no price: COST leaves them out (add their model to the price file, then `ledgerd reprice`).\n", numfmt.Count(n))
	}
	if n := p.Total.UsageUnknown; n > 0 {
		fmt.Fprintf(w, "\nusage unknown (%s): attempts whose answer carried no usage (a chat stream without stream_options.include_usage); COST leaves them out.\n", numfmt.Count(n))
	}
	fmt.Fprintf(w, "\nPER MONTH is the window's cost per day times %s days. The dashboard's projected month (and GET /v1/projection)\n"+
		"is this calendar month's spend so far plus its recent daily run rate for the days left, so the two differ\n"+
		"unless spend is flat: compare the dashboard with `ledger --since` the days of this month.\n", p.DaysPerMonth)
	if a := p.AsModel; a != nil {
		fmt.Fprintf(w, "\nAS %s: %s/%s at the prices in effect on %s (version %s).\n%s\n",
			strings.ToUpper(a.Model), a.Provider, a.Model, a.PricesAt.Format("2006-01-02"), a.PriceVersion, a.Note)
	}
	return nil
}

func maybeUSD(n *money.Nanos) string {
	if n == nil {
		return "unpriced"
	}
	return n.USD()
}
