// Package schema defines the attempt record, ledgerd's ingest contract (schema v1): its Go type,
// the strict decoder that turns outside JSON into records, and the rules a record must satisfy.
package schema

import (
	"time"

	"github.com/ledgerd/ledgerd/money"
)

// Version is the version of the record contract published at GET /v1/schema.
const Version = "1"

// Status is the outcome of one provider attempt.
type Status string

// The statuses an attempt can have.
const (
	StatusOK        Status = "ok"
	StatusError     Status = "error"
	StatusCancelled Status = "cancelled"
)

// ErrorClass classifies why an attempt did not produce an answer; see docs/record.md for the
// mapping from provider errors.
type ErrorClass string

// The error classes an attempt can carry. ErrorNone is the stored class of a successful attempt and
// is never sent by clients.
const (
	ErrorNone            ErrorClass = "none"
	ErrorBadRequest      ErrorClass = "bad_request"
	ErrorAuth            ErrorClass = "auth_error"
	ErrorPermission      ErrorClass = "permission_error"
	ErrorNotFound        ErrorClass = "not_found"
	ErrorRequestTooLarge ErrorClass = "request_too_large"
	ErrorRateLimited     ErrorClass = "rate_limited"
	ErrorQuotaExhausted  ErrorClass = "quota_exhausted"
	ErrorTimeout         ErrorClass = "timeout"
	ErrorConnection      ErrorClass = "connection_error"
	ErrorServer          ErrorClass = "server_error"
	ErrorOverloaded      ErrorClass = "overloaded"
	ErrorCancelled       ErrorClass = "cancelled"
	ErrorUnknown         ErrorClass = "unknown"
)

// ErrorClasses lists the classes a client may send, in the order reports show them.
var ErrorClasses = []ErrorClass{
	ErrorBadRequest, ErrorAuth, ErrorPermission, ErrorNotFound, ErrorRequestTooLarge,
	ErrorRateLimited, ErrorQuotaExhausted, ErrorTimeout, ErrorConnection, ErrorServer,
	ErrorOverloaded, ErrorCancelled, ErrorUnknown,
}

// Attempt is one provider attempt: one HTTP call to an LLM API. It carries usage and outcome, never
// a prompt or a reply. Token counts never overlap: total input = Input + CacheWrite + CacheRead.
type Attempt struct {
	AttemptID          string       `json:"attempt_id"`
	RequestID          string       `json:"request_id"`
	AttemptNo          int          `json:"attempt_no"`
	StartedAt          time.Time    `json:"started_at"`
	LatencyMS          int64        `json:"latency_ms"`
	Provider           string       `json:"provider"`
	Model              string       `json:"model"`
	Service            string       `json:"service"`
	Operation          string       `json:"operation,omitempty"`
	Tenant             string       `json:"tenant,omitempty"`
	Status             Status       `json:"status"`
	ErrorClass         ErrorClass   `json:"error_class,omitempty"`
	HTTPStatus         int          `json:"http_status,omitempty"`
	ProviderRequestID  string       `json:"provider_request_id,omitempty"`
	RetryAfterMS       int64        `json:"retry_after_ms,omitempty"`
	InputTokens        int64        `json:"input_tokens,omitempty"`
	OutputTokens       int64        `json:"output_tokens,omitempty"`
	CacheWriteTokens   int64        `json:"cache_write_tokens,omitempty"`
	CacheWrite1hTokens int64        `json:"cache_write_1h_tokens,omitempty"`
	CacheReadTokens    int64        `json:"cache_read_tokens,omitempty"`
	ReasoningTokens    int64        `json:"reasoning_tokens,omitempty"`
	CostUSD            *money.Nanos `json:"cost_usd,omitempty"`
	Fallback           bool         `json:"fallback,omitempty"`
	FallbackFrom       string       `json:"fallback_from,omitempty"`
	Batch              bool         `json:"batch,omitempty"`
	// UsageUnknown says the provider's answer carried no usage (an OpenAI chat stream sent without
	// stream_options.include_usage): the token counts are not zero but unknown, so the attempt is
	// counted as usage unknown and never priced, never $0. It requires every token count absent.
	UsageUnknown bool              `json:"usage_unknown,omitempty"`
	PromptHash   string            `json:"prompt_hash,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	// Org is the provider organization (or key pool) the attempt was billed to: the API keys of
	// one organization share its rate limits.
	Org string `json:"org,omitempty"`
	// RateLimits are the provider's rate limits as this attempt's response headers reported them;
	// nil when it reported none. In JSON they are the ratelimit_* fields (see MarshalJSON).
	RateLimits *RateLimits `json:"-"`
}

// RateLimits are the rate limits a provider reported on one response, per minute for the
// organization and model: requests, and tokens (for Anthropic the most restrictive token limit in
// effect), and Anthropic's separate input and output token limits.
type RateLimits struct {
	Requests, Tokens, InputTokens, OutputTokens RateLimit
}

// RateLimit is one limit as a response's headers gave it. Limit is 0 when the response did not
// report it, and Remaining then means nothing; Reset is zero when not reported.
type RateLimit struct {
	// Limit is the most the organization may use in the limit's window.
	Limit int64
	// Remaining is what was left of it when the provider answered.
	Remaining int64
	// Reset is when the limit is next whole again: Anthropic's RFC 3339 reset header, or the
	// time the answer arrived plus OpenAI's reset duration.
	Reset time.Time
}

// Reported tells whether the limit and what remained of it were reported.
func (l RateLimit) Reported() bool { return l.Limit > 0 }

// limits lists the four limits with the names their record fields end in.
func (r *RateLimits) limits() [4]namedLimit {
	return [4]namedLimit{{"requests", &r.Requests}, {"tokens", &r.Tokens},
		{"input_tokens", &r.InputTokens}, {"output_tokens", &r.OutputTokens}}
}

type namedLimit struct {
	name string
	l    *RateLimit
}

// DefaultOperation is the operation of a record that names none.
const DefaultOperation = "default"

// Limits on field values; they keep rows small and stop a client from using the ledger as a blob
// store.
const (
	MaxIDLen          = 128
	MaxNameLen        = 128
	MaxProviderReqLen = 256
	MaxMetadataKeys   = 16
	MaxMetadataLen    = 256
	MaxTokens         = 1_000_000_000
	MaxAttemptNo      = 10_000
	MaxLatencyMS      = 24 * 60 * 60 * 1000
	// MaxFutureSkew is how far in the future started_at may lie, to tolerate client clock skew.
	MaxFutureSkew = 24 * time.Hour
	// MaxRateLimit bounds a reported rate limit and what remains of it.
	MaxRateLimit = 1_000_000_000_000
	// MaxResetAhead is how far after started_at a reported reset may lie (OpenAI's daily limits
	// reset within a day).
	MaxResetAhead = 32 * 24 * time.Hour
)

// Earliest is the earliest started_at the ledger accepts.
var Earliest = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// classByHTTPStatus is the contract's mapping from the HTTP status of a failed provider call to its
// error class (docs/record.md); the Go client and the OTLP receiver both classify with it.
var classByHTTPStatus = map[int]ErrorClass{
	400: ErrorBadRequest,
	401: ErrorAuth,
	402: ErrorQuotaExhausted,
	403: ErrorPermission,
	404: ErrorNotFound,
	408: ErrorTimeout,
	413: ErrorRequestTooLarge,
	422: ErrorBadRequest,
	429: ErrorRateLimited,
	500: ErrorServer,
	502: ErrorServer,
	503: ErrorOverloaded,
	504: ErrorTimeout,
	529: ErrorOverloaded,
}

// ClassOfHTTPStatus returns the error class the contract gives an HTTP status, and false for a
// status it does not list (callers then look at the error body before falling back to
// ClassOfStatusRange).
func ClassOfHTTPStatus(status int) (ErrorClass, bool) {
	c, ok := classByHTTPStatus[status]
	return c, ok
}

// ClassOfStatusRange is the last resort for an unlisted status: server_error for 5xx, bad_request
// for 4xx, unknown otherwise.
func ClassOfStatusRange(status int) ErrorClass {
	switch {
	case status >= 500:
		return ErrorServer
	case status >= 400:
		return ErrorBadRequest
	}
	return ErrorUnknown
}
