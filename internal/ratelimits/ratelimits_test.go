package ratelimits

import (
	"bufio"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/schema"
)

var now = time.Date(2026, 11, 30, 9, 14, 5, 0, time.UTC)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// recorded reads the header set of a recorded answer in client/testdata.
func recorded(t *testing.T, name string) http.Header {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "client", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	resp, err := http.ReadResponse(bufio.NewReader(f), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Header
}

// TestRecordedHeaders checks the recorded answers of each provider, 2xx and 429: every limit the
// headers give, with the figures as sent and OpenAI's resets added to the time of the answer.
func TestRecordedHeaders(t *testing.T) {
	t.Parallel()
	cases := []struct {
		file string
		want *schema.RateLimits
		org  string
	}{
		// Anthropic's four limits, resets as RFC 3339 times.
		{"anthropic-ratelimit-200.http", &schema.RateLimits{
			Requests:     schema.RateLimit{Limit: 1000, Remaining: 999, Reset: at("2026-11-30T09:14:05Z")},
			Tokens:       schema.RateLimit{Limit: 96000, Remaining: 96000, Reset: at("2026-11-30T09:14:05Z")},
			InputTokens:  schema.RateLimit{Limit: 80000, Remaining: 80000, Reset: at("2026-11-30T09:14:05Z")},
			OutputTokens: schema.RateLimit{Limit: 16000, Remaining: 16000, Reset: at("2026-11-30T09:14:06Z")},
		}, "36562039-1ae4-48e6-ae28-1e517e3d2d12"},
		// A 429 on requests: none remaining.
		{"anthropic-ratelimit-429.http", &schema.RateLimits{
			Requests:     schema.RateLimit{Limit: 50, Remaining: 0, Reset: at("2026-11-30T09:15:00Z")},
			Tokens:       schema.RateLimit{Limit: 48000, Remaining: 37000, Reset: at("2026-11-30T09:14:53Z")},
			InputTokens:  schema.RateLimit{Limit: 40000, Remaining: 31000, Reset: at("2026-11-30T09:14:53Z")},
			OutputTokens: schema.RateLimit{Limit: 8000, Remaining: 6000, Reset: at("2026-11-30T09:14:55Z")},
		}, "36562039-1ae4-48e6-ae28-1e517e3d2d12"},
		// OpenAI's two limits, resets as durations (the *_usage_based variants are not read).
		{"openai-ratelimit-200.http", &schema.RateLimits{
			Requests: schema.RateLimit{Limit: 5000, Remaining: 4999, Reset: now.Add(12 * time.Millisecond)},
			Tokens:   schema.RateLimit{Limit: 160000, Remaining: 159976, Reset: now.Add(9 * time.Millisecond)},
		}, "user-3v8kqy1nmlw0x2zgdh5ftu7c"},
		// A 429 on tokens, with a fractional duration.
		{"openai-ratelimit-429.http", &schema.RateLimits{
			Requests: schema.RateLimit{Limit: 500, Remaining: 499, Reset: now.Add(120 * time.Millisecond)},
			Tokens:   schema.RateLimit{Limit: 30000, Remaining: 0, Reset: now.Add(2308 * time.Millisecond)},
		}, "user-3v8kqy1nmlw0x2zgdh5ftu7c"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			t.Parallel()
			h := recorded(t, c.file)
			if got := Parse(h.Get, now); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Parse = %+v\nwant %+v", got, c.want)
			}
			if got := Org(h.Get); got != c.org {
				t.Errorf("Org = %q, want %q", got, c.org)
			}
		})
	}
}

// TestParse covers the forms and the refusals.
func TestParse(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		h    map[string]string
		want *schema.RateLimits
	}{
		// No rate limit header at all.
		{"none", map[string]string{"retry-after": "3"}, nil},
		// OpenAI's documented forms: minutes and seconds, and milliseconds.
		{"durations", map[string]string{"x-ratelimit-limit-tokens": "40000", "x-ratelimit-remaining-tokens": "18000",
			"x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-reset-requests": "20ms"},
			&schema.RateLimits{Requests: schema.RateLimit{Reset: now.Add(20 * time.Millisecond)},
				Tokens: schema.RateLimit{Limit: 40000, Remaining: 18000, Reset: now.Add(6 * time.Minute)}}},
		// A reset in plain seconds, as some OpenAI-compatible services send it.
		{"seconds", map[string]string{"x-ratelimit-reset-requests": "1.5"},
			&schema.RateLimits{Requests: schema.RateLimit{Reset: now.Add(1500 * time.Millisecond)}}},
		// Azure's -1 for "not applicable" is no limit.
		{"azure minus one", map[string]string{"x-ratelimit-limit-tokens": "-1", "x-ratelimit-remaining-tokens": "-1"}, nil},
		// A limit without what remains of it is dropped: the headroom would be unknown.
		{"limit alone", map[string]string{"anthropic-ratelimit-requests-limit": "50"}, nil},
		// A limit of 0 cannot be a denominator.
		{"zero limit", map[string]string{"x-ratelimit-limit-requests": "0", "x-ratelimit-remaining-requests": "0"}, nil},
		// Words and fractions are not counts.
		{"not a number", map[string]string{"x-ratelimit-limit-requests": "many", "x-ratelimit-remaining-requests": "1.5"}, nil},
		// White space around values is tolerated.
		{"spaces", map[string]string{"x-ratelimit-limit-requests": " 60 ", "x-ratelimit-remaining-requests": " 0"},
			&schema.RateLimits{Requests: schema.RateLimit{Limit: 60, Remaining: 0}}},
		// A reset that does not parse, or lies months away, is dropped with the limit kept.
		{"bad resets", map[string]string{"anthropic-ratelimit-tokens-limit": "100", "anthropic-ratelimit-tokens-remaining": "7",
			"anthropic-ratelimit-tokens-reset": "soon", "x-ratelimit-reset-requests": "2000h"},
			&schema.RateLimits{Tokens: schema.RateLimit{Limit: 100, Remaining: 7}}},
		// A negative wait is no reset.
		{"negative duration", map[string]string{"x-ratelimit-reset-tokens": "-5s"}, nil},
		// Anthropic's header wins where a gateway passes both.
		{"both providers", map[string]string{"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "5",
			"x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "499"},
			&schema.RateLimits{Requests: schema.RateLimit{Limit: 50, Remaining: 5}}},
		// A reset with an offset is kept as the same instant, in UTC.
		{"offset", map[string]string{"anthropic-ratelimit-output-tokens-reset": "2026-11-30T10:14:06+01:00"},
			&schema.RateLimits{OutputTokens: schema.RateLimit{Reset: at("2026-11-30T09:14:06Z")}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, v := range c.h {
				h.Set(k, v)
			}
			if got := Parse(h.Get, now); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Parse = %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// TestOrg checks the organization headers: the first usable one, and nothing unprintable.
func TestOrg(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		h    map[string]string
		want string
	}{
		// No organization header.
		{"none", nil, ""},
		// OpenAI's header.
		{"openai", map[string]string{"openai-organization": "org-abc"}, "org-abc"},
		// A value the record could not carry is ignored.
		{"control character", map[string]string{"openai-organization": "org\x01"}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, v := range c.h {
				h.Set(k, v)
			}
			if got := Org(h.Get); got != c.want {
				t.Errorf("Org = %q, want %q", got, c.want)
			}
		})
	}
}

// FuzzParse checks that whatever the headers say, what Parse returns is a record's valid rate
// limits.
func FuzzParse(f *testing.F) {
	f.Add("1000", "999", "2026-11-30T09:14:05Z", "6m0s")
	f.Add("-1", "-1", "", "0")
	f.Add("50", "0", "2026-11-30T09:15:00+01:00", "1.5")
	f.Fuzz(func(t *testing.T, limit, remaining, reset, wait string) {
		h := http.Header{}
		h.Set("anthropic-ratelimit-requests-limit", limit)
		h.Set("anthropic-ratelimit-requests-remaining", remaining)
		h.Set("anthropic-ratelimit-requests-reset", reset)
		h.Set("x-ratelimit-limit-tokens", limit)
		h.Set("x-ratelimit-remaining-tokens", remaining)
		h.Set("x-ratelimit-reset-tokens", wait)
		r := Parse(h.Get, now)
		a := schema.Attempt{AttemptID: "a", RequestID: "r", AttemptNo: 1, StartedAt: now.Add(-time.Hour),
			LatencyMS: int64(time.Hour / time.Millisecond), Provider: "p", Model: "m", Service: "s",
			Status: schema.StatusOK, RateLimits: r}
		if ferr := a.Validate(now); ferr != nil {
			t.Fatalf("Parse gave %+v, which the record refuses: %v", r, ferr)
		}
	})
}
