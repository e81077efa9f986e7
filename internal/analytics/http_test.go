package analytics_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/internal/server"
)

// api serves the analytics routes of a ledger the way ledgerd mounts them, behind API keys.
type api struct {
	t    *testing.T
	url  string
	keyA string
	keyB string
}

// newAPI serves summaryLedger (project acme, key A) plus a project beta (key B) with one call of
// its own, priced $1, on a model acme never used.
func newAPI(t *testing.T) *api {
	t.Helper()
	ctx := context.Background()
	l, _ := summaryLedger(t)
	beta := l.project("beta")
	l.add(beta, newRec(day(2026, 10, 5, 11, time.UTC), "haiku").service("billing", "invoice").tokens(10_000_000, 0).done())
	now := day(2026, 10, 6, 12, time.UTC)
	srv := server.New(server.Options{Store: l.st, Writer: l.w, Registry: prometheus.NewRegistry(),
		Now: func() time.Time { return now }})
	l.service(now).Mount(srv)
	hs := httptest.NewServer(srv.Echo)
	t.Cleanup(hs.Close)
	a := &api{t: t, url: hs.URL}
	var err error
	if a.keyA, err = l.st.CreateKey(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if a.keyB, err = l.st.CreateKey(ctx, "beta"); err != nil {
		t.Fatal(err)
	}
	return a
}

// get returns the status and decoded JSON body of GET path with key.
func (a *api) get(key, path string) (int, map[string]any) {
	a.t.Helper()
	req, err := http.NewRequest(http.MethodGet, a.url+path, nil)
	if err != nil {
		a.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		a.t.Fatalf("GET %s: %d %s: %v", path, resp.StatusCode, b, err)
	}
	return resp.StatusCode, body
}

// TestSummaryHTTP checks the JSON of GET /v1/summary: money as decimal strings, null for an
// all-unpriced cost, fallback groups apart, the effective range echoed, and each project seeing
// only its own attempts.
func TestSummaryHTTP(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	code, body := a.get(a.keyA, "/v1/summary?from=2026-10-05&to=2026-10-06&group_by=model")
	if code != http.StatusOK {
		t.Fatalf("status %d: %v", code, body)
	}
	if body["from"] != "2026-10-05T00:00:00Z" || body["to"] != "2026-10-06T00:00:00Z" || body["timezone"] != "UTC" {
		t.Errorf("range %v to %v in %v", body["from"], body["to"], body["timezone"])
	}
	total := body["total"].(map[string]any)
	if total["cost_usd"] != "0.000595000" || total["wasted_usd"] != "0.000095000" || total["attempts"] != 8.0 {
		t.Errorf("total %v", total)
	}
	var keys []string
	for _, g := range body["groups"].([]any) {
		g := g.(map[string]any)
		k, _ := json.Marshal(g["key"])
		keys = append(keys, string(k))
		if g["key"].(map[string]any)["model"] == "free-model" && g["cost_usd"] != nil {
			t.Errorf("all-unpriced group has cost_usd %v, want null", g["cost_usd"])
		}
		if lat, ok := g["latency_ms"].(map[string]any); !ok || lat["p95"] == nil {
			t.Errorf("group %s has latency_ms %v", k, g["latency_ms"])
		}
	}
	wantKeys := []string{`{"fallback":false,"model":"free-model"}`, // (re-encoded: sorted keys)
		`{"fallback":true,"fallback_from":"sonnet","model":"gpt-4o"}`, `{"fallback":false,"model":"sonnet"}`}
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("group keys %v, want %v", keys, wantKeys)
	}

	// Project beta sees its own call and nothing of acme's.
	code, body = a.get(a.keyB, "/v1/summary?from=2026-10-05&to=2026-10-06&group_by=model,service")
	if code != http.StatusOK {
		t.Fatalf("status %d: %v", code, body)
	}
	groups := body["groups"].([]any)
	total = body["total"].(map[string]any)
	if len(groups) != 1 || total["attempts"] != 1.0 || total["cost_usd"] != "1.000000000" {
		t.Errorf("beta sees %v groups, total %v", len(groups), total)
	}
	if k, _ := json.Marshal(groups[0].(map[string]any)["key"]); string(k) != `{"fallback":false,"model":"haiku","service":"billing"}` {
		t.Errorf("beta's group %s", k)
	}
}

// TestEndpointsHTTP checks the projection and cache endpoints answer for the key's project only.
func TestEndpointsHTTP(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	cases := []struct {
		name  string
		key   string
		path  string
		check func(map[string]any) bool
	}{
		// acme spent $0.000595 in October, of which nothing today.
		{"projection acme", a.keyA, "/v1/projection?month=2026-10", func(b map[string]any) bool {
			return b["month_to_date_usd"] == "0.000595000" && b["month"] == "2026-10" && b["budget_usd"] == nil
		}},
		// beta's own $1, nothing of acme's.
		{"projection beta", a.keyB, "/v1/projection", func(b map[string]any) bool {
			return b["month_to_date_usd"] == "1.000000000"
		}},
		// acme's cache rows: sonnet wrote and read (one aggregate row, healthy).
		{"cache acme", a.keyA, "/v1/cache?from=2026-10-05&to=2026-10-06", func(b map[string]any) bool {
			rows := b["rows"].([]any)
			return len(rows) == 1 && rows[0].(map[string]any)["model"] == "sonnet" && b["min_calls"] == 10.0
		}},
		// beta never used the cache.
		{"cache beta", a.keyB, "/v1/cache?from=2026-10-05&to=2026-10-06", func(b map[string]any) bool {
			return len(b["rows"].([]any)) == 0
		}},
		// Minutes at a 5-minute step: acme's attempts all began at 10:00, in one group; with
		// attempts=true each group says its calls by number of attempts.
		{"summary by minute", a.keyA, "/v1/summary?group_by=minute&step=5m&attempts=true&from=2026-10-05T10:00:00Z&to=2026-10-05T11:00:00Z",
			func(b map[string]any) bool {
				g := b["groups"].([]any)
				return len(g) == 1 && g[0].(map[string]any)["key"].(map[string]any)["minute"] == "2026-10-05T10:00:00Z" &&
					g[0].(map[string]any)["calls_by_attempts"] != nil
			}},
		// No incident in acme's quiet ledger; the answer echoes its range.
		{"incidents acme", a.keyA, "/v1/incidents?from=2026-10-05&to=2026-10-06", func(b map[string]any) bool {
			return len(b["incidents"].([]any)) == 0 && b["from"] == "2026-10-05T00:00:00Z"
		}},
		{"open incidents acme", a.keyA, "/v1/incidents?open=true&from=2026-10-05&to=2026-10-06", func(b map[string]any) bool {
			return len(b["incidents"].([]any)) == 0 && b["from"] == "2026-10-05T00:00:00Z"
		}},
	}
	for _, c := range cases {
		code, body := a.get(c.key, c.path)
		if code != http.StatusOK || !c.check(body) {
			t.Errorf("%s: %d %v", c.name, code, body)
		}
	}
}

// TestBadParametersHTTP checks that every bad parameter is answered 400 naming it, and a request
// without a key 401.
func TestBadParametersHTTP(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	cases := []struct {
		path  string
		code  int
		param string // the error message starts with it
	}{
		{"/v1/summary?group_by=colour", 400, "group_by"},                    // unknown dimension
		{"/v1/summary?group_by=day,hour", 400, "group_by"},                  // exclusive dimensions
		{"/v1/summary?from=yesterday", 400, "from"},                         // unreadable time
		{"/v1/summary?from=2026-10-05&to=2026-10-04", 400, "to"},            // backwards
		{"/v1/summary?from=2026-10-05&from=2026-10-06", 400, "from"},        // repeated
		{"/v1/summary?colour=red", 400, "colour"},                           // unknown parameter
		{"/v1/summary?service=" + strings.Repeat("x", 129), 400, "service"}, // too long
		{"/v1/projection?month=2026-13", 400, "month"},                      // no such month
		{"/v1/projection?month=2027-01", 400, "month"},                      // not begun
		{"/v1/projection?from=2026-10-01", 400, "from"},                     // not a projection parameter
		{"/v1/cache?min_calls=0", 400, "min_calls"},                         // below 1
		{"/v1/cache?min_calls=ten", 400, "min_calls"},                       // not a number
		{"/v1/cache?to=2026-10-05T00:00:00", 400, "to"},                     // no offset
		{"/v1/summary?group_by=minute&step=2m", 400, "step"},                // only 1m or 5m
		{"/v1/summary?group_by=hour&step=5m", 400, "step"},                  // step is for minutes
		{"/v1/summary?attempts=maybe", 400, "attempts"},                     // not a boolean
		{"/v1/incidents?from=2026-01-01&to=2026-03-01", 400, "from"},        // longer than 31 days
		{"/v1/incidents?group_by=day", 400, "group_by"},                     // not an incidents parameter
		{"/v1/incidents?open=now", 400, "open"},                             // not a boolean
	}
	for _, c := range cases {
		code, body := a.get(a.keyA, c.path)
		msg, _ := body["error"].(string)
		if code != c.code || !strings.HasPrefix(msg, c.param+":") {
			t.Errorf("GET %s: %d %q, want %d naming %s", c.path, code, msg, c.code, c.param)
		}
	}
	// Every bad parameter of one request is named in its one answer, not only the first.
	code, body := a.get(a.keyA, "/v1/summary?from=yesterday&to=soon&colour=red&group_by=colour&service="+strings.Repeat("x", 129))
	msg, _ := body["error"].(string)
	for _, p := range []string{"colour: unknown parameter", "from: ", "to: ", "service: longer", "group_by: unknown dimension"} {
		if code != 400 || !strings.Contains(msg, p) {
			t.Errorf("GET /v1/summary with five bad parameters: %d %q, want 400 naming %q", code, msg, p)
		}
	}
	for _, path := range []string{"/v1/summary", "/v1/projection", "/v1/cache", "/v1/incidents"} {
		if code, _ := a.get("", path); code != http.StatusUnauthorized {
			t.Errorf("GET %s without a key: %d, want 401", path, code)
		}
	}
}
