// Package seed loads a synthetic ledger of any size straight into the database, for benchmarks and
// tests of the read side: the calls package synth generates, priced, copied into attempts with
// COPY (bypassing the ingest writer), then counted into the rollups by analytics.Rebuild, which
// counts exactly what the writer would have.
package seed

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/big"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/rollup"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/internal/synth"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/schema"
)

// Options describes the ledger Load builds.
type Options struct {
	// Records is the number of attempts to load.
	Records int
	// Seed makes the ledger reproducible.
	Seed int64
	// Projects names the projects the records are spread over, the first busiest (each gets twice
	// the traffic of the next). Default: synth-a, synth-b, synth-c.
	Projects []string
	// End is where the history ends; it spans Days days before it (30).
	End  time.Time
	Days int
	// Timezone counts daily rollups and traffic cycles (UTC).
	Timezone *time.Location
	// Price prices each attempt, as the ingest writer would (required).
	Price ingest.PriceFunc
	// Spread, when set, spreads the calls over many tenants, services and models: the ledger of a
	// SaaS that attributes spend per customer, whose series are many.
	Spread *Spread
}

// Spread spreads synthetic calls over Tenants tenants, Services services and the twelve models of
// spreadModels, each call (all its attempts) on one of each, picked from its request id.
type Spread struct {
	Tenants, Services int
}

// spreadModels are the priced catalog models a Spread ledger calls.
var spreadModels = [][2]string{
	{"anthropic", "claude-haiku-5-5"}, {"anthropic", "claude-sonnet-5-5"}, {"anthropic", "claude-sonnet-5"},
	{"anthropic", "claude-opus-5-5"}, {"anthropic", "claude-sonnet-4-6"}, {"anthropic", "claude-sonnet-4-5"},
	{"anthropic", "claude-haiku-4-5"}, {"openai", "gpt-4o"}, {"openai", "gpt-6-sol"}, {"openai", "gpt-6-luna"},
	{"openai", "gpt-6.1-sol"}, {"gemini", "gemini-4-argon"},
}

// apply moves a call's attempt to its tenant, service and model. A fallback attempt keeps its
// model and names the call's primary model as the one it stands in for.
func (s *Spread) apply(a *schema.Attempt) {
	h := fnv.New64a()
	h.Write([]byte(a.RequestID))
	n := h.Sum64()
	a.Tenant = fmt.Sprintf("tenant-%05d", n%uint64(s.Tenants))
	n /= uint64(s.Tenants)
	a.Service = fmt.Sprintf("service-%02d", n%uint64(s.Services))
	n /= uint64(s.Services)
	m := spreadModels[n%uint64(len(spreadModels))]
	if a.Fallback {
		a.FallbackFrom = m[1]
		return
	}
	a.Provider, a.Model = m[0], m[1]
}

// Result tells what Load built.
type Result struct {
	// Projects are the loaded projects, in Options.Projects order, with their record counts.
	Projects []store.Project
	Records  []int
	Rebuild  analytics.RebuildResult
}

// chunk is the number of records copied per COPY statement.
const chunk = 20_000

// columns are the attempts columns Load fills, in the order of row values.
var columns = []string{"project_id", "started_at", "series_id", "attempt_no", "latency_ms", "status",
	"error_class", "fallback", "batch", "http_status", "retry_after_ms", "price_id", "input_tokens",
	"output_tokens", "cache_write_tokens", "cache_write_1h_tokens", "cache_read_tokens",
	"reasoning_tokens", "cost_nanos", "nocache_cost_nanos", "client_cost_nanos", "attempt_id",
	"request_id", "prompt_hash", "provider_request_id", "metadata", "org",
	"ratelimit_limit_requests", "ratelimit_remaining_requests", "ratelimit_reset_requests",
	"ratelimit_limit_tokens", "ratelimit_remaining_tokens", "ratelimit_reset_tokens",
	"ratelimit_limit_input_tokens", "ratelimit_remaining_input_tokens", "ratelimit_reset_input_tokens",
	"ratelimit_limit_output_tokens", "ratelimit_remaining_output_tokens", "ratelimit_reset_output_tokens"}

// Load generates opt.Records attempts from package synth (the demo incidents: a retry storm, an
// outage served by a fallback model, support-bot's broken cache, a Monday-morning rush over an
// org's rate limits) and copies them into attempts,
// then rebuilds every rollup. Two habits are added to synth's services, so the ledger shows them:
// digest-mailer puts the send time before its cached prefix (each call has its own prompt_hash,
// and never reads the cache), and extractor reports a client cost 3% above ledgerd's.
func Load(ctx context.Context, st *store.Store, opt Options) (Result, error) {
	if opt.Price == nil {
		return Result{}, fmt.Errorf("seed: Options.Price is required")
	}
	if len(opt.Projects) == 0 {
		opt.Projects = []string{"synth-a", "synth-b", "synth-c"}
	}
	if opt.Days <= 0 {
		opt.Days = 30
	}
	if opt.Timezone == nil {
		opt.Timezone = time.UTC
	}
	// The ledger's clock is opt.End: its 5-minute rollup holds the last rollup.MinuteKeep before
	// it, as a writer's prune would have left it, counted by the rebuild below.
	if err := st.SetSetting(ctx, "minutes_from", rollup.MinutesCutoff(opt.End).Format(time.RFC3339)); err != nil {
		return Result{}, err
	}
	res := Result{Records: make([]int, len(opt.Projects))}
	gens := make([]*synth.Generator, len(opt.Projects))
	for i, name := range opt.Projects {
		p, err := st.EnsureProject(ctx, name)
		if err != nil {
			return Result{}, err
		}
		res.Projects = append(res.Projects, p)
		so := synth.Demo(opt.Seed+int64(i), opt.End, opt.Timezone)
		so.Start = opt.End.AddDate(0, 0, -opt.Days)
		so.Rate = synth.CallsPerMinute(so, opt.Records*(1<<(len(opt.Projects)-1-i))/(1<<len(opt.Projects)-1))
		gens[i] = synth.New(so)
	}
	// Project i gets 2^(n-1-i) shares of the traffic.
	shares := 1<<len(opt.Projects) - 1
	var (
		batch []record
		left  = opt.Records
		n     int
	)
	for left > 0 {
		share := n % shares
		n++
		i := 0
		for w := 1 << (len(opt.Projects) - 1); share >= w; w >>= 1 {
			share -= w
			i++
		}
		for _, a := range gens[i].Next() {
			if left == 0 {
				break
			}
			if opt.Spread != nil {
				opt.Spread.apply(&a)
			}
			batch = append(batch, record{project: res.Projects[i].ID, a: a})
			res.Records[i]++
			left--
		}
		if len(batch) >= chunk || left == 0 {
			if err := copyRecords(ctx, st, opt.Price, batch); err != nil {
				return Result{}, err
			}
			batch = batch[:0]
		}
	}
	rb, err := analytics.Rebuild(ctx, st.Pool, opt.Timezone)
	if err != nil {
		return Result{}, err
	}
	res.Rebuild = rb
	return res, nil
}

type record struct {
	project int64
	a       schema.Attempt
	cost    ingest.Costing
}

// copyRecords prices the records, resolves their series and price ids, and copies them.
func copyRecords(ctx context.Context, st *store.Store, price ingest.PriceFunc, recs []record) error {
	keys := make([]store.SeriesKey, len(recs))
	times := make([]time.Time, len(recs))
	var versions []store.PriceVersion
	for i := range recs {
		r := &recs[i]
		habits(&r.a)
		r.a.StartedAt = r.a.StartedAt.UTC().Truncate(time.Microsecond)
		if ferr := r.a.Validate(r.a.StartedAt); ferr != nil {
			return fmt.Errorf("synthetic record %s: %s: %s", r.a.AttemptID, ferr.Field, ferr.Reason)
		}
		r.cost = price(&r.a)
		if r.cost.Priced {
			versions = append(versions, r.cost.Version)
			if r.a.Service == "extractor" {
				c := money.Nanos(money.RoundRat(new(big.Rat).Mul(big.NewRat(int64(r.cost.Cost), 1), big.NewRat(103, 100))).Int64())
				r.a.CostUSD = &c
			}
		}
		keys[i] = store.SeriesKey{ProjectID: r.project, Tenant: r.a.Tenant, Service: r.a.Service,
			Operation: r.a.Operation, Provider: r.a.Provider, Model: r.a.Model, FallbackFrom: r.a.FallbackFrom}
		times[i] = r.a.StartedAt
	}
	if err := st.EnsurePartitions(ctx, times...); err != nil {
		return err
	}
	series, err := st.SeriesIDs(ctx, keys)
	if err != nil {
		return err
	}
	prices, err := st.PriceIDs(ctx, versions)
	if err != nil {
		return err
	}
	rows := make([][]any, len(recs))
	for i := range recs {
		if rows[i], err = values(&recs[i], series[i], prices); err != nil {
			return err
		}
	}
	if _, err := st.Pool.CopyFrom(ctx, pgx.Identifier{"attempts"}, columns, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("copy attempts: %w", err)
	}
	return nil
}

// habits adds the two habits Load documents to synth's calls.
func habits(a *schema.Attempt) {
	if a.Service == "digest-mailer" && a.PromptHash != "" {
		a.PromptHash += "@" + a.StartedAt.UTC().Format("150405.000")
	}
}

// values is one attempts row, in columns order, as the ingest writer stores it.
func values(r *record, series int64, prices map[string]int32) ([]any, error) {
	a := &r.a
	var (
		httpStatus                  *int16
		retryAfter, priceID         *int32
		cost, nocache, client       *int64
		promptHash, providerReq, md *string
	)
	if a.HTTPStatus != 0 {
		v := int16(a.HTTPStatus)
		httpStatus = &v
	}
	if a.RetryAfterMS != 0 {
		v := int32(a.RetryAfterMS)
		retryAfter = &v
	}
	if r.cost.Priced {
		c, nc, id := int64(r.cost.Cost), int64(r.cost.NoCache), prices[r.cost.Version.Key]
		cost, nocache, priceID = &c, &nc, &id
	}
	if a.CostUSD != nil {
		v := int64(*a.CostUSD)
		client = &v
	}
	if a.PromptHash != "" {
		promptHash = &a.PromptHash
	}
	if a.ProviderRequestID != "" {
		providerReq = &a.ProviderRequestID
	}
	if len(a.Metadata) > 0 {
		b, err := json.Marshal(a.Metadata)
		if err != nil {
			return nil, fmt.Errorf("encode metadata: %w", err)
		}
		s := string(b)
		md = &s
	}
	class := a.ErrorClass
	if class == "" {
		class = schema.ErrorNone
	}
	var org *string
	if a.Org != "" {
		org = &a.Org
	}
	row := []any{r.project, a.StartedAt, series, int32(a.AttemptNo), int32(a.LatencyMS), string(a.Status),
		string(class), a.Fallback, a.Batch, httpStatus, retryAfter, priceID, a.InputTokens,
		a.OutputTokens, a.CacheWriteTokens, a.CacheWrite1hTokens, a.CacheReadTokens, a.ReasoningTokens,
		cost, nocache, client, a.AttemptID, a.RequestID, promptHash, providerReq, md, org}
	return append(row, limitValues(a.RateLimits)...), nil
}

// limitValues are a record's rate limit columns: limit, remaining and reset of each limit.
func limitValues(r *schema.RateLimits) []any {
	out := make([]any, 0, 12)
	if r == nil {
		return append(out, make([]any, 12)...)
	}
	for _, l := range []schema.RateLimit{r.Requests, r.Tokens, r.InputTokens, r.OutputTokens} {
		var limit, remaining, reset any
		if l.Reported() {
			limit, remaining = l.Limit, l.Remaining
		}
		if !l.Reset.IsZero() {
			reset = l.Reset
		}
		out = append(out, limit, remaining, reset)
	}
	return out
}
