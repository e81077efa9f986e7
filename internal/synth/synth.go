// Package synth generates believable synthetic ledgers: the attempt records a fleet of services
// calling LLM APIs would send to ledgerd. Traffic follows a daily and weekly cycle; calls are
// retried on 429/529/5xx/timeouts under one request_id, fall back to another model when the primary
// one keeps failing, see short error bursts, and use prompt caching well or badly. Incidents (a
// broken cache, a retry storm, an outage served by a fallback model) can be placed in time.
//
// The same seed and options give the same records, so the load generator, the reliability drills
// and benchmarks share one source of realistic data.
package synth

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"time"

	"github.com/ledgerd/ledgerd/schema"
)

// CacheMode is how a service uses prompt caching.
type CacheMode int

// The cache behaviours a service can have.
const (
	// CacheNone sends no cacheable prefix.
	CacheNone CacheMode = iota
	// CacheHealthy writes its prefix now and then and reads it on most calls (Anthropic style).
	CacheHealthy
	// CacheBroken writes its prefix on every call and never reads it: the cache costs 1.25x input
	// and saves nothing, and nothing errors.
	CacheBroken
	// CacheAuto reads a cached prefix on some calls without ever paying for a write (OpenAI style).
	CacheAuto
)

// Model names a provider's model.
type Model struct {
	Provider string
	Name     string
}

// Service is one caller of LLM APIs with its own traffic share, sizes and habits.
type Service struct {
	Name       string
	Operations []string
	// Weight is the service's share of calls relative to the other services.
	Weight float64
	// Tenants are the customers the service calls for; empty means internal calls (no tenant).
	Tenants  bool
	Primary  Model
	Fallback *Model // model used when the primary keeps failing; nil means the call fails
	// InputTokens and OutputTokens are median sizes; each call varies around them.
	InputTokens  int64
	OutputTokens int64
	// ReasoningShare is the part of the output that is reasoning (0 to 1).
	ReasoningShare float64
	Cache          CacheMode
	// PrefixTokens is the size of the cacheable prefix (system prompt, tools).
	PrefixTokens int64
	// Cache1h marks a service whose cache writes use the 1-hour lifetime.
	Cache1h    bool
	PromptHash string
	// ErrorRate is the share of attempts that fail outside bursts and incidents.
	ErrorRate float64
	// MaxAttempts bounds the attempts on the primary model, the first included.
	MaxAttempts int
	// Batch marks a service that uses the provider's batch API.
	Batch bool
	// Orgs names, per provider, the organization the service's API key for it bills to (none when
	// absent): services sharing an org share its rate limits.
	Orgs map[string]string
}

// The models the default services use. Unknown is a model no price catalog knows, so its attempts
// show as unpriced.
var (
	Haiku55  = Model{"anthropic", "claude-haiku-5-5"}
	Sonnet55 = Model{"anthropic", "claude-sonnet-5-5"}
	Sonnet4  = Model{"anthropic", "claude-sonnet-4-20250514"}
	GPT4o    = Model{"openai", "gpt-4o"}
	Unknown  = Model{"acme", "acme-llm-2-preview"}
)

// DefaultServices is the mix of services the generator uses when Options.Services is empty.
func DefaultServices() []Service {
	return []Service{
		{Name: "support-bot", Operations: []string{"answer", "classify-ticket", "summarize-thread"}, Weight: 30,
			Tenants: true, Primary: Sonnet55, Fallback: &GPT4o, InputTokens: 1800, OutputTokens: 350,
			Cache: CacheHealthy, PrefixTokens: 6000, PromptHash: "support-system-v3", ErrorRate: 0.02, MaxAttempts: 3},
		{Name: "search-summarizer", Operations: []string{"summarize"}, Weight: 35, Tenants: true,
			Primary: Haiku55, Fallback: &Sonnet55, InputTokens: 3000, OutputTokens: 180,
			Cache: CacheHealthy, PrefixTokens: 2500, Cache1h: true, PromptHash: "search-summary-v7",
			ErrorRate: 0.015, MaxAttempts: 3},
		{Name: "code-review", Operations: []string{"review-diff", "explain"}, Weight: 8,
			Primary: Sonnet4, Fallback: &Sonnet55, InputTokens: 9000, OutputTokens: 900, ReasoningShare: 0.4,
			ErrorRate: 0.03, MaxAttempts: 4},
		{Name: "extractor", Operations: []string{"extract-invoice", "extract-contract"}, Weight: 15, Tenants: true,
			Primary: GPT4o, Fallback: &Haiku55, InputTokens: 2200, OutputTokens: 260,
			Cache: CacheAuto, PrefixTokens: 1500, ErrorRate: 0.02, MaxAttempts: 3},
		{Name: "digest-mailer", Operations: []string{"weekly-digest"}, Weight: 4, Primary: Haiku55,
			InputTokens: 1200, OutputTokens: 400, Cache: CacheBroken, PrefixTokens: 3000,
			PromptHash: "digest-v2", ErrorRate: 0.01, MaxAttempts: 3},
		{Name: "nightly-eval", Operations: []string{"grade"}, Weight: 3, Primary: Haiku55,
			InputTokens: 1500, OutputTokens: 60, ErrorRate: 0.005, MaxAttempts: 2, Batch: true},
		{Name: "labs-agent", Operations: []string{"plan", "act"}, Weight: 5, Primary: Unknown,
			InputTokens: 4000, OutputTokens: 500, ErrorRate: 0.05, MaxAttempts: 3},
	}
}

// tenants and their relative shares of tenant traffic (a few big customers, a long tail).
var tenants = []struct {
	name   string
	weight float64
}{
	{"acme", 30}, {"globex", 20}, {"initech", 12}, {"umbrella", 10}, {"hooli", 8},
	{"stark", 7}, {"wayne", 6}, {"wonka", 4}, {"tyrell", 2}, {"cyberdyne", 1},
}

// IncidentKind is a kind of trouble an Incident injects.
type IncidentKind int

// The incidents the generator can inject.
const (
	// BrokenCache makes Service write its cache prefix on every call and never read it (a deploy
	// moved something variable to the top of the prompt).
	BrokenCache IncidentKind = iota + 1
	// RetryStorm makes Model answer most attempts with 429 or 529, so clients retry hard.
	RetryStorm
	// Outage makes every attempt on Model fail with 5xx or connection errors; services with a
	// fallback model serve their calls from it.
	Outage
	// Rush makes the services whose primary model bills to Org send Traffic times their usual
	// calls (a Monday-morning rush); with rate limits simulated (Options.Limits) it brings 429s.
	Rush
)

// String names the incident kind.
func (k IncidentKind) String() string {
	switch k {
	case BrokenCache:
		return "broken-cache"
	case RetryStorm:
		return "retry-storm"
	case Outage:
		return "outage"
	case Rush:
		return "rush"
	}
	return fmt.Sprintf("incident(%d)", int(k))
}

// Incident is trouble injected between From and To: on Service for BrokenCache, on Model (by
// name) for RetryStorm and Outage, on Org for Rush.
type Incident struct {
	Kind     IncidentKind
	Service  string
	Model    string
	Org      string
	From, To time.Time
	// Traffic multiplies the rate of calls NextTime draws during the incident (a surge that set it
	// off); 0 or 1 leaves it unchanged.
	Traffic float64
}

func (in Incident) active(t time.Time) bool { return !t.Before(in.From) && t.Before(in.To) }

// Options configures a Generator. The zero value generates live traffic from DefaultServices with
// seed 0.
type Options struct {
	Seed int64
	// Start and End bound the start times NextTime draws (a backdated history); both zero means
	// live traffic, timed by the caller of Call.
	Start, End time.Time
	// Location is where the daily cycle's hours are counted (UTC).
	Location *time.Location
	// Services is the mix of callers (DefaultServices when empty).
	Services  []Service
	Incidents []Incident
	// BurstChance is the chance that a model has a short error burst in a given hour (0.03);
	// negative turns bursts off.
	BurstChance float64
	// Limits are the rate limits the providers report, per org and model; none when empty. They
	// need Rate.
	Limits []Limit
	// Rate is the calls per minute NextTime draws at the top of the daily cycle, without surges
	// (see CallsPerMinute): what the simulated rate limits compare the traffic with.
	Rate float64
}

// Limit is a simulated rate limit of an org on a model, as a multiple (Headroom) of the traffic
// the org's services send that model at the top of the daily cycle: 1.5 leaves a third of the
// limit unused at the busiest hour, and a rush of more than 1.5 times the traffic brings 429s.
// Attempts report it as their provider does: Anthropic's requests, tokens, input and output tokens
// limits, other providers' requests and tokens.
type Limit struct {
	Org, Model string
	Headroom   float64
}

// Generator produces synthetic calls. It is not safe for concurrent use.
type Generator struct {
	opt      Options
	rng      *rand.Rand
	services []Service
	svcCum   []float64
	tenCum   []float64
	prefix   string
	calls    uint64
	peak     float64 // the largest traffic multiplier, which NextTime's sampling divides by
	// rushShare is, per org, the share of calls that go to the services billing to it.
	rushShare map[string]float64
	// limits are Options.Limits by org and model, worked out as figures per minute.
	limits map[orgModel]*limit
}

type orgModel struct{ org, model string }

// limit is a simulated rate limit: per minute, the limits and the traffic the org's services
// send the model at the top of the daily cycle without surges.
type limit struct {
	provider                        string
	requests, tokens, input, output int64   // the limits
	calls, in, out                  float64 // the traffic: calls, input and output tokens
}

// New returns a generator for opt.
func New(opt Options) *Generator {
	if opt.Location == nil {
		opt.Location = time.UTC
	}
	if opt.BurstChance == 0 {
		opt.BurstChance = 0.03
	}
	services := opt.Services
	if len(services) == 0 {
		services = DefaultServices()
	}
	g := &Generator{opt: opt, services: services,
		rng: rand.New(rand.NewPCG(uint64(opt.Seed), 0x6c656467657264))}
	g.svcCum = cumulative(len(services), func(i int) float64 { return services[i].Weight })
	g.tenCum = cumulative(len(tenants), func(i int) float64 { return tenants[i].weight })
	g.prefix = fmt.Sprintf("%08x", uint32(g.rng.Uint64()))
	g.peak = 1
	for _, in := range opt.Incidents {
		if in.Traffic > 1 {
			g.peak *= in.Traffic
		}
	}
	g.rushShare = map[string]float64{}
	for _, in := range opt.Incidents {
		if in.Kind == Rush {
			g.rushShare[in.Org] = g.share(func(s *Service) bool { return s.Orgs[s.Primary.Provider] == in.Org })
		}
	}
	g.limits = map[orgModel]*limit{}
	for _, l := range opt.Limits {
		g.limits[orgModel{l.Org, l.Model}] = g.newLimit(l)
	}
	return g
}

// share is the part of all calls that goes to the services for which in holds.
func (g *Generator) share(in func(s *Service) bool) float64 {
	var part float64
	for i := range g.services {
		if in(&g.services[i]) {
			part += g.services[i].Weight
		}
	}
	return part / g.svcCum[len(g.svcCum)-1]
}

// newLimit works out l's figures: the traffic the org's services send its model as their primary
// one at Rate, attempts as calls, and the limits Headroom times that.
func (g *Generator) newLimit(l Limit) *limit {
	out := &limit{}
	total := g.svcCum[len(g.svcCum)-1]
	for i := range g.services {
		s := &g.services[i]
		if s.Primary.Name != l.Model || s.Orgs[s.Primary.Provider] != l.Org {
			continue
		}
		out.provider = s.Primary.Provider
		calls := g.opt.Rate * s.Weight / total
		out.calls += calls
		out.in += calls * float64(s.InputTokens+s.PrefixTokens)
		out.out += calls * float64(s.OutputTokens)
	}
	limitOf := func(x float64) int64 { return max(1, int64(math.Ceil(l.Headroom*x))) }
	out.requests, out.input, out.output = limitOf(out.calls), limitOf(out.in), limitOf(out.out)
	out.tokens = out.input + out.output
	return out
}

func cumulative(n int, w func(int) float64) []float64 {
	out := make([]float64, n)
	sum := 0.0
	for i := range n {
		sum += w(i)
		out[i] = sum
	}
	return out
}

func (g *Generator) pick(cum []float64) int {
	x := g.rng.Float64() * cum[len(cum)-1]
	for i, c := range cum {
		if x < c {
			return i
		}
	}
	return len(cum) - 1
}

// hourWeights is the relative traffic of each local hour on a working day: quiet nights, a
// morning ramp, a dip at lunch, a second peak in the afternoon.
var hourWeights = [24]float64{
	0.12, 0.09, 0.08, 0.08, 0.09, 0.13, 0.22, 0.40, 0.70, 0.92, 1.00, 0.96,
	0.80, 0.88, 0.97, 0.95, 0.85, 0.70, 0.52, 0.40, 0.32, 0.25, 0.19, 0.15,
}

// weekendFactor scales traffic on Saturdays and Sundays.
const weekendFactor = 0.35

// Cycle is the relative traffic at t (at most 1) in loc: the hour of day, interpolated, times a
// weekend factor.
func Cycle(t time.Time, loc *time.Location) float64 {
	l := t.In(loc)
	h := l.Hour()
	frac := (float64(l.Minute())*60 + float64(l.Second())) / 3600
	w := hourWeights[h]*(1-frac) + hourWeights[(h+1)%24]*frac
	if d := l.Weekday(); d == time.Saturday || d == time.Sunday {
		w *= weekendFactor
	}
	return w
}

// NextTime draws the start of the next call in [Start, End) following Cycle, and the traffic
// surges of incidents. It needs a window.
func (g *Generator) NextTime() time.Time {
	span := g.opt.End.Sub(g.opt.Start)
	for {
		t := g.opt.Start.Add(time.Duration(g.rng.Int64N(int64(span))))
		if g.rng.Float64()*g.peak < Cycle(t, g.opt.Location)*g.surge(t) {
			return t
		}
	}
}

// surge is the traffic multiplier of the incidents active at t. A rush multiplies only its org's
// share of the calls.
func (g *Generator) surge(t time.Time) float64 {
	m := 1.0
	for _, in := range g.opt.Incidents {
		switch {
		case in.Traffic <= 1 || !in.active(t):
		case in.Kind == Rush:
			m *= 1 + (in.Traffic-1)*g.rushShare[in.Org]
		default:
			m *= in.Traffic
		}
	}
	return m
}

// rushOf returns the rush active at t, if any.
func (g *Generator) rushOf(t time.Time) *Incident {
	for i := range g.opt.Incidents {
		if in := &g.opt.Incidents[i]; in.Kind == Rush && in.Traffic > 1 && in.active(t) {
			return in
		}
	}
	return nil
}

// pickService draws the service of a call at t: by weight, except in a rush, where the rushing
// org's services get Traffic times their share.
func (g *Generator) pickService(t time.Time) *Service {
	in := g.rushOf(t)
	if in == nil {
		return &g.services[g.pick(g.svcCum)]
	}
	w := g.rushShare[in.Org]
	rushing := g.rng.Float64() < in.Traffic*w/(1+(in.Traffic-1)*w)
	var cum []float64
	sum := 0.0
	for i := range g.services {
		s := &g.services[i]
		if (s.Orgs[s.Primary.Provider] == in.Org) == rushing {
			sum += s.Weight
		}
		cum = append(cum, sum)
	}
	return &g.services[g.pick(cum)]
}

// orgSurge is the traffic multiplier at t of the calls that bill to org.
func (g *Generator) orgSurge(org string, t time.Time) float64 {
	m := 1.0
	for _, in := range g.opt.Incidents {
		if in.Traffic > 1 && in.active(t) && (in.Kind != Rush || in.Org == org) {
			m *= in.Traffic
		}
	}
	return m
}

// Next returns the attempts of one call started at NextTime.
func (g *Generator) Next() []schema.Attempt { return g.Call(g.NextTime()) }

// conditions are what holds for one call at its start time.
type conditions struct {
	brokenCache bool
	storm       bool // the primary model is in a retry storm
	outage      bool // the primary model is down
}

func (g *Generator) conditions(s *Service, at time.Time) conditions {
	var c conditions
	for _, in := range g.opt.Incidents {
		if !in.active(at) {
			continue
		}
		switch in.Kind {
		case BrokenCache:
			c.brokenCache = c.brokenCache || in.Service == s.Name
		case RetryStorm:
			c.storm = c.storm || in.Model == s.Primary.Name
		case Outage:
			c.outage = c.outage || in.Model == s.Primary.Name
		}
	}
	return c
}

// Call returns the attempts of one logical call that starts at at: the primary model's attempts,
// retried while they fail, then the fallback model's when the primary gave up. Every attempt
// shares the call's request_id and is numbered from 1.
func (g *Generator) Call(at time.Time) []schema.Attempt {
	s := g.pickService(at)
	g.calls++
	c := g.conditions(s, at)
	call := schema.Attempt{
		RequestID: fmt.Sprintf("req_%s%010x", g.prefix, g.calls),
		Service:   s.Name,
		Operation: s.Operations[g.rng.IntN(len(s.Operations))],
		Batch:     s.Batch,
	}
	if s.Tenants {
		call.Tenant = tenants[g.pick(g.tenCum)].name
	}
	in, out := g.size(s.InputTokens), g.size(s.OutputTokens)
	var atts []schema.Attempt
	t := at
	tries := max(s.MaxAttempts, 1)
	switch {
	case c.storm:
		tries = max(tries, 6)
	case c.outage && s.Fallback != nil:
		tries = 2
	}
	for i := 0; i < tries; i++ {
		a := g.attempt(call, s, s.Primary, c, t, in, out, len(atts)+1)
		atts = append(atts, a)
		if a.Status == schema.StatusOK || a.Status == schema.StatusCancelled {
			return atts
		}
		t = t.Add(time.Duration(a.LatencyMS)*time.Millisecond + g.backoff(a, i))
	}
	if s.Fallback == nil {
		return atts
	}
	fc := conditions{}
	for i := 0; i < 2; i++ {
		call.Fallback, call.FallbackFrom = true, s.Primary.Name
		a := g.attempt(call, s, *s.Fallback, fc, t, in, out, len(atts)+1)
		atts = append(atts, a)
		if a.Status != schema.StatusError {
			break
		}
		t = t.Add(time.Duration(a.LatencyMS)*time.Millisecond + g.backoff(a, i))
	}
	return atts
}

// size varies a median token count (log-normal, spread about 0.5).
func (g *Generator) size(median int64) int64 {
	return max(1, int64(float64(median)*math.Exp(0.5*g.rng.NormFloat64())))
}

// backoff is the wait before the next attempt: the provider's Retry-After, else exponential with
// jitter.
func (g *Generator) backoff(a schema.Attempt, try int) time.Duration {
	if a.RetryAfterMS > 0 {
		return time.Duration(a.RetryAfterMS) * time.Millisecond
	}
	base := 500 * time.Millisecond << try
	return base/2 + time.Duration(g.rng.Int64N(int64(base)))
}

// latency describes how long a model takes: to the first token, and per output token.
var latency = map[string]struct{ first, perToken float64 }{
	Haiku55.Name:  {300, 4},
	Sonnet55.Name: {900, 12},
	Sonnet4.Name:  {1100, 15},
	GPT4o.Name:    {600, 9},
}

func (g *Generator) attempt(call schema.Attempt, s *Service, m Model, c conditions, at time.Time, in, out int64, no int) schema.Attempt {
	a := call
	a.AttemptNo, a.StartedAt, a.Provider, a.Model = no, at, m.Provider, m.Name
	a.AttemptID = fmt.Sprintf("%s-%d", call.RequestID, no)
	a.ProviderRequestID = fmt.Sprintf("prq_%012x", g.rng.Uint64()>>16)
	a.Org = s.Orgs[m.Provider]
	if l := g.limits[orgModel{a.Org, m.Name}]; l != nil && g.opt.Rate > 0 {
		if g.rateLimit(&a, l, at) {
			return a
		}
	}
	lat, ok := latency[m.Name]
	if !ok {
		lat = latency[Haiku55.Name]
	}
	jitter := math.Exp(0.35 * g.rng.NormFloat64())
	full := int64((lat.first + lat.perToken*float64(out)) * jitter)

	errRate := s.ErrorRate
	if g.burst(m.Name, at) {
		errRate = max(errRate, 0.35)
	}
	if c.storm && !a.Fallback {
		errRate = 0.7
	}
	if c.outage && !a.Fallback {
		errRate = 1
	}
	if g.rng.Float64() < errRate {
		g.failure(&a, m, c, full, in, out)
		return a
	}
	if g.rng.Float64() < 0.003 {
		// The user went away mid-answer: the input and part of the output are billed.
		a.Status = schema.StatusCancelled
		a.LatencyMS = full / 2
		g.usage(&a, s, c, in, out/3)
		return a
	}
	a.Status, a.HTTPStatus, a.LatencyMS = schema.StatusOK, 200, full
	g.usage(&a, s, c, in, out)
	return a
}

// rateLimit reports l on a, as the provider's headers would: the traffic of its minute (the daily
// cycle and surges at at) takes from 70 to 100% of what it uses out of each limit. Traffic above
// the requests limit is refused: the attempt then fails with a 429 (and true is returned) with the
// share of the excess, none of the limit remaining.
func (g *Generator) rateLimit(a *schema.Attempt, l *limit, at time.Time) bool {
	load := Cycle(at, g.opt.Location) * g.orgSurge(a.Org, at)
	used := load * (0.7 + 0.3*g.rng.Float64())
	reset := at.Truncate(time.Minute).Add(time.Minute)
	report := func(limit int64, traffic float64) schema.RateLimit {
		left := float64(limit) - used*traffic
		return schema.RateLimit{Limit: limit, Remaining: int64(max(0, left)), Reset: reset}
	}
	r := &schema.RateLimits{Requests: report(l.requests, l.calls), Tokens: report(l.tokens, l.in+l.out)}
	if l.provider == "anthropic" {
		r.InputTokens, r.OutputTokens = report(l.input, l.in), report(l.output, l.out)
	}
	a.RateLimits = r
	over := load * l.calls / float64(l.requests)
	if over <= 1 || g.rng.Float64() >= 1-1/over {
		return false
	}
	r.Requests.Remaining = 0
	a.Status, a.ErrorClass, a.HTTPStatus = schema.StatusError, schema.ErrorRateLimited, 429
	a.RetryAfterMS = max(1000, reset.Sub(at).Milliseconds())
	a.LatencyMS = 30 + g.rng.Int64N(120)
	return true
}

// CallsPerMinute is the Rate at which n attempts drawn with opt's window, cycle and surges come:
// the calls per minute at the top of the daily cycle, counting each call as about 1.1 attempts.
func CallsPerMinute(opt Options, n int) float64 {
	g := New(opt)
	var weight float64 // minutes at full traffic
	for t := opt.Start; t.Before(opt.End); t = t.Add(time.Minute) {
		weight += Cycle(t, g.opt.Location) * g.surge(t)
	}
	if weight == 0 {
		return 0
	}
	return float64(n) / 1.1 / weight
}

// failure fills a failed attempt: the class and HTTP status the provider gives, and the tokens
// billed when the failure came after generation started.
func (g *Generator) failure(a *schema.Attempt, m Model, c conditions, full, in, out int64) {
	a.Status = schema.StatusError
	defer func() {
		if a.HTTPStatus == 0 { // no answer: no headers reported a limit
			a.RateLimits = nil
		}
	}()
	x := g.rng.Float64()
	switch {
	case c.outage && !a.Fallback:
		switch {
		case x < 0.6:
			a.ErrorClass, a.HTTPStatus = schema.ErrorServer, []int{500, 502, 503}[g.rng.IntN(3)]
			a.LatencyMS = 50 + g.rng.Int64N(400)
		case x < 0.85:
			a.ErrorClass, a.LatencyMS = schema.ErrorConnection, 5+g.rng.Int64N(100)
		default:
			a.ErrorClass, a.LatencyMS = schema.ErrorTimeout, 30_000
		}
	case x < 0.50 || (c.storm && x < 0.75):
		a.ErrorClass, a.HTTPStatus = schema.ErrorRateLimited, 429
		a.RetryAfterMS = 1000 * (1 + g.rng.Int64N(5))
		a.LatencyMS = 40 + g.rng.Int64N(200)
	case x < 0.72 || c.storm:
		if m.Provider == "anthropic" {
			a.ErrorClass, a.HTTPStatus = schema.ErrorOverloaded, 529
		} else {
			a.ErrorClass, a.HTTPStatus = schema.ErrorServer, 503
		}
		a.LatencyMS = 100 + g.rng.Int64N(600)
	case x < 0.88:
		a.ErrorClass, a.HTTPStatus = schema.ErrorServer, []int{500, 502}[g.rng.IntN(2)]
		a.LatencyMS = full / 3
		if g.rng.IntN(3) == 0 {
			// The stream broke after it began: what was generated is billed and wasted.
			a.InputTokens, a.OutputTokens = in, out/4
		}
	case x < 0.97:
		// The client gave up waiting; the provider billed the input and what it generated.
		a.ErrorClass, a.LatencyMS = schema.ErrorTimeout, 60_000
		a.InputTokens, a.OutputTokens = in, out/2
	default:
		a.ErrorClass, a.LatencyMS = schema.ErrorConnection, 5+g.rng.Int64N(50)
	}
}

// usage fills the token counts of an answered attempt, including its cache use.
func (g *Generator) usage(a *schema.Attempt, s *Service, c conditions, in, out int64) {
	a.InputTokens, a.OutputTokens = in, out
	a.ReasoningTokens = int64(float64(out) * s.ReasoningShare)
	mode := s.Cache
	if c.brokenCache && mode == CacheHealthy {
		mode = CacheBroken
	}
	if mode == CacheNone {
		return
	}
	a.PromptHash = s.PromptHash
	if c.brokenCache && s.PromptHash != "" {
		a.PromptHash = s.PromptHash + "-deploy-1127"
	}
	prefix := s.PrefixTokens
	write := func() {
		a.CacheWriteTokens = prefix
		if s.Cache1h {
			a.CacheWrite1hTokens = prefix
		}
	}
	x := g.rng.Float64()
	switch mode {
	case CacheHealthy:
		switch {
		case x < 0.07:
			write()
		case x < 0.98:
			a.CacheReadTokens = prefix
		default:
			a.InputTokens += prefix // the prefix expired and this call did not re-cache it
		}
	case CacheBroken:
		write()
	case CacheAuto:
		if x < 0.6 {
			a.CacheReadTokens = prefix
		} else {
			a.InputTokens += prefix
		}
	}
}

// burst tells whether model has an error burst at t: each hour, with chance BurstChance, a burst of
// 5 to 20 minutes starts at a random minute. It depends only on the seed, the model and the hour.
func (g *Generator) burst(model string, t time.Time) bool {
	if g.opt.BurstChance < 0 {
		return false
	}
	hour := t.Unix() / 3600
	for _, h := range []int64{hour - 1, hour} {
		f := fnv.New64a()
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:8], uint64(g.opt.Seed))
		binary.LittleEndian.PutUint64(b[8:], uint64(h))
		f.Write(b[:])
		f.Write([]byte(model))
		r := rand.New(rand.NewPCG(f.Sum64(), 1))
		if r.Float64() >= g.opt.BurstChance {
			continue
		}
		start := time.Unix(h*3600, 0).Add(time.Duration(r.IntN(60)) * time.Minute)
		end := start.Add(time.Duration(5+r.IntN(16)) * time.Minute)
		if !t.Before(start) && t.Before(end) {
			return true
		}
	}
	return false
}
