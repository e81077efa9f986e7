package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/alerts/notify"
)

// script is a receiver answering each request with the next scripted response (the last one
// repeats) and recording what it got.
type script struct {
	srv       *httptest.Server
	mu        sync.Mutex
	responses []response
	bodies    [][]byte
	headers   []http.Header
}

type response struct {
	code       int
	retryAfter string
	location   string
}

func newScript(t *testing.T, rs ...response) *script {
	t.Helper()
	s := &script{responses: rs}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		i := min(len(s.bodies), len(s.responses)-1)
		s.bodies = append(s.bodies, body)
		s.headers = append(s.headers, r.Header.Clone())
		resp := s.responses[i]
		s.mu.Unlock()
		if resp.retryAfter != "" {
			w.Header().Set("Retry-After", resp.retryAfter)
		}
		if resp.location != "" {
			w.Header().Set("Location", resp.location)
		}
		w.WriteHeader(resp.code)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *script) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

// closedURL is the address of a server that has stopped: connecting fails.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

var sample = notify.Alert{Version: "1", Status: notify.StatusFiring, Fingerprint: "0123456789abcdef", Rule: "retry-storm",
	Kind: "attempts_per_call", Severity: "warning", Project: "acme",
	Labels:      map[string]string{"alertname": "retry-storm", "project": "acme", "service": "router", "tenant": ""},
	Summary:     "3.00 attempts per call on router/classify <beta> & co",
	Description: "In the last 15m, 20 logical calls made 60 attempts.",
	Figures:     map[string]string{"attempts": "60", "requests": "20"},
	StartsAt:    time.Date(2026, 10, 14, 10, 30, 0, 0, time.UTC), GeneratorURL: "https://ledgerd.example/v1/alerts"}

func TestRetrier(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	cases := []struct {
		name      string
		responses []response
		closed    bool // send to a closed port instead
		retrier   notify.Retrier
		requests  int
		waits     []time.Duration
		ok        bool
		retryable bool
		errHas    string
	}{
		// Guards Retry-After: a 503 asking for 2 s is retried after exactly 2 s, then succeeds.
		{name: "503 then 200 with Retry-After", responses: []response{{code: 503, retryAfter: "2"}, {code: 200}},
			requests: 2, waits: []time.Duration{2 * time.Second}, ok: true},
		// Guards never retrying a 4xx.
		{name: "400 never retried", responses: []response{{code: 400}}, requests: 1, errHas: "HTTP 400"},
		// Guards 404 and 401 alike: client errors are final.
		{name: "401 never retried", responses: []response{{code: 401}}, requests: 1, errHas: "HTTP 401"},
		// Guards exponential backoff with jitter (fixed at 0.5: half of 500ms, 1s, 2s, 4s) and the
		// attempt bound.
		{name: "500 until attempts run out", responses: []response{{code: 500}}, requests: 5,
			waits: []time.Duration{250 * ms, 500 * ms, time.Second, 2 * time.Second}, retryable: true, errHas: "gave up after 5 attempts"},
		// Guards 429 as retryable.
		{name: "429 then 200", responses: []response{{code: 429}, {code: 429}, {code: 202}}, requests: 3,
			waits: []time.Duration{250 * ms, 500 * ms}, ok: true},
		// Guards the backoff cap.
		{name: "backoff capped", responses: []response{{code: 502}}, requests: 4,
			retrier: notify.Retrier{MaxAttempts: 4, MaxBackoff: 800 * ms},
			waits:   []time.Duration{250 * ms, 400 * ms, 400 * ms}, retryable: true, errHas: "gave up after 4 attempts"},
		// Guards the time bound: a Retry-After past the budget ends the delivery at once.
		{name: "Retry-After beyond the budget", responses: []response{{code: 503, retryAfter: "120"}}, requests: 1,
			retryable: true, errHas: "next wait 2m0s passes the 1m0s budget"},
		// Guards the time bound counting waits: 29 s + 29 s fit a minute, a third does not.
		{name: "waits add up to the budget", responses: []response{{code: 503, retryAfter: "29"}}, requests: 3,
			waits: []time.Duration{29 * time.Second, 29 * time.Second}, retryable: true, errHas: "next wait 29s passes the 1m0s budget"},
		// Guards network errors as retryable.
		{name: "connection refused", closed: true, requests: 0,
			waits: []time.Duration{250 * ms, 500 * ms, time.Second, 2 * time.Second}, retryable: true, errHas: "connection refused"},
		// Guards redirects: never followed (they could carry the request elsewhere), never retried.
		{name: "redirect not followed", responses: []response{{code: 302, location: "http://127.0.0.1:1/elsewhere"}},
			requests: 1, errHas: "HTTP 302"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var target string
			var s *script
			if c.closed {
				target = closedURL(t) + "/hook"
			} else {
				s = newScript(t, c.responses...)
				target = s.srv.URL + "/hook"
			}
			r := c.retrier
			var slept []time.Duration
			r.Sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
			r.Jitter = func() float64 { return 0.5 }
			n := notify.NewWebhook(notify.NewSecret(target), notify.Secret{}, notify.NewClient(5*time.Second))
			res, err := r.Do(context.Background(), n, sample)
			if (err == nil) != c.ok {
				t.Fatalf("err %v, want ok=%v", err, c.ok)
			}
			if err != nil && !strings.Contains(err.Error(), c.errHas) {
				t.Errorf("error %q lacks %q", err, c.errHas)
			}
			if err != nil && res.Retryable != c.retryable {
				t.Errorf("retryable %v, want %v", res.Retryable, c.retryable)
			}
			if !slices.Equal(slept, c.waits) || !slices.Equal(res.Waits, c.waits) {
				t.Errorf("waits %v (result %v), want %v", slept, res.Waits, c.waits)
			}
			if s != nil && s.requests() != c.requests {
				t.Errorf("%d requests, want %d", s.requests(), c.requests)
			}
			if want := len(c.waits) + 1; res.Attempts != want {
				t.Errorf("%d attempts, want %d", res.Attempts, want)
			}
		})
	}
}

// TestRetrierCancelled checks that a delivery stops when its context ends during a wait.
func TestRetrierCancelled(t *testing.T) {
	t.Parallel()
	s := newScript(t, response{code: 503, retryAfter: "30"})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	n := notify.NewWebhook(notify.NewSecret(s.srv.URL), notify.Secret{}, notify.NewClient(5*time.Second))
	res, err := notify.Retrier{}.Do(ctx, n, sample)
	if err == nil || !strings.Contains(err.Error(), "retry cancelled") || res.Attempts != 1 {
		t.Fatalf("got %d attempts, %v", res.Attempts, err)
	}
}

func TestWebhookPayload(t *testing.T) {
	t.Parallel()
	s := newScript(t, response{code: 200})
	n := notify.NewWebhook(notify.NewSecret(s.srv.URL), notify.NewSecret("tok-1"), notify.NewClient(5*time.Second))
	resolved := sample
	resolved.Status, resolved.EndsAt = notify.StatusResolved, sample.StartsAt.Add(20*time.Minute)
	if _, err := n.Notify(context.Background(), sample, resolved); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"version":"1","status":"firing","fingerprint":"0123456789abcdef","rule":"retry-storm","kind":"attempts_per_call",` +
			`"severity":"warning","project":"acme","labels":{"alertname":"retry-storm","project":"acme","service":"router","tenant":""},` +
			`"summary":"3.00 attempts per call on router/classify \u003cbeta\u003e \u0026 co","description":"In the last 15m, 20 logical calls made 60 attempts.",` +
			`"figures":{"attempts":"60","requests":"20"},"startsAt":"2026-10-14T10:30:00Z","generatorURL":"https://ledgerd.example/v1/alerts"}`,
		`{"version":"1","status":"resolved","fingerprint":"0123456789abcdef","rule":"retry-storm","kind":"attempts_per_call",` +
			`"severity":"warning","project":"acme","labels":{"alertname":"retry-storm","project":"acme","service":"router","tenant":""},` +
			`"summary":"3.00 attempts per call on router/classify \u003cbeta\u003e \u0026 co","description":"In the last 15m, 20 logical calls made 60 attempts.",` +
			`"figures":{"attempts":"60","requests":"20"},"startsAt":"2026-10-14T10:30:00Z","endsAt":"2026-10-14T10:50:00Z",` +
			`"generatorURL":"https://ledgerd.example/v1/alerts"}`,
	}
	if len(s.bodies) != 2 {
		t.Fatalf("%d requests", len(s.bodies))
	}
	for i := range want {
		if string(s.bodies[i]) != want[i] {
			t.Errorf("body %d\n got %s\nwant %s", i, s.bodies[i], want[i])
		}
		if h := s.headers[i]; h.Get("Authorization") != "Bearer tok-1" || h.Get("Content-Type") != "application/json" {
			t.Errorf("headers %v", h)
		}
	}
}

func TestSlackPayload(t *testing.T) {
	t.Parallel()
	s := newScript(t, response{code: 200})
	n := notify.NewSlack(notify.NewSecret(s.srv.URL+"/services/T/B/X"), notify.NewClient(5*time.Second))
	if _, err := n.Notify(context.Background(), sample); err != nil {
		t.Fatal(err)
	}
	var msg map[string]string
	if err := json.Unmarshal(s.bodies[0], &msg); err != nil {
		t.Fatal(err)
	}
	// Readable text with the figures; Slack's reserved characters escaped.
	want := ":rotating_light: *[FIRING] retry-storm* (warning, project acme)\n" +
		"*3.00 attempts per call on router/classify &lt;beta&gt; &amp; co*\n" +
		"In the last 15m, 20 logical calls made 60 attempts.\n" +
		"• attempts: `60`\n• requests: `20`\n" +
		"since 2026-10-14 10:30 UTC · <https://ledgerd.example/v1/alerts|ledgerd>"
	if len(msg) != 1 || msg["text"] != want {
		t.Errorf("slack message\n got %q\nwant %q", msg["text"], want)
	}
}

func TestAlertmanagerPayload(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 14, 11, 0, 0, 0, time.UTC)
	resolved := sample
	resolved.Status, resolved.EndsAt = notify.StatusResolved, now.Add(-time.Minute)
	got := string(notify.AlertmanagerPayload([]notify.Alert{sample, resolved}, now, 4*time.Minute))
	// Firing: endsAt four resends ahead. Resolved: endsAt when it cleared. The empty tenant label
	// is left out.
	want := `[{"labels":{"alertname":"retry-storm","project":"acme","service":"router"},` +
		`"annotations":{"attempts":"60","description":"In the last 15m, 20 logical calls made 60 attempts.","requests":"20","summary":"3.00 attempts per call on router/classify \u003cbeta\u003e \u0026 co"},` +
		`"startsAt":"2026-10-14T10:30:00Z","endsAt":"2026-10-14T11:04:00Z","generatorURL":"https://ledgerd.example/v1/alerts"},` +
		`{"labels":{"alertname":"retry-storm","project":"acme","service":"router"},` +
		`"annotations":{"attempts":"60","description":"In the last 15m, 20 logical calls made 60 attempts.","requests":"20","summary":"3.00 attempts per call on router/classify \u003cbeta\u003e \u0026 co"},` +
		`"startsAt":"2026-10-14T10:30:00Z","endsAt":"2026-10-14T10:59:00Z","generatorURL":"https://ledgerd.example/v1/alerts"}]`
	if got != want {
		t.Errorf("payload\n got %s\nwant %s", got, want)
	}
	s := newScript(t, response{code: 200})
	am := notify.NewAlertmanager(notify.NewSecret(s.srv.URL+"/prefix/"), notify.Secret{}, 4*time.Minute,
		func() time.Time { return now }, notify.NewClient(5*time.Second))
	if _, err := am.Notify(context.Background(), sample, resolved); err != nil {
		t.Fatal(err)
	}
	if s.requests() != 1 || string(s.bodies[0]) != want {
		t.Errorf("%d requests; body %s", s.requests(), s.bodies[0])
	}
}

// TestSecretsNotInErrors checks that no failure of any integration puts its URL path, query,
// credentials or token into the error, whatever went wrong.
func TestSecretsNotInErrors(t *testing.T) {
	t.Parallel()
	secrets := []string{"SECRETPATH", "QSECRET", "PASSSECRET", "TOKENSECRET", "FILESECRET"}
	withSecrets := func(base string) string {
		return strings.Replace(base, "http://", "http://user:PASSSECRET@", 1) + "/services/T000/SECRETPATH?token=QSECRET"
	}
	file := filepath.Join(t.TempDir(), "url")
	failures := map[string]func(t *testing.T) string{
		"400":                func(t *testing.T) string { return withSecrets(newScript(t, response{code: 400}).srv.URL) },
		"503":                func(t *testing.T) string { return withSecrets(newScript(t, response{code: 503}).srv.URL) },
		"connection refused": func(t *testing.T) string { return withSecrets(closedURL(t)) },
		"bad url from file":  func(t *testing.T) string { return "http://[::1%SECRETPATH/FILESECRET" },
	}
	integrations := map[string]func(url notify.Secret) notify.Notifier{
		"webhook": func(u notify.Secret) notify.Notifier {
			return notify.NewWebhook(u, notify.NewSecret("TOKENSECRET"), notify.NewClient(time.Second))
		},
		"slack": func(u notify.Secret) notify.Notifier { return notify.NewSlack(u, notify.NewClient(time.Second)) },
		"alertmanager": func(u notify.Secret) notify.Notifier {
			return notify.NewAlertmanager(u, notify.NewSecret("TOKENSECRET"), time.Minute, time.Now, notify.NewClient(time.Second))
		},
	}
	for fname, mk := range failures {
		for iname, integ := range integrations {
			t.Run(fname+"/"+iname, func(t *testing.T) {
				u := mk(t)
				if err := os.WriteFile(file+fname+iname, []byte(u+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				for _, sec := range []notify.Secret{notify.NewSecret(u), notify.SecretFile(file + fname + iname)} {
					r := notify.Retrier{MaxAttempts: 2, Sleep: func(context.Context, time.Duration) error { return nil }}
					_, err := r.Do(context.Background(), integ(sec), sample)
					if err == nil {
						t.Fatal("no error")
					}
					for _, s := range secrets {
						if strings.Contains(err.Error(), s) {
							t.Errorf("error shows secret %s: %s", s, err)
						}
					}
				}
			})
		}
	}
	// A missing secret file is named, and nothing of what it should hold is shown.
	_, err := notify.NewSlack(notify.SecretFile(filepath.Join(t.TempDir(), "missing")), notify.NewClient(time.Second)).Notify(context.Background(), sample)
	if err == nil || !strings.Contains(err.Error(), "read secret file") {
		t.Errorf("missing file: %v", err)
	}
	if got := notify.NewSecret("x").String(); got != "<secret>" {
		t.Errorf("secret prints %q", got)
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"https://hooks.slack.com/services/T000/B000/XXX": "https://hooks.slack.com/<redacted>", // path is the secret
		"http://127.0.0.1:9093":                          "http://127.0.0.1:9093",              // nothing to hide
		"http://u:p@am.internal:9093":                    "http://am.internal:9093/<redacted>", // credentials hidden
		"https://x.example/?token=abc":                   "https://x.example/<redacted>",       // query hidden
		"not a url at all":                               "<redacted>",                         // unparseable: nothing shown
	}
	for in, want := range cases {
		if got := notify.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
