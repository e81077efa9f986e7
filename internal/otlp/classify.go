package otlp

import (
	"strconv"
	"strings"

	"github.com/ledgerd/ledgerd/schema"
)

// classByType maps error.type values, folded by typeKey, to error classes. Folding makes one entry
// cover a provider's error type and the SDK exception named after it ("rate_limit_error" and
// anthropic.RateLimitError both fold to "ratelimiterror"), and strips module paths
// ("openai.APITimeoutError" → "apitimeouterror").
var classByType = map[string]schema.ErrorClass{
	// Anthropic error types and SDK exceptions.
	"invalidrequesterror":   schema.ErrorBadRequest,
	"badrequesterror":       schema.ErrorBadRequest,
	"authenticationerror":   schema.ErrorAuth,
	"billingerror":          schema.ErrorQuotaExhausted,
	"permissionerror":       schema.ErrorPermission,
	"permissiondeniederror": schema.ErrorPermission,
	"notfounderror":         schema.ErrorNotFound,
	"requesttoolarge":       schema.ErrorRequestTooLarge,
	"requesttoolargeerror":  schema.ErrorRequestTooLarge,
	"ratelimiterror":        schema.ErrorRateLimited,
	"apierror":              schema.ErrorServer,
	"internalservererror":   schema.ErrorServer,
	"timeouterror":          schema.ErrorTimeout,
	"apitimeouterror":       schema.ErrorTimeout,
	"overloadederror":       schema.ErrorOverloaded,
	"apiconnectionerror":    schema.ErrorConnection,
	// OpenAI error types and codes.
	"servererror":           schema.ErrorServer,
	"ratelimitexceeded":     schema.ErrorRateLimited,
	"insufficientquota":     schema.ErrorQuotaExhausted,
	"invalidapikey":         schema.ErrorAuth,
	"modelnotfound":         schema.ErrorNotFound,
	"contextlengthexceeded": schema.ErrorBadRequest,
	"unprocessableentity":   schema.ErrorBadRequest,
	// Google RPC status names.
	"invalidargument":    schema.ErrorBadRequest,
	"failedprecondition": schema.ErrorBadRequest,
	"unauthenticated":    schema.ErrorAuth,
	"permissiondenied":   schema.ErrorPermission,
	"notfound":           schema.ErrorNotFound,
	"resourceexhausted":  schema.ErrorRateLimited,
	"internal":           schema.ErrorServer,
	"unavailable":        schema.ErrorOverloaded,
	"deadlineexceeded":   schema.ErrorTimeout,
	// Generic names instrumentations use.
	"timeout":             schema.ErrorTimeout,
	"connectionerror":     schema.ErrorConnection,
	"connecterror":        schema.ErrorConnection,
	"econnrefused":        schema.ErrorConnection,
	"econnreset":          schema.ErrorConnection,
	"enotfound":           schema.ErrorConnection,
	"eaiagain":            schema.ErrorConnection,
	"epipe":               schema.ErrorConnection,
	"remoteprotocolerror": schema.ErrorConnection,
}

// cancelTypes are error.type values, folded, of a call its caller abandoned: the attempt gets
// status cancelled.
var cancelTypes = map[string]bool{
	"cancelled": true, "canceled": true, "cancellederror": true, "contextcanceled": true,
	"aborterror": true, "operationcanceledexception": true, "taskcanceledexception": true,
}

// hints are the words that classify an error.type or status message no table names, tried in
// order: a "ConnectTimeout" is a timeout before it is a connection error.
var hints = []struct {
	word  string
	class schema.ErrorClass
}{
	{"timeout", schema.ErrorTimeout},
	{"timedout", schema.ErrorTimeout},
	{"deadline", schema.ErrorTimeout},
	{"ratelimit", schema.ErrorRateLimited},
	{"overload", schema.ErrorOverloaded},
	{"quota", schema.ErrorQuotaExhausted},
	{"connect", schema.ErrorConnection},
	{"connrefused", schema.ErrorConnection},
	{"connreset", schema.ErrorConnection},
	{"brokenpipe", schema.ErrorConnection},
}

// fold lower-cases s and keeps only its letters and digits.
func fold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// typeKey folds an error.type for classByType: the last dotted component (the class name of a
// fully qualified exception), folded.
func typeKey(t string) string {
	t = strings.TrimSpace(t)
	if i := strings.LastIndexByte(t, '.'); i >= 0 && i < len(t)-1 && !strings.Contains(t, " ") {
		t = t[i+1:]
	}
	return fold(t)
}

// classify gives the outcome of a failed GenAI span from its error.type attribute, its
// http.response.status_code (0 when absent) and its status message:
//  1. a cancellation (error.type or message) makes the attempt cancelled;
//  2. an error.type that is an HTTP status code stands for that status;
//  3. an HTTP status schema.ClassOfHTTPStatus lists decides, except that a 429 whose error.type says the quota
//     is spent is quota_exhausted;
//  4. then error.type by classByType, then the hint words in error.type and in the message;
//  5. then the status range (5xx server_error, 4xx bad_request); else unknown.
func classify(errType string, httpStatus int, message string) (schema.Status, schema.ErrorClass) {
	key, msg := typeKey(errType), fold(message)
	if cancelTypes[key] || cancelTypes[msg] || strings.Contains(msg, "contextcanceled") {
		return schema.StatusCancelled, schema.ErrorCancelled
	}
	if n, err := strconv.Atoi(strings.TrimSpace(errType)); err == nil && n >= 100 && n <= 599 && httpStatus == 0 {
		httpStatus = n
	}
	typeClass := classByType[key]
	if c, ok := schema.ClassOfHTTPStatus(httpStatus); ok {
		if c == schema.ErrorRateLimited && typeClass == schema.ErrorQuotaExhausted {
			return schema.StatusError, schema.ErrorQuotaExhausted
		}
		return schema.StatusError, c
	}
	if typeClass != "" {
		return schema.StatusError, typeClass
	}
	for _, text := range []string{fold(errType), msg} {
		for _, h := range hints {
			if strings.Contains(text, h.word) {
				return schema.StatusError, h.class
			}
		}
	}
	return schema.StatusError, schema.ClassOfStatusRange(httpStatus)
}
