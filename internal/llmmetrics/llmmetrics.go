// Package llmmetrics exposes ledgerd's LLM figures (cost, tokens, attempts, calls, cache use) as
// Prometheus counters, fed by the ingest writer with each record it newly commits, so a
// redelivered record is never counted twice. Label sets are capped: past the cap, new
// provider/model/service combinations are counted under "other".
package llmmetrics

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/schema"
)

// Other is the provider, model and service label of records past the label-set cap.
const Other = "other"

// DefaultMaxLabelSets is the cap on (project, provider, model, service) label sets when Options
// leaves it zero.
const DefaultMaxLabelSets = 200

// Options tunes a Collector. Zero values take the defaults shown.
type Options struct {
	// MaxLabelSets caps the (project, provider, model, service) label sets counted on their own
	// (DefaultMaxLabelSets); past it, a new combination is counted in its project's "other" set.
	MaxLabelSets int
	// LookupTimeout bounds the query that resolves project names at scrape time (2 s).
	LookupTimeout time.Duration
	Logger        *slog.Logger
}

// Collector accumulates the figures of committed records and reports them as counters. Observe is
// its feed (ingest.Options.OnCommit); register it on a prometheus.Registerer to expose it.
type Collector struct {
	store *store.Store
	opt   Options

	mu       sync.Mutex
	sets     map[key]*figures
	own      int // label sets admitted under the cap
	overflow int64
	names    map[int64]string

	cost, unpriced, requests, cacheWrites, cacheReads, tokens, attempts, overflowDesc *prometheus.Desc
}

// key is one label set of every LLM counter but the attempts' outcome.
type key struct {
	project                  int64
	provider, model, service string
}

// outcome splits attempts by how they ended and whether they served a fallback path.
type outcome struct {
	status   schema.Status
	class    schema.ErrorClass
	fallback bool
}

// figures are exact running totals; cost is integer nano-dollars, turned into dollars only when
// collected.
type figures struct {
	costNanos   int64
	unpriced    int64
	requests    int64
	tokens      [4]int64 // tokenTypes order
	cacheWrites int64
	cacheReads  int64
	attempts    map[outcome]int64
}

var tokenTypes = [4]string{"input", "output", "cache_write", "cache_read"}

// New returns a Collector that names projects through st.
func New(st *store.Store, opt Options) *Collector {
	if opt.MaxLabelSets <= 0 {
		opt.MaxLabelSets = DefaultMaxLabelSets
	}
	if opt.LookupTimeout <= 0 {
		opt.LookupTimeout = 2 * time.Second
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	base := []string{"project", "provider", "model", "service"}
	with := func(extra ...string) []string { return append(append([]string(nil), base...), extra...) }
	return &Collector{
		store: st, opt: opt, sets: map[key]*figures{}, names: map[int64]string{},
		cost: prometheus.NewDesc("ledgerd_llm_cost_usd_total",
			"Cost in US dollars of priced attempts committed to the ledger.", base, nil),
		unpriced: prometheus.NewDesc("ledgerd_llm_unpriced_attempts_total",
			"Attempts committed without a price (their cost is not in ledgerd_llm_cost_usd_total).", base, nil),
		requests: prometheus.NewDesc("ledgerd_llm_requests_total",
			"Logical calls: attempts with attempt_no 1.", base, nil),
		cacheWrites: prometheus.NewDesc("ledgerd_llm_cache_write_calls_total",
			"Attempts that wrote the prompt cache.", base, nil),
		cacheReads: prometheus.NewDesc("ledgerd_llm_cache_read_calls_total",
			"Attempts that read the prompt cache.", base, nil),
		tokens: prometheus.NewDesc("ledgerd_llm_tokens_total",
			"Tokens by type; types never overlap (cache_write and cache_read are not part of input).", with("type"), nil),
		attempts: prometheus.NewDesc("ledgerd_llm_attempts_total",
			"Provider attempts by outcome; fallback=\"true\" for attempts that served a fallback path.",
			with("status", "error_class", "fallback"), nil),
		overflowDesc: prometheus.NewDesc("ledgerd_llm_label_overflow_records_total",
			"Records counted under provider, model and service \"other\" because the label-set cap was reached.", nil, nil),
	}
}

// Observe adds newly committed records to the counters. It has the signature of
// ingest.Options.OnCommit and is safe for concurrent use.
func (c *Collector) Observe(recs []ingest.Committed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range recs {
		a := r.Attempt
		f := c.admit(key{project: r.ProjectID, provider: a.Provider, model: a.Model, service: a.Service})
		if r.Cost.Priced {
			f.costNanos += int64(r.Cost.Cost)
		} else {
			f.unpriced++
		}
		if a.AttemptNo == 1 {
			f.requests++
		}
		f.tokens[0] += a.InputTokens
		f.tokens[1] += a.OutputTokens
		f.tokens[2] += a.CacheWriteTokens
		f.tokens[3] += a.CacheReadTokens
		if a.CacheWriteTokens > 0 {
			f.cacheWrites++
		}
		if a.CacheReadTokens > 0 {
			f.cacheReads++
		}
		class := a.ErrorClass
		if class == "" {
			class = schema.ErrorNone
		}
		f.attempts[outcome{status: a.Status, class: class, fallback: a.Fallback}]++
	}
}

// admit returns the figures of k, or of its project's "other" set once the cap is reached. The
// caller holds c.mu.
func (c *Collector) admit(k key) *figures {
	if f, ok := c.sets[k]; ok {
		return f
	}
	if c.own >= c.opt.MaxLabelSets {
		c.overflow++
		k = key{project: k.project, provider: Other, model: Other, service: Other}
		if f, ok := c.sets[k]; ok {
			return f
		}
	} else {
		c.own++
	}
	f := &figures{attempts: map[outcome]int64{}}
	c.sets[k] = f
	return f
}

// Describe sends the descriptors of every metric the collector reports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.cost, c.unpriced, c.requests, c.cacheWrites, c.cacheReads, c.tokens, c.attempts, c.overflowDesc} {
		ch <- d
	}
}

// Collect reports the running totals. Series of a project whose name cannot be resolved are left
// out of this scrape (their counts are kept) rather than labelled with something that would change.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	names := c.projectNames()
	type labelled struct {
		labels []string
		f      figures
	}
	c.mu.Lock()
	overflow := float64(c.overflow)
	snap := make([]labelled, 0, len(c.sets))
	for k, f := range c.sets {
		project, ok := names[k.project]
		if !ok {
			continue
		}
		cp := *f
		cp.attempts = make(map[outcome]int64, len(f.attempts))
		for o, n := range f.attempts {
			cp.attempts[o] = n
		}
		snap = append(snap, labelled{[]string{project, k.provider, k.model, k.service}, cp})
	}
	c.mu.Unlock()

	ch <- prometheus.MustNewConstMetric(c.overflowDesc, prometheus.CounterValue, overflow)
	for _, s := range snap {
		f := &s.f
		counter := func(d *prometheus.Desc, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append(s.labels[:4:4], extra...)...)
		}
		counter(c.cost, float64(f.costNanos)/1e9)
		counter(c.unpriced, float64(f.unpriced))
		counter(c.requests, float64(f.requests))
		counter(c.cacheWrites, float64(f.cacheWrites))
		counter(c.cacheReads, float64(f.cacheReads))
		for i, t := range tokenTypes {
			counter(c.tokens, float64(f.tokens[i]), t)
		}
		for o, n := range f.attempts {
			counter(c.attempts, float64(n), string(o.status), string(o.class), strconv.FormatBool(o.fallback))
		}
	}
}

// projectNames returns the names of every project counted so far, looking up (and caching; a
// project is never renamed) the ones not seen before.
func (c *Collector) projectNames() map[int64]string {
	c.mu.Lock()
	var missing []int64
	seen := map[int64]bool{}
	for k := range c.sets {
		if _, ok := c.names[k.project]; !ok && !seen[k.project] {
			seen[k.project] = true
			missing = append(missing, k.project)
		}
	}
	c.mu.Unlock()
	if len(missing) > 0 {
		found, err := c.lookup(missing)
		if err != nil {
			c.opt.Logger.Warn("resolve project names for metrics", "err", err)
		}
		c.mu.Lock()
		for id, n := range found {
			c.names[id] = n
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int64]string, len(c.names))
	for id, n := range c.names {
		out[id] = n
	}
	return out
}

// lookup resolves the project ids the counters carry into the names they are labelled with.
func (c *Collector) lookup(ids []int64) (map[int64]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opt.LookupTimeout)
	defer cancel()
	names, err := c.store.ProjectNames(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("look up project names: %w", err)
	}
	return names, nil
}
