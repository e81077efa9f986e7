package client

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/schema"
)

// recordedAnswer serves a recorded answer of testdata (status line, headers, body) as it was.
func recordedAnswer(t *testing.T, name string) *httptest.Server {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestTransportRateLimits serves recorded answers of each provider, 2xx and 429, and checks that
// the record carries every rate limit their headers report (OpenAI's reset durations added to the
// time the answer came) and the org: the Transport's own when set, else the one the answer names.
func TestTransportRateLimits(t *testing.T) {
	t.Parallel()
	answered := time.Date(2026, 11, 30, 9, 14, 5, 0, time.UTC)
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name, file, path, body, org string
		status                      int
		class                       schema.ErrorClass
		want                        *schema.RateLimits
		wantOrg                     string
	}{
		// An Anthropic answer: four limits, the org from the Transport's options.
		{"anthropic 200", "anthropic-ratelimit-200.http", "/v1/messages", anthropicReq, "acme-anthropic", 200, "",
			&schema.RateLimits{
				Requests:     schema.RateLimit{Limit: 1000, Remaining: 999, Reset: at("2026-11-30T09:14:05Z")},
				Tokens:       schema.RateLimit{Limit: 96000, Remaining: 96000, Reset: at("2026-11-30T09:14:05Z")},
				InputTokens:  schema.RateLimit{Limit: 80000, Remaining: 80000, Reset: at("2026-11-30T09:14:05Z")},
				OutputTokens: schema.RateLimit{Limit: 16000, Remaining: 16000, Reset: at("2026-11-30T09:14:06Z")},
			}, "acme-anthropic"},
		// An Anthropic 429: no request left; without an org option, the answer's organization id.
		{"anthropic 429", "anthropic-ratelimit-429.http", "/v1/messages", anthropicReq, "", 429, schema.ErrorRateLimited,
			&schema.RateLimits{
				Requests:     schema.RateLimit{Limit: 50, Remaining: 0, Reset: at("2026-11-30T09:15:00Z")},
				Tokens:       schema.RateLimit{Limit: 48000, Remaining: 37000, Reset: at("2026-11-30T09:14:53Z")},
				InputTokens:  schema.RateLimit{Limit: 40000, Remaining: 31000, Reset: at("2026-11-30T09:14:53Z")},
				OutputTokens: schema.RateLimit{Limit: 8000, Remaining: 6000, Reset: at("2026-11-30T09:14:55Z")},
			}, "36562039-1ae4-48e6-ae28-1e517e3d2d12"},
		// An OpenAI answer: two limits, resets as durations.
		{"openai 200", "openai-ratelimit-200.http", "/v1/chat/completions", chatReq, "acme-openai", 200, "",
			&schema.RateLimits{
				Requests: schema.RateLimit{Limit: 5000, Remaining: 4999, Reset: answered.Add(12 * time.Millisecond)},
				Tokens:   schema.RateLimit{Limit: 160000, Remaining: 159976, Reset: answered.Add(9 * time.Millisecond)},
			}, "acme-openai"},
		// An OpenAI 429 on tokens.
		{"openai 429", "openai-ratelimit-429.http", "/v1/chat/completions", chatReq, "", 429, schema.ErrorRateLimited,
			&schema.RateLimits{
				Requests: schema.RateLimit{Limit: 500, Remaining: 499, Reset: answered.Add(120 * time.Millisecond)},
				Tokens:   schema.RateLimit{Limit: 30000, Remaining: 0, Reset: answered.Add(2308 * time.Millisecond)},
			}, "user-3v8kqy1nmlw0x2zgdh5ftu7c"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := recordedAnswer(t, c.file)
			got := &capture{}
			tr, err := NewTransport(got, TransportOptions{Base: srv.Client().Transport, Service: "svc", Org: c.org,
				Now: func() time.Time { return answered }})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := post(context.Background(), t, &http.Client{Transport: tr}, srv.URL+c.path, c.body); err != nil {
				t.Fatal(err)
			}
			a := got.one(t)
			if a.HTTPStatus != c.status || a.ErrorClass != c.class {
				t.Errorf("status %d class %q, want %d %q", a.HTTPStatus, a.ErrorClass, c.status, c.class)
			}
			if !reflect.DeepEqual(a.RateLimits, c.want) {
				t.Errorf("rate limits %+v\nwant %+v", a.RateLimits, c.want)
			}
			if a.Org != c.wantOrg {
				t.Errorf("org %q, want %q", a.Org, c.wantOrg)
			}
			if ferr := a.Validate(answered); ferr != nil {
				t.Errorf("the record is refused: %v", ferr)
			}
		})
	}
}

// TestTransportOrgOption guards the option's check: an org the record cannot carry is refused at
// construction, and one that gets no answer still names the org.
func TestTransportOrgOption(t *testing.T) {
	t.Parallel()
	if _, err := NewTransport(&capture{}, TransportOptions{Service: "svc", Org: "bad\norg"}); err == nil {
		t.Fatal("an org with a newline was accepted")
	}
	got := &capture{}
	tr, err := NewTransport(got, TransportOptions{Service: "svc", Org: "acme",
		Base: roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, io.ErrUnexpectedEOF })})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "https://api.anthropic.com/v1/messages", bytes.NewReader([]byte(anthropicReq)))
	if _, err := tr.RoundTrip(req); err == nil {
		t.Fatal("no error from a failing base")
	}
	if a := got.one(t); a.Org != "acme" || a.RateLimits != nil {
		t.Fatalf("org %q, rate limits %+v", a.Org, a.RateLimits)
	}
}
