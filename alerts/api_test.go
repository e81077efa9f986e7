package alerts_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ledgerd/ledgerd/alerts"
	"github.com/ledgerd/ledgerd/internal/server"
)

// apiServer serves the evaluator's routes behind the real API-key middleware.
func apiServer(t *testing.T, l *ledger, ev *alerts.Evaluator, reg *prometheus.Registry) string {
	t.Helper()
	srv := server.New(server.Options{Store: l.st, Registry: reg})
	ev.Mount(srv)
	hs := httptest.NewServer(srv.Echo)
	t.Cleanup(hs.Close)
	return hs.URL
}

func get(t *testing.T, url, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestListAlerts checks GET /v1/alerts: authenticated, scoped to the key's project, listing
// current alerts (pending and firing), the history, and receivers by name only.
func TestListAlerts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger(t, time.UTC)
	h := newHook(t)
	clk := newClock(t0)
	other, err := l.st.EnsureProject(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	// acme's cache is broken; other's retry storm is pending under a 10-minute `for`.
	l.add(t, l.project, cacheWrites(12, false)(t0.Add(-10*time.Minute))...)
	l.add(t, other, retries(20, 3, t0.Add(-5*time.Minute), "")...)
	reg := prometheus.NewRegistry()
	ev := l.evaluator(t, cfgWith("alerts:\n  interval: 1h\n  rules:\n"+
		"    - {name: cache-broken, kind: cache_broken, window: 1h, min_calls: 10}\n"+
		"    - {name: retry-storm, kind: attempts_per_call, for: 10m}\n"+
		"receivers:\n  - {name: ops, webhook: {url: \"%s/T000/SECRET\"}}\n", h.srv.URL), clk)
	base := apiServer(t, l, ev, reg)
	run(t, ev)
	acmeKey, err := l.st.CreateKey(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	otherKey, err := l.st.CreateKey(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name     string
		path     string
		key      string
		code     int
		alerts   []string // rule:state of each alert listed
		history  []string // rule:status of each history entry
		contains []string
	}{
		// Guards authentication.
		{name: "no key", path: "/v1/alerts", code: 401},
		// Guards project scoping: acme sees its firing cache alert, not other's storm.
		{name: "acme", path: "/v1/alerts", key: acmeKey, code: 200, alerts: []string{"cache-broken:firing"},
			history: []string{"cache-broken:firing"}, contains: []string{`"name":"ops"`, `"kind":"webhook"`, `"sent":1`}},
		// Guards pending alerts being listed (they notify no one yet) and history staying empty.
		{name: "other", path: "/v1/alerts", key: otherKey, code: 200, alerts: []string{"retry-storm:pending"}, history: []string{}},
		// Guards the limit parameter.
		{name: "bad limit", path: "/v1/alerts?limit=0", key: acmeKey, code: 400, contains: []string{"limit must be"}},
		{name: "limit", path: "/v1/alerts?limit=1", key: acmeKey, code: 200, alerts: []string{"cache-broken:firing"},
			history: []string{"cache-broken:firing"}},
	}
	for _, c := range cases {
		code, body := get(t, base+c.path, c.key)
		if code != c.code {
			t.Errorf("%s: status %d, want %d: %s", c.name, code, c.code, body)
			continue
		}
		for _, s := range c.contains {
			if !strings.Contains(body, s) {
				t.Errorf("%s: body lacks %s: %s", c.name, s, body)
			}
		}
		// Receivers are shown by name and kind: never their URL.
		if strings.Contains(body, "SECRET") || strings.Contains(body, h.srv.URL) {
			t.Errorf("%s: body shows a receiver URL: %s", c.name, body)
		}
		if code != 200 {
			continue
		}
		var resp alerts.ListResponse
		if err := json.Unmarshal([]byte(body), &resp); err != nil {
			t.Fatal(err)
		}
		var got, hist []string
		for _, a := range resp.Alerts {
			got = append(got, a.Rule+":"+a.State)
		}
		hist = []string{}
		for _, e := range resp.History {
			hist = append(hist, e.Rule+":"+e.Status)
		}
		if strings.Join(got, ",") != strings.Join(c.alerts, ",") || strings.Join(hist, ",") != strings.Join(c.history, ",") {
			t.Errorf("%s: alerts %v history %v, want %v %v", c.name, got, hist, c.alerts, c.history)
		}
		if len(resp.Receivers) != 1 || resp.Receivers[0].Name != "ops" {
			t.Errorf("%s: receivers %+v", c.name, resp.Receivers)
		}
	}
}

// TestSecretsNeverShown checks that failing receivers whose URLs and tokens are secrets leave no
// trace of them in logs, in the receiver status stored and shown, or in metrics.
func TestSecretsNeverShown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger(t, time.UTC)
	clk := newClock(t0)
	l.add(t, l.project, cacheWrites(12, false)(t0.Add(-10*time.Minute))...)
	rejecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad token "+r.URL.Path, http.StatusBadRequest) // echoes the secret back
	}))
	defer rejecting.Close()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	cfg := "alerts:\n  interval: 1h\n  rules:\n    - {name: cache-broken, kind: cache_broken}\n" +
		"receivers:\n" +
		"  - {name: ops, webhook: {url: \"" + rejecting.URL + "/hook/SECRET1?key=SECRET2\", bearer_token: SECRET3}}\n" +
		"  - {name: chat, slack: {url: \"" + strings.Replace(failing.URL, "http://", "http://user:SECRET4@", 1) + "/services/T/B/SECRET5\"}, max_attempts: 2}\n" +
		"  - {name: am, alertmanager: {url: \"" + closed + "/SECRET6\", bearer_token: SECRET7}, max_attempts: 2}\n"
	var logs logBuffer
	reg := prometheus.NewRegistry()
	ev := l.evaluator(t, cfg, clk, func(o *alerts.Options) { o.Logger = logs.logger(); o.Registerer = reg })
	base := apiServer(t, l, ev, prometheus.NewRegistry())
	run(t, ev)
	key, err := l.st.CreateKey(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	_, body := get(t, base+"/v1/alerts", key)
	var stored strings.Builder
	rows, err := l.st.Pool.Query(ctx, `SELECT name || ' ' || last_error FROM alert_receivers ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		stored.WriteString(s + "\n")
	}
	rows.Close()
	metrics, err := testutil.GatherAndCount(reg)
	if err != nil || metrics == 0 {
		t.Fatalf("metrics: %d, %v", metrics, err)
	}
	mfs, _ := reg.Gather()
	var metricText strings.Builder
	for _, mf := range mfs {
		metricText.WriteString(mf.String())
	}
	// Every receiver failed, and says so without its secret.
	for _, want := range []string{"am gave up after 2 attempts: post to " + closed + "/<redacted>: dial tcp", "chat gave up after 2 attempts", "ops post to " + rejecting.URL + "/<redacted>: HTTP 400"} {
		if !strings.Contains(stored.String(), want) {
			t.Errorf("stored receiver status lacks %q:\n%s", want, stored.String())
		}
	}
	for where, text := range map[string]string{"logs": logs.String(), "API": body, "receiver status": stored.String(), "metrics": metricText.String()} {
		for i := 1; i <= 7; i++ {
			secret := "SECRET" + string(rune('0'+i))
			if strings.Contains(text, secret) {
				t.Errorf("%s show %s:\n%s", where, secret, text)
			}
		}
	}
}
