package otlp

import (
	"reflect"
	"testing"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/ledgerd/ledgerd/schema"
)

const spanHex = "00f067aa0ba902b7"

// base is the record every case starts from: what the shared span's ids, times and resource give.
func base() schema.Attempt {
	return schema.Attempt{
		AttemptID: spanHex, RequestID: traceHex, AttemptNo: 1, StartedAt: start, LatencyMS: 1500,
		Service: "chat-api", Operation: "chat", Status: schema.StatusOK,
	}
}

var service = kvs("service.name", "chat-api", "telemetry.sdk.language", "go")

func TestConvert(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		resource []*commonpb.KeyValue
		attrs    []any
		status   *tracepb.Status
		tenants  []string
		// want is the record expected; nil when the span is ignored or refused.
		want func(a *schema.Attempt)
		// rejected names the field of the refusal expected.
		rejected string
	}{
		{
			// OpenAI Chat Completions through OTel: input_tokens includes the cache read, output
			// includes reasoning; the ledger's input is the uncached part.
			name:  "openai inclusive counts",
			attrs: []any{"gen_ai.provider.name", "openai", "gen_ai.operation.name", "chat", "gen_ai.request.model", "gpt-6-luna", "gen_ai.response.model", "gpt-6-luna-2026-09-22", "gen_ai.response.id", "chatcmpl-123", "gen_ai.usage.input_tokens", 1200, "gen_ai.usage.cache_read.input_tokens", 1000, "gen_ai.usage.output_tokens", 300, "gen_ai.usage.reasoning.output_tokens", 100},
			want: func(a *schema.Attempt) {
				a.Provider, a.Model, a.ProviderRequestID = "openai", "gpt-6-luna", "chatcmpl-123"
				a.InputTokens, a.CacheReadTokens, a.OutputTokens, a.ReasoningTokens = 200, 1000, 300, 100
			},
		},
		{
			// Anthropic reported per semantic conventions: input = uncached + cache read + cache
			// write, so both cache counts come off.
			name:  "anthropic inclusive counts",
			attrs: []any{"gen_ai.provider.name", "anthropic", "gen_ai.operation.name", "chat", "gen_ai.request.model", "claude-sonnet-5-5", "gen_ai.usage.input_tokens", 3050, "gen_ai.usage.cache_read.input_tokens", 2000, "gen_ai.usage.cache_creation.input_tokens", 1000, "gen_ai.usage.output_tokens", 300},
			want: func(a *schema.Attempt) {
				a.Provider, a.Model = "anthropic", "claude-sonnet-5-5"
				a.InputTokens, a.CacheReadTokens, a.CacheWriteTokens, a.OutputTokens = 50, 2000, 1000, 300
			},
		},
		{
			// An older instrumentation passing Anthropic's usage through: input (50) is smaller than
			// the cache counts, so it already excludes them; the older cache attribute names count.
			name:  "anthropic exclusive counts, older names",
			attrs: []any{"gen_ai.system", "anthropic", "gen_ai.operation.name", "chat", "gen_ai.request.model", "claude-sonnet-5-5", "gen_ai.usage.input_tokens", 50, "gen_ai.usage.cache_read_input_tokens", 2000, "gen_ai.usage.cache_creation_input_tokens", 1000, "gen_ai.usage.output_tokens", 300},
			want: func(a *schema.Attempt) {
				a.Provider, a.Model = "anthropic", "claude-sonnet-5-5"
				a.InputTokens, a.CacheReadTokens, a.CacheWriteTokens, a.OutputTokens = 50, 2000, 1000, 300
			},
		},
		{
			// Gemini through the older gen_ai.system = "gemini": renamed to gcp.gemini like the Go
			// client names it; cached content comes off the prompt; thoughts reported beside the
			// output (larger than it) are added to it.
			name:  "gemini via gen_ai.system, thoughts beside output",
			attrs: []any{"gen_ai.system", "gemini", "gen_ai.operation.name", "generate_content", "gen_ai.request.model", "gemini-4-argon", "gen_ai.usage.input_tokens", 1000, "gen_ai.usage.cache_read.input_tokens", 600, "gen_ai.usage.output_tokens", 200, "gen_ai.usage.reasoning.output_tokens", 300},
			want: func(a *schema.Attempt) {
				a.Provider, a.Model, a.Operation = "gcp.gemini", "gemini-4-argon", "generate_content"
				a.InputTokens, a.CacheReadTokens, a.OutputTokens, a.ReasoningTokens = 400, 600, 500, 300
			},
		},
		{
			// gen_ai.provider.name wins over gen_ai.system, and its value is kept as sent.
			name:  "provider.name preferred to system",
			attrs: []any{"gen_ai.provider.name", "gcp.vertex_ai", "gen_ai.system", "vertex_ai", "gen_ai.request.model", "gemini-4-argon", "gen_ai.usage.input_tokens", 10, "gen_ai.usage.output_tokens", 5},
			want: func(a *schema.Attempt) {
				a.Provider, a.Model, a.Operation = "gcp.vertex_ai", "gemini-4-argon", "default"
				a.InputTokens, a.OutputTokens = 10, 5
			},
		},
		{
			// Pre-1.27 usage names (prompt_tokens, completion_tokens) still count; the response model
			// names the attempt when the request model is absent; counts may come as doubles or
			// strings.
			name:  "deprecated usage names, response model, loose number types",
			attrs: []any{"gen_ai.system", "openai", "gen_ai.response.model", "gpt-4o-2024-08-06", "gen_ai.usage.prompt_tokens", 120.0, "gen_ai.usage.completion_tokens", "30"},
			want: func(a *schema.Attempt) {
				a.Provider, a.Model, a.Operation = "openai", "gpt-4o-2024-08-06", "default"
				a.InputTokens, a.OutputTokens = 120, 30
			},
		},
		{
			// A 429 without usage is still an attempt: the error spans are what retry amplification
			// and error classes are made of.
			name:   "rate limited error span without usage",
			attrs:  []any{"gen_ai.provider.name", "anthropic", "gen_ai.operation.name", "chat", "gen_ai.request.model", "claude-sonnet-5-5", "error.type", "rate_limit_error", "http.response.status_code", 429},
			status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "rate limited"},
			want: func(a *schema.Attempt) {
				a.Provider, a.Model, a.Status, a.ErrorClass, a.HTTPStatus = "anthropic", "claude-sonnet-5-5", schema.StatusError, schema.ErrorRateLimited, 429
			},
		},
		{
			// Span status ERROR alone (no error.type) is an error of class unknown.
			name:   "status error without error.type",
			attrs:  []any{"gen_ai.provider.name", "openai", "gen_ai.request.model", "gpt-6-luna"},
			status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR},
			want: func(a *schema.Attempt) {
				a.Provider, a.Model, a.Operation, a.Status, a.ErrorClass = "openai", "gpt-6-luna", "default", schema.StatusError, schema.ErrorUnknown
			},
		},
		{
			// A cancelled call is status cancelled, with the class the contract gives it.
			name:  "cancelled",
			attrs: []any{"gen_ai.provider.name", "openai", "gen_ai.request.model", "gpt-6-luna", "error.type", "asyncio.CancelledError", "gen_ai.usage.input_tokens", 10},
			want: func(a *schema.Attempt) {
				a.Provider, a.Model, a.Operation, a.Status, a.ErrorClass = "openai", "gpt-6-luna", "default", schema.StatusCancelled, schema.ErrorCancelled
				a.InputTokens = 10
			},
		},
		{
			// The ledgerd.* attributes carry what OTel has no name for; tenant from the span.
			name: "ledgerd attributes",
			attrs: []any{"gen_ai.provider.name", "anthropic", "gen_ai.request.model", "claude-haiku-5-5", "gen_ai.usage.input_tokens", 10, "gen_ai.usage.output_tokens", 2,
				"ledgerd.attempt_no", 3, "ledgerd.fallback_from", "claude-sonnet-5-5", "ledgerd.prompt_hash", "sys-v2", "ledgerd.tenant", "acme", "http.request.resend_count", 7},
			want: func(a *schema.Attempt) {
				a.Provider, a.Model, a.Operation = "anthropic", "claude-haiku-5-5", "default"
				a.AttemptNo, a.Fallback, a.FallbackFrom, a.PromptHash, a.Tenant = 3, true, "claude-sonnet-5-5", "sys-v2", "acme"
				a.InputTokens, a.OutputTokens = 10, 2
			},
		},
		{
			// Without ledgerd.attempt_no, the HTTP resend count numbers the attempt; tenant.id on
			// the resource names the tenant.
			name:     "resend count and resource tenant",
			resource: kvs("service.name", "chat-api", "tenant.id", "globex"),
			attrs:    []any{"gen_ai.provider.name", "openai", "gen_ai.request.model", "gpt-6-luna", "gen_ai.usage.input_tokens", 10, "http.request.resend_count", 2, "ledgerd.fallback", true},
			want: func(a *schema.Attempt) {
				a.Provider, a.Model, a.Operation, a.AttemptNo, a.Tenant, a.Fallback = "openai", "gpt-6-luna", "default", 3, "globex", true
				a.InputTokens = 10
			},
		},
		{
			// A configured tenant attribute replaces the defaults.
			name:    "configured tenant attribute",
			attrs:   []any{"gen_ai.provider.name", "openai", "gen_ai.request.model", "gpt-6-luna", "gen_ai.usage.input_tokens", 10, "app.customer", "initech", "ledgerd.tenant", "ignored"},
			tenants: []string{"app.customer"},
			want: func(a *schema.Attempt) {
				a.Provider, a.Model, a.Operation, a.Tenant = "openai", "gpt-6-luna", "default", "initech"
				a.InputTokens = 10
			},
		},
		{
			// Spans that are not GenAI at all are ignored, not refused.
			name:  "plain HTTP span ignored",
			attrs: []any{"http.request.method", "POST", "http.response.status_code", 200},
		},
		{
			// An agent span sums its model calls' usage; recording it would count them twice.
			name:  "invoke_agent ignored",
			attrs: []any{"gen_ai.provider.name", "openai", "gen_ai.operation.name", "invoke_agent", "gen_ai.request.model", "gpt-6-luna", "gen_ai.usage.input_tokens", 5000},
		},
		{
			// A successful model span that reports no usage cannot be priced: ignored.
			name:  "successful span without usage ignored",
			attrs: []any{"gen_ai.provider.name", "openai", "gen_ai.request.model", "gpt-6-luna"},
		},
		{
			// Usage without a model cannot be priced or grouped: refused.
			name:     "missing model refused",
			attrs:    []any{"gen_ai.provider.name", "openai", "gen_ai.usage.input_tokens", 10},
			rejected: "gen_ai.request.model / gen_ai.response.model",
		},
		{
			// Usage without a provider: refused.
			name:     "missing provider refused",
			attrs:    []any{"gen_ai.request.model", "gpt-6-luna", "gen_ai.usage.input_tokens", 10},
			rejected: "gen_ai.provider.name / gen_ai.system",
		},
		{
			// The resource must name its service.
			name:     "missing service.name refused",
			resource: kvs("telemetry.sdk.language", "go"),
			attrs:    []any{"gen_ai.provider.name", "openai", "gen_ai.request.model", "gpt-6-luna", "gen_ai.usage.input_tokens", 10},
			rejected: "resource service.name",
		},
		{
			// A count that is not a whole number is refused with its attribute named.
			name:     "fractional count refused",
			attrs:    []any{"gen_ai.provider.name", "openai", "gen_ai.request.model", "gpt-6-luna", "gen_ai.usage.input_tokens", 10.5},
			rejected: "gen_ai.usage.input_tokens",
		},
		{
			// The org from ledgerd.org, and the rate limits from captured response headers
			// (string arrays, per the HTTP conventions): Anthropic's resets as times.
			name: "org and anthropic rate limit headers",
			attrs: []any{"gen_ai.provider.name", "anthropic", "gen_ai.operation.name", "chat", "gen_ai.request.model", "claude-sonnet-5-5", "gen_ai.usage.input_tokens", 10,
				"ledgerd.org", "acme-prod",
				"http.response.header.anthropic-ratelimit-requests-limit", []string{"50"},
				"http.response.header.anthropic-ratelimit-requests-remaining", []string{"0"},
				"http.response.header.anthropic-ratelimit-requests-reset", []string{"2026-11-29T10:01:00Z"},
				"http.response.header.anthropic-ratelimit-output-tokens-limit", []string{"8000"},
				"http.response.header.anthropic-ratelimit-output-tokens-remaining", []string{"6000"}},
			want: func(a *schema.Attempt) {
				a.Provider, a.Model, a.InputTokens, a.Org = "anthropic", "claude-sonnet-5-5", 10, "acme-prod"
				a.RateLimits = &schema.RateLimits{
					Requests:     schema.RateLimit{Limit: 50, Remaining: 0, Reset: time.Date(2026, 11, 29, 10, 1, 0, 0, time.UTC)},
					OutputTokens: schema.RateLimit{Limit: 8000, Remaining: 6000},
				}
			},
		},
		{
			// OpenAI's headers as plain strings, the reset duration counted from the span's end;
			// the org from the resource, before the header's.
			name:     "openai rate limit headers, org on the resource",
			resource: kvs("service.name", "chat-api", "ledgerd.org", "acme-openai"),
			attrs: []any{"gen_ai.provider.name", "openai", "gen_ai.operation.name", "chat", "gen_ai.request.model", "gpt-6-luna", "gen_ai.usage.input_tokens", 10,
				"http.response.header.x-ratelimit-limit-tokens", "30000",
				"http.response.header.x-ratelimit-remaining-tokens", "0",
				"http.response.header.x-ratelimit-reset-tokens", "6m0s",
				"http.response.header.openai-organization", []string{"org-from-header"}},
			want: func(a *schema.Attempt) {
				a.Provider, a.Model, a.InputTokens, a.Org = "openai", "gpt-6-luna", 10, "acme-openai"
				a.RateLimits = &schema.RateLimits{Tokens: schema.RateLimit{Limit: 30000, Remaining: 0,
					Reset: start.Add(spanLasts + 6*time.Minute)}}
			},
		},
		{
			// Without ledgerd.org, the organization the captured header names; headers that do
			// not parse are dropped, as the client drops them.
			name: "org from the header, bad limits dropped",
			attrs: []any{"gen_ai.provider.name", "openai", "gen_ai.operation.name", "chat", "gen_ai.request.model", "gpt-6-luna", "gen_ai.usage.input_tokens", 10,
				"http.response.header.openai-organization", []string{"org-from-header"},
				"http.response.header.x-ratelimit-limit-requests", []string{"-1"},
				"http.response.header.x-ratelimit-remaining-requests", []string{"-1"}},
			want: func(a *schema.Attempt) {
				a.Provider, a.Model, a.InputTokens, a.Org = "openai", "gpt-6-luna", 10, "org-from-header"
			},
		},
		{
			// An org attribute of the wrong type is refused, not coerced.
			name:     "org of wrong type refused",
			attrs:    []any{"gen_ai.provider.name", "openai", "gen_ai.request.model", "gpt-6-luna", "gen_ai.usage.input_tokens", 1, "ledgerd.org", 7},
			rejected: "ledgerd.org",
		},
		{
			// Negative counts are refused.
			name:     "negative count refused",
			attrs:    []any{"gen_ai.provider.name", "openai", "gen_ai.request.model", "gpt-6-luna", "gen_ai.usage.output_tokens", -1},
			rejected: "gen_ai.usage.output_tokens",
		},
		{
			// A count above the contract's bound is refused before any arithmetic.
			name:     "huge count refused",
			attrs:    []any{"gen_ai.provider.name", "openai", "gen_ai.request.model", "gpt-6-luna", "gen_ai.usage.input_tokens", int64(9e18), "gen_ai.usage.cache_read.input_tokens", int64(9e18)},
			rejected: "gen_ai.usage.input_tokens",
		},
		{
			// Attempt numbers outside the contract's range are refused.
			name:     "attempt_no zero refused",
			attrs:    []any{"gen_ai.provider.name", "openai", "gen_ai.request.model", "gpt-6-luna", "gen_ai.usage.input_tokens", 1, "ledgerd.attempt_no", 0},
			rejected: "ledgerd.attempt_no",
		},
		{
			// A string attribute of the wrong type is refused, not coerced.
			name:     "model of wrong type refused",
			attrs:    []any{"gen_ai.provider.name", "openai", "gen_ai.request.model", 4, "gen_ai.usage.input_tokens", 1},
			rejected: "gen_ai.request.model",
		},
		{
			// fallback_from contradicting an explicit ledgerd.fallback = false is refused.
			name:     "fallback_from without fallback refused",
			attrs:    []any{"gen_ai.provider.name", "openai", "gen_ai.request.model", "gpt-6-luna", "gen_ai.usage.input_tokens", 1, "ledgerd.fallback", false, "ledgerd.fallback_from", "gpt-6-sol"},
			rejected: "ledgerd.fallback_from",
		},
		{
			// Control characters fail the contract's text rules.
			name:     "control character in tenant refused",
			attrs:    []any{"gen_ai.provider.name", "openai", "gen_ai.request.model", "gpt-6-luna", "gen_ai.usage.input_tokens", 1, "ledgerd.tenant", "a\x01b"},
			rejected: "tenant attribute",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := tc.resource
			if res == nil {
				res = service
			}
			sp := span(spanHex, tc.attrs...)
			sp.Status = tc.status
			got := Convert(request(res, sp), now, tc.tenants)
			switch {
			case tc.want != nil:
				want := base()
				tc.want(&want)
				if len(got.Records) != 1 || len(got.Rejected) != 0 || got.Ignored != 0 {
					t.Fatalf("got %d records, %+v rejected, %d ignored; want one record", len(got.Records), got.Rejected, got.Ignored)
				}
				if !reflect.DeepEqual(got.Records[0], want) {
					t.Fatalf("record\n got %+v\nwant %+v", got.Records[0], want)
				}
			case tc.rejected != "":
				if len(got.Rejected) != 1 || len(got.Records) != 0 || got.Ignored != 0 {
					t.Fatalf("got %d records, %+v rejected, %d ignored; want one refusal", len(got.Records), got.Rejected, got.Ignored)
				}
				if r := got.Rejected[0]; r.Field != tc.rejected || r.SpanID != spanHex {
					t.Fatalf("refusal %+v, want field %q of span %s", r, tc.rejected, spanHex)
				}
			default:
				if got.Ignored != 1 || len(got.Records)+len(got.Rejected) != 0 {
					t.Fatalf("got %d records, %+v rejected, %d ignored; want it ignored", len(got.Records), got.Rejected, got.Ignored)
				}
			}
		})
	}
}

func TestConvertSpanFields(t *testing.T) {
	t.Parallel()
	usage := []any{"gen_ai.provider.name", "openai", "gen_ai.request.model", "gpt-6-luna", "gen_ai.usage.input_tokens", 1}
	cases := []struct {
		name   string
		mutate func(sp *tracepb.Span)
		// rejected is the field refused; "" expects a record.
		rejected string
	}{
		// An all-zero span id is invalid in OTLP.
		{"zero span id", func(sp *tracepb.Span) { sp.SpanId = make([]byte, 8) }, "spanId"},
		// A trace id of the wrong length (a JSON id that was neither hex nor base64 ends up empty).
		{"short trace id", func(sp *tracepb.Span) { sp.TraceId = nil }, "traceId"},
		// A span that ends before it starts has no latency.
		{"end before start", func(sp *tracepb.Span) { sp.EndTimeUnixNano = sp.StartTimeUnixNano - 1 }, "endTimeUnixNano"},
		// A missing start time (0) is refused rather than dated 1970.
		{"no start time", func(sp *tracepb.Span) { sp.StartTimeUnixNano = 0 }, "startTimeUnixNano"},
		// A start time past int64 nanoseconds is out of range.
		{"start beyond int64", func(sp *tracepb.Span) { sp.StartTimeUnixNano = 1 << 63; sp.EndTimeUnixNano = 1<<63 + 1 }, "startTimeUnixNano"},
		// More than a day ahead of the clock is refused by the contract.
		{"start in the future", func(sp *tracepb.Span) {
			at := uint64(now.Add(25 * time.Hour).UnixNano())
			sp.StartTimeUnixNano, sp.EndTimeUnixNano = at, at+1
		}, "startTimeUnixNano"},
		// Spans longer than a day exceed the contract's latency bound.
		{"longer than a day", func(sp *tracepb.Span) { sp.EndTimeUnixNano = sp.StartTimeUnixNano + uint64(25*time.Hour) }, "endTimeUnixNano"},
		// A zero-length span is a valid attempt of 0 ms.
		{"zero duration", func(sp *tracepb.Span) { sp.EndTimeUnixNano = sp.StartTimeUnixNano }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sp := span(spanHex, usage...)
			tc.mutate(sp)
			got := Convert(request(service, sp), now, nil)
			if tc.rejected == "" {
				if len(got.Records) != 1 {
					t.Fatalf("got %+v, want a record", got)
				}
				return
			}
			if len(got.Rejected) != 1 || got.Rejected[0].Field != tc.rejected {
				t.Fatalf("got %+v, want a refusal of %s", got, tc.rejected)
			}
		})
	}
}

// TestConvertMixed checks counting across resources and scopes: records keep request order and
// every span is counted once as recorded, refused or ignored.
func TestConvertMixed(t *testing.T) {
	t.Parallel()
	ok := []any{"gen_ai.provider.name", "openai", "gen_ai.request.model", "gpt-6-luna", "gen_ai.usage.input_tokens", 1}
	req := request(service, span("0000000000000001", ok...), span("0000000000000002", "http.route", "/x"),
		span("0000000000000003", "gen_ai.provider.name", "openai", "gen_ai.usage.input_tokens", 1))
	other := request(kvs("service.name", "batch"), span("0000000000000004", ok...))
	req.ResourceSpans = append(req.ResourceSpans, other.ResourceSpans...)
	got := Convert(req, now, nil)
	if len(got.Records) != 2 || got.Records[0].AttemptID != "0000000000000001" || got.Records[1].Service != "batch" {
		t.Fatalf("records %+v", got.Records)
	}
	if got.Ignored != 1 || len(got.Rejected) != 1 || got.Rejected[0].SpanID != "0000000000000003" {
		t.Fatalf("ignored %d, rejected %+v", got.Ignored, got.Rejected)
	}
	msg := rejectionMessage(got.Rejected)
	if want := "1 GenAI span(s) refused: span 0000000000000003: gen_ai.request.model / gen_ai.response.model: must not be empty"; msg != want {
		t.Fatalf("message %q, want %q", msg, want)
	}
}

func TestRejectionMessageBounded(t *testing.T) {
	t.Parallel()
	var rej []Rejection
	for range 7 {
		rej = append(rej, Rejection{SpanID: "ab", Field: "f", Reason: "r"})
	}
	want := "7 GenAI span(s) refused: span ab: f: r; span ab: f: r; span ab: f: r; span ab: f: r; span ab: f: r; and 2 more"
	if got := rejectionMessage(rej); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
