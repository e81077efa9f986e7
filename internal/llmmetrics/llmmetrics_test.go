package llmmetrics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/llmmetrics"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/schema"
)

// price charges 0.01 dollar per input token and 0.1 per output token, so costs are exact decimal
// dollars; model "free-model" has no price.
func price(a *schema.Attempt) ingest.Costing {
	if a.Model == "free-model" {
		return ingest.Costing{}
	}
	c := money.Nanos(a.InputTokens*10_000_000 + a.OutputTokens*100_000_000)
	return ingest.Costing{Cost: c, NoCache: c, Priced: true, Version: store.PriceVersion{Key: "test/" + a.Model,
		Provider: a.Provider, Model: a.Model, EffectiveFrom: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
}

func rec(id, model string, no int, status schema.Status) schema.Attempt {
	a := schema.Attempt{AttemptID: id, RequestID: "req-" + id, AttemptNo: no, LatencyMS: 800,
		StartedAt: time.Date(2026, 10, 3, 10, 0, 0, 0, time.UTC), Provider: "anthropic", Model: model,
		Service: "router", Operation: "default", Status: status, InputTokens: 100, OutputTokens: 10}
	if status == schema.StatusError {
		a.ErrorClass = schema.ErrorRateLimited
		a.OutputTokens = 0
	}
	return a
}

// setup returns a writer feeding a collector registered on its own registry, and a project.
func setup(t *testing.T, opt llmmetrics.Options) (*ingest.Writer, *prometheus.Registry, int64) {
	t.Helper()
	st := store.New(dbtest.New(t))
	p, err := st.EnsureProject(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	c := llmmetrics.New(st, opt)
	reg.MustRegister(c)
	w := ingest.NewWriter(st, price, ingest.Options{Registerer: prometheus.NewRegistry(), OnCommit: c.Observe})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return w, reg, p.ID
}

// TestCountsEachRecordOnce checks every counter against records delivered with duplicates: in the
// same request and in a later one.
func TestCountsEachRecordOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, reg, project := setup(t, llmmetrics.Options{})
	retry := rec("a2", "claude-haiku-5-5", 2, schema.StatusOK)
	retry.CacheWriteTokens, retry.CacheReadTokens = 1000, 0
	cached := rec("a3", "claude-haiku-5-5", 1, schema.StatusOK)
	cached.CacheReadTokens = 1000
	fb := rec("a5", "claude-sonnet-5", 3, schema.StatusOK)
	fb.Fallback, fb.FallbackFrom = true, "claude-haiku-5-5"
	batches := [][]schema.Attempt{
		{rec("a1", "claude-haiku-5-5", 1, schema.StatusError), retry, retry},                           // a2 twice in one request
		{cached, rec("a1", "claude-haiku-5-5", 1, schema.StatusError)},                                 // a1 again later
		{rec("a4", "free-model", 1, schema.StatusOK), fb, rec("a4", "free-model", 1, schema.StatusOK)}, // unpriced, fallback
	}
	for _, b := range batches {
		if _, err := w.Submit(ctx, project, b); err != nil {
			t.Fatal(err)
		}
	}
	// haiku: a1 error (100 in) $1, a2 ok $1+$1, a3 ok $2 => $5; sonnet fallback $2; free-model unpriced.
	const want = `
# HELP ledgerd_llm_attempts_total Provider attempts by outcome; fallback="true" for attempts that served a fallback path.
# TYPE ledgerd_llm_attempts_total counter
ledgerd_llm_attempts_total{error_class="none",fallback="false",model="claude-haiku-5-5",project="acme",provider="anthropic",service="router",status="ok"} 2
ledgerd_llm_attempts_total{error_class="rate_limited",fallback="false",model="claude-haiku-5-5",project="acme",provider="anthropic",service="router",status="error"} 1
ledgerd_llm_attempts_total{error_class="none",fallback="true",model="claude-sonnet-5",project="acme",provider="anthropic",service="router",status="ok"} 1
ledgerd_llm_attempts_total{error_class="none",fallback="false",model="free-model",project="acme",provider="anthropic",service="router",status="ok"} 1
# HELP ledgerd_llm_cache_read_calls_total Attempts that read the prompt cache.
# TYPE ledgerd_llm_cache_read_calls_total counter
ledgerd_llm_cache_read_calls_total{model="claude-haiku-5-5",project="acme",provider="anthropic",service="router"} 1
ledgerd_llm_cache_read_calls_total{model="claude-sonnet-5",project="acme",provider="anthropic",service="router"} 0
ledgerd_llm_cache_read_calls_total{model="free-model",project="acme",provider="anthropic",service="router"} 0
# HELP ledgerd_llm_cache_write_calls_total Attempts that wrote the prompt cache.
# TYPE ledgerd_llm_cache_write_calls_total counter
ledgerd_llm_cache_write_calls_total{model="claude-haiku-5-5",project="acme",provider="anthropic",service="router"} 1
ledgerd_llm_cache_write_calls_total{model="claude-sonnet-5",project="acme",provider="anthropic",service="router"} 0
ledgerd_llm_cache_write_calls_total{model="free-model",project="acme",provider="anthropic",service="router"} 0
# HELP ledgerd_llm_cost_usd_total Cost in US dollars of priced attempts committed to the ledger.
# TYPE ledgerd_llm_cost_usd_total counter
ledgerd_llm_cost_usd_total{model="claude-haiku-5-5",project="acme",provider="anthropic",service="router"} 5
ledgerd_llm_cost_usd_total{model="claude-sonnet-5",project="acme",provider="anthropic",service="router"} 2
ledgerd_llm_cost_usd_total{model="free-model",project="acme",provider="anthropic",service="router"} 0
# HELP ledgerd_llm_requests_total Logical calls: attempts with attempt_no 1.
# TYPE ledgerd_llm_requests_total counter
ledgerd_llm_requests_total{model="claude-haiku-5-5",project="acme",provider="anthropic",service="router"} 2
ledgerd_llm_requests_total{model="claude-sonnet-5",project="acme",provider="anthropic",service="router"} 0
ledgerd_llm_requests_total{model="free-model",project="acme",provider="anthropic",service="router"} 1
# HELP ledgerd_llm_tokens_total Tokens by type; types never overlap (cache_write and cache_read are not part of input).
# TYPE ledgerd_llm_tokens_total counter
ledgerd_llm_tokens_total{model="claude-haiku-5-5",project="acme",provider="anthropic",service="router",type="cache_read"} 1000
ledgerd_llm_tokens_total{model="claude-haiku-5-5",project="acme",provider="anthropic",service="router",type="cache_write"} 1000
ledgerd_llm_tokens_total{model="claude-haiku-5-5",project="acme",provider="anthropic",service="router",type="input"} 300
ledgerd_llm_tokens_total{model="claude-haiku-5-5",project="acme",provider="anthropic",service="router",type="output"} 20
ledgerd_llm_tokens_total{model="claude-sonnet-5",project="acme",provider="anthropic",service="router",type="cache_read"} 0
ledgerd_llm_tokens_total{model="claude-sonnet-5",project="acme",provider="anthropic",service="router",type="cache_write"} 0
ledgerd_llm_tokens_total{model="claude-sonnet-5",project="acme",provider="anthropic",service="router",type="input"} 100
ledgerd_llm_tokens_total{model="claude-sonnet-5",project="acme",provider="anthropic",service="router",type="output"} 10
ledgerd_llm_tokens_total{model="free-model",project="acme",provider="anthropic",service="router",type="cache_read"} 0
ledgerd_llm_tokens_total{model="free-model",project="acme",provider="anthropic",service="router",type="cache_write"} 0
ledgerd_llm_tokens_total{model="free-model",project="acme",provider="anthropic",service="router",type="input"} 100
ledgerd_llm_tokens_total{model="free-model",project="acme",provider="anthropic",service="router",type="output"} 10
# HELP ledgerd_llm_unpriced_attempts_total Attempts committed without a price (their cost is not in ledgerd_llm_cost_usd_total).
# TYPE ledgerd_llm_unpriced_attempts_total counter
ledgerd_llm_unpriced_attempts_total{model="claude-haiku-5-5",project="acme",provider="anthropic",service="router"} 0
ledgerd_llm_unpriced_attempts_total{model="claude-sonnet-5",project="acme",provider="anthropic",service="router"} 0
ledgerd_llm_unpriced_attempts_total{model="free-model",project="acme",provider="anthropic",service="router"} 1
# HELP ledgerd_llm_label_overflow_records_total Records counted under provider, model and service "other" because the label-set cap was reached.
# TYPE ledgerd_llm_label_overflow_records_total counter
ledgerd_llm_label_overflow_records_total 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// TestLabelCap checks that label sets past the cap are counted under "other" and that exact nano
// sums survive the conversion to dollars.
func TestLabelCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, reg, project := setup(t, llmmetrics.Options{MaxLabelSets: 2})
	var recs []schema.Attempt
	for i, m := range []string{"m1", "m2", "m3", "m4", "m1"} {
		a := rec(string(rune('a'+i)), m, 1, schema.StatusOK)
		a.InputTokens, a.OutputTokens = 1, 0 // 0.01 dollar each
		recs = append(recs, a)
	}
	if _, err := w.Submit(ctx, project, recs); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		model  string
		cost   float64
		reqs   float64
		absent bool
	}{
		{"first set under the cap", "m1", 0.02, 2, false},          // m1 twice, exact 0.02
		{"second set under the cap", "m2", 0.01, 1, false},         // still under the cap
		{"past the cap folds into other", "other", 0.02, 2, false}, // m3 and m4
		{"no set of its own past the cap", "m3", 0, 0, true},       // bounded cardinality
	}
	for _, c := range cases {
		labels := prometheus.Labels{"project": "acme", "provider": "anthropic", "model": c.model, "service": "router"}
		if c.model == llmmetrics.Other {
			labels["provider"], labels["service"] = llmmetrics.Other, llmmetrics.Other
		}
		got, found := value(t, reg, "ledgerd_llm_cost_usd_total", labels)
		if found == c.absent {
			t.Errorf("%s: series present %v, want %v", c.name, found, !c.absent)
			continue
		}
		reqs, _ := value(t, reg, "ledgerd_llm_requests_total", labels)
		if got != c.cost || reqs != c.reqs {
			t.Errorf("%s: cost %v requests %v, want %v and %v", c.name, got, reqs, c.cost, c.reqs)
		}
	}
	if n, _ := value(t, reg, "ledgerd_llm_label_overflow_records_total", nil); n != 2 {
		t.Errorf("overflow records %v, want 2", n)
	}
}

// value returns the value of the series of name whose labels include want.
func value(t *testing.T, reg *prometheus.Registry, name string, want prometheus.Labels) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue metrics
				}
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}
