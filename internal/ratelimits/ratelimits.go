// Package ratelimits reads the rate limits and the organization an LLM provider reports in its
// response headers, for the attempt record (schema.RateLimits, Attempt.Org). The Go client reads
// them from each HTTP answer and the OTLP receiver from spans that captured the headers, through
// this one reader.
package ratelimits

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ledgerd/ledgerd/schema"
)

// Header returns the value of the named response header (lower case), or "" when it was not sent;
// http.Header.Get is one.
type Header func(name string) string

// maxReset is how far after the answer a reset may lie: within the record's bound on resets
// (schema.MaxResetAhead after started_at) whatever the attempt's latency.
const maxReset = schema.MaxResetAhead - schema.MaxLatencyMS*time.Millisecond

// source is where one of the record's limits comes from: the Anthropic and the OpenAI header
// names of its limit, remaining and reset ("" when the provider has none).
type source struct {
	anthropic string // anthropic-ratelimit-<kind>-{limit,remaining,reset}
	openai    string // x-ratelimit-{limit,remaining,reset}-<kind>
}

// sources are the headers of the record's four limits, in schema.RateLimits order: Requests,
// Tokens, InputTokens, OutputTokens.
var sources = [4]source{{"requests", "requests"}, {"tokens", "tokens"}, {"input-tokens", ""}, {"output-tokens", ""}}

// Parse reads Anthropic's anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
// {limit,remaining,reset} headers, whose resets are RFC 3339 times, and OpenAI's
// x-ratelimit-{limit,remaining,reset}-{requests,tokens}, whose resets are durations from the answer
// ("6m0s", "20ms"; a plain number is seconds) and so are added to now, the time the answer
// arrived. A limit is kept only with what remains of it, both whole numbers in the record's range;
// a reset only when it parses and lies within a month of now. Anthropic's header wins where both
// are sent. It returns nil when no limit or reset was usable.
func Parse(h Header, now time.Time) *schema.RateLimits {
	var out schema.RateLimits
	found := false
	for i, l := range [4]*schema.RateLimit{&out.Requests, &out.Tokens, &out.InputTokens, &out.OutputTokens} {
		src := sources[i]
		if limit, remaining, ok := pair(h("anthropic-ratelimit-"+src.anthropic+"-limit"), h("anthropic-ratelimit-"+src.anthropic+"-remaining")); ok {
			l.Limit, l.Remaining = limit, remaining
		} else if src.openai != "" {
			l.Limit, l.Remaining, _ = pair(h("x-ratelimit-limit-"+src.openai), h("x-ratelimit-remaining-"+src.openai))
		}
		if t, ok := rfc3339(h("anthropic-ratelimit-"+src.anthropic+"-reset"), now); ok {
			l.Reset = t
		} else if src.openai != "" {
			l.Reset, _ = after(h("x-ratelimit-reset-"+src.openai), now)
		}
		found = found || l.Limit > 0 || !l.Reset.IsZero()
	}
	if !found {
		return nil
	}
	return &out
}

// Org returns the organization id a provider's answer names (Anthropic's anthropic-organization-id,
// OpenAI's openai-organization), or "" when it names none the record can carry.
func Org(h Header) string {
	for _, name := range []string{"anthropic-organization-id", "openai-organization"} {
		if v := strings.TrimSpace(h(name)); v != "" && len(v) <= schema.MaxNameLen && printable(v) {
			return v
		}
	}
	return ""
}

// printable tells whether s is ASCII without control characters, as header values are.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// pair reads a limit (at least 1) and what remains of it (at least 0), both within the record's
// range; ok is false unless both do.
func pair(limit, remaining string) (int64, int64, bool) {
	l, err := strconv.ParseInt(strings.TrimSpace(limit), 10, 64)
	if err != nil || l < 1 || l > schema.MaxRateLimit {
		return 0, 0, false
	}
	r, err := strconv.ParseInt(strings.TrimSpace(remaining), 10, 64)
	if err != nil || r < 0 || r > schema.MaxRateLimit {
		return 0, 0, false
	}
	return l, r, true
}

// rfc3339 reads an absolute reset time within reach of now.
func rfc3339(v string, now time.Time) (time.Time, bool) {
	if v = strings.TrimSpace(v); v == "" {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || t.Before(schema.Earliest) || t.After(now.Add(maxReset)) {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// after reads a reset given as a wait from now: a Go-style duration, as OpenAI writes it, or a
// number of seconds.
func after(v string, now time.Time) (time.Time, bool) {
	if v = strings.TrimSpace(v); v == "" {
		return time.Time{}, false
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		s, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || math.IsNaN(s) {
			return time.Time{}, false
		}
		if s >= maxReset.Seconds() {
			return time.Time{}, false
		}
		d = time.Duration(s * float64(time.Second))
	}
	if d < 0 || d > maxReset {
		return time.Time{}, false
	}
	return now.Add(d).UTC(), true
}
