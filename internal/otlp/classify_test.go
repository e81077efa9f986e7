package otlp

import (
	"testing"

	"github.com/ledgerd/ledgerd/schema"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	cases := []struct {
		errType string
		status  int
		message string
		want    schema.ErrorClass // schema.ErrorCancelled stands for status cancelled
	}{
		// HTTP status codes sent as error.type, as many instrumentations do.
		{"429", 0, "", schema.ErrorRateLimited},
		{"529", 0, "", schema.ErrorOverloaded},
		{"503", 0, "", schema.ErrorOverloaded},
		{"500", 0, "", schema.ErrorServer},
		{"502", 0, "", schema.ErrorServer},
		{"504", 0, "", schema.ErrorTimeout},
		{"401", 0, "", schema.ErrorAuth},
		{"402", 0, "", schema.ErrorQuotaExhausted},
		{"403", 0, "", schema.ErrorPermission},
		{"404", 0, "", schema.ErrorNotFound},
		{"413", 0, "", schema.ErrorRequestTooLarge},
		// Statuses no table lists fall to their range.
		{"599", 0, "", schema.ErrorServer},
		{"409", 0, "", schema.ErrorBadRequest},
		// http.response.status_code decides when error.type is generic.
		{"APIStatusError", 529, "", schema.ErrorOverloaded},
		{"_OTHER", 500, "", schema.ErrorServer},
		// A 429 whose type says the quota is spent is quota_exhausted, not rate limiting.
		{"insufficient_quota", 429, "", schema.ErrorQuotaExhausted},
		// Anthropic error types (PROVIDERS.md) and the SDK exceptions named after them.
		{"invalid_request_error", 0, "", schema.ErrorBadRequest},
		{"authentication_error", 0, "", schema.ErrorAuth},
		{"billing_error", 0, "", schema.ErrorQuotaExhausted},
		{"permission_error", 0, "", schema.ErrorPermission},
		{"not_found_error", 0, "", schema.ErrorNotFound},
		{"request_too_large", 0, "", schema.ErrorRequestTooLarge},
		{"rate_limit_error", 0, "", schema.ErrorRateLimited},
		{"api_error", 0, "", schema.ErrorServer},
		{"timeout_error", 0, "", schema.ErrorTimeout},
		{"overloaded_error", 0, "", schema.ErrorOverloaded},
		{"anthropic.RateLimitError", 0, "", schema.ErrorRateLimited},
		{"anthropic.OverloadedError", 0, "", schema.ErrorOverloaded},
		{"openai.APIConnectionError", 0, "", schema.ErrorConnection},
		{"openai.APITimeoutError", 0, "", schema.ErrorTimeout},
		{"openai.InternalServerError", 0, "", schema.ErrorServer},
		{"BadRequestError", 0, "", schema.ErrorBadRequest},
		// Google RPC status names.
		{"RESOURCE_EXHAUSTED", 0, "", schema.ErrorRateLimited},
		{"UNAVAILABLE", 0, "", schema.ErrorOverloaded},
		{"DEADLINE_EXCEEDED", 0, "", schema.ErrorTimeout},
		// Timeouts under their many names.
		{"timeout", 0, "", schema.ErrorTimeout},
		{"TimeoutError", 0, "", schema.ErrorTimeout},
		{"httpx.ReadTimeout", 0, "", schema.ErrorTimeout},
		{"httpx.ConnectTimeout", 0, "", schema.ErrorTimeout},
		{"java.net.SocketTimeoutException", 0, "", schema.ErrorTimeout},
		{"context deadline exceeded", 0, "", schema.ErrorTimeout},
		// Connection failures.
		{"httpx.ConnectError", 0, "", schema.ErrorConnection},
		{"ECONNREFUSED", 0, "", schema.ErrorConnection},
		{"requests.exceptions.ConnectionError", 0, "", schema.ErrorConnection},
		// Cancellation makes the attempt cancelled, whatever the status.
		{"cancelled", 0, "", schema.ErrorCancelled},
		{"asyncio.exceptions.CancelledError", 0, "", schema.ErrorCancelled},
		{"context canceled", 0, "", schema.ErrorCancelled},
		{"*url.Error", 0, `Post "https://api.openai.com/v1/chat/completions": context canceled`, schema.ErrorCancelled},
		// With no error.type, the status message is read for hints.
		{"", 0, "context deadline exceeded", schema.ErrorTimeout},
		{"*net.OpError", 0, "dial tcp 10.0.0.1:443: connect: connection refused", schema.ErrorConnection},
		// Nothing recognisable: unknown.
		{"_OTHER", 0, "", schema.ErrorUnknown},
		{"", 0, "", schema.ErrorUnknown},
		{"ValueError", 0, "bad input", schema.ErrorUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.errType+"/"+tc.message, func(t *testing.T) {
			t.Parallel()
			status, class := classify(tc.errType, tc.status, tc.message)
			wantStatus := schema.StatusError
			if tc.want == schema.ErrorCancelled {
				wantStatus = schema.StatusCancelled
			}
			if status != wantStatus || class != tc.want {
				t.Fatalf("classify(%q, %d, %q) = %s/%s, want %s/%s", tc.errType, tc.status, tc.message, status, class, wantStatus, tc.want)
			}
		})
	}
}
