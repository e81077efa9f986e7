package client

import (
	"context"
	"errors"
	"net"
	"strings"
	"unicode/utf8"

	"github.com/ledgerd/ledgerd/schema"
)

// dialect is the API whose response shapes a request gets, decided by its URL path.
type dialect int

// The APIs whose usage the Transport reads.
const (
	dialectNone      dialect = iota // usage unknown: the attempt is recorded without tokens
	dialectAnthropic                // Anthropic Messages (also on Vertex AI via rawPredict)
	dialectChat                     // OpenAI Chat Completions, legacy Completions and Embeddings
	dialectResponses                // OpenAI Responses
	dialectGemini                   // Gemini generateContent
)

// dialectOf tells the API from the URL path, so that OpenAI-compatible gateways and proxies that keep
// the provider's paths are read right whatever their host.
func dialectOf(path string) dialect {
	switch {
	case strings.HasSuffix(path, "/messages"),
		strings.HasSuffix(path, ":rawPredict"), strings.HasSuffix(path, ":streamRawPredict"):
		return dialectAnthropic
	case strings.HasSuffix(path, "/completions"), strings.HasSuffix(path, "/embeddings"):
		return dialectChat
	case strings.HasSuffix(path, "/responses"):
		return dialectResponses
	case strings.HasSuffix(path, ":generateContent"), strings.HasSuffix(path, ":streamGenerateContent"):
		return dialectGemini
	}
	return dialectNone
}

// providersByHost maps API hosts to OpenTelemetry gen_ai.provider.name values.
var providersByHost = map[string]string{
	"api.anthropic.com":                 "anthropic",
	"api.openai.com":                    "openai",
	"generativelanguage.googleapis.com": "gcp.gemini",
	"aiplatform.googleapis.com":         "gcp.vertex_ai",
	"api.mistral.ai":                    "mistral_ai",
	"api.groq.com":                      "groq",
	"api.deepseek.com":                  "deepseek",
	"api.x.ai":                          "x_ai",
	"api.perplexity.ai":                 "perplexity",
	"api.cohere.com":                    "cohere",
}

// providerOf names the provider of a host: a known API host, a regional Vertex AI, Azure OpenAI or
// Bedrock host, or else the host name itself.
func providerOf(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(host)
	if p, ok := providersByHost[host]; ok {
		return p
	}
	switch {
	case strings.HasSuffix(host, "-aiplatform.googleapis.com"):
		return "gcp.vertex_ai"
	case strings.HasSuffix(host, ".openai.azure.com"):
		return "azure.ai.openai"
	case strings.HasPrefix(host, "bedrock-runtime.") && strings.HasSuffix(host, ".amazonaws.com"):
		return "aws.bedrock"
	}
	return clean(host, schema.MaxNameLen)
}

// modelFromPath reads the model of a Gemini or Vertex AI URL such as
// /v1beta/models/gemini-2.5-flash:generateContent.
func modelFromPath(path string) string {
	i := strings.LastIndex(path, "models/")
	if i < 0 {
		return ""
	}
	m := path[i+len("models/"):]
	if j := strings.IndexAny(m, ":/"); j >= 0 {
		m = m[:j]
	}
	return clean(m, schema.MaxNameLen)
}

// classByType maps the error types of error bodies and stream error events (Anthropic error.type,
// OpenAI error.type and error.code, Google RPC status) to error classes.
var classByType = map[string]schema.ErrorClass{
	"invalid_request_error":   schema.ErrorBadRequest,
	"authentication_error":    schema.ErrorAuth,
	"billing_error":           schema.ErrorQuotaExhausted,
	"permission_error":        schema.ErrorPermission,
	"not_found_error":         schema.ErrorNotFound,
	"request_too_large":       schema.ErrorRequestTooLarge,
	"rate_limit_error":        schema.ErrorRateLimited,
	"api_error":               schema.ErrorServer,
	"timeout_error":           schema.ErrorTimeout,
	"overloaded_error":        schema.ErrorOverloaded,
	"server_error":            schema.ErrorServer,
	"rate_limit_exceeded":     schema.ErrorRateLimited,
	"insufficient_quota":      schema.ErrorQuotaExhausted,
	"invalid_api_key":         schema.ErrorAuth,
	"model_not_found":         schema.ErrorNotFound,
	"context_length_exceeded": schema.ErrorBadRequest,
	"INVALID_ARGUMENT":        schema.ErrorBadRequest,
	"FAILED_PRECONDITION":     schema.ErrorBadRequest,
	"UNAUTHENTICATED":         schema.ErrorAuth,
	"PERMISSION_DENIED":       schema.ErrorPermission,
	"NOT_FOUND":               schema.ErrorNotFound,
	"RESOURCE_EXHAUSTED":      schema.ErrorRateLimited,
	"INTERNAL":                schema.ErrorServer,
	"UNAVAILABLE":             schema.ErrorOverloaded,
	"DEADLINE_EXCEEDED":       schema.ErrorTimeout,
}

// quotaSigns are phrases by which a 429 body says the quota or credit is spent rather than a rate
// exceeded.
var quotaSigns = []string{"insufficient_quota", "credit balance is too low", "exceeded your current quota"}

// classifyHTTP gives the error class of a non-2xx response from its status and what its body said:
// the status decides when PROVIDERS.md's table lists it, refined to quota_exhausted for a 429 that
// says the quota is spent; otherwise the body's error type, then the status range.
func classifyHTTP(status int, e apiError) schema.ErrorClass {
	if c, ok := schema.ClassOfHTTPStatus(status); ok {
		if c == schema.ErrorRateLimited && e.quotaSpent() {
			return schema.ErrorQuotaExhausted
		}
		return c
	}
	if c := e.class(); c != "" {
		return c
	}
	return schema.ClassOfStatusRange(status)
}

// classifyFailure gives the status and class of an attempt that failed without a response, or whose
// body could not be read to its end: the caller's context decides first (cancelled, or timed out),
// then the error itself.
func classifyFailure(ctx context.Context, err error) (schema.Status, schema.ErrorClass) {
	switch {
	case errors.Is(ctx.Err(), context.Canceled) || errors.Is(err, context.Canceled):
		return schema.StatusCancelled, schema.ErrorCancelled
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return schema.StatusError, schema.ErrorTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return schema.StatusError, schema.ErrorTimeout
	}
	return schema.StatusError, schema.ErrorConnection
}

// clean returns s when it is a text the ledger accepts (valid UTF-8, no control characters, at most
// maxLen bytes), else "". Every string the Transport takes from a request or response passes here.
func clean(s string, maxLen int) string {
	if len(s) > maxLen || !utf8.ValidString(s) {
		return ""
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return ""
		}
	}
	return s
}
