package analytics_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/app"
	"github.com/ledgerd/ledgerd/internal/apptest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/pricing"
)

// serve runs the whole service on a fresh database until the test ends and returns its URL and an
// API key of project "acme".
func serve(t *testing.T, now time.Time) (string, string) {
	t.Helper()
	dbURL := dbtest.NewURL(t)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	key, err := store.New(pool).CreateKey(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	return apptest.Start(t, app.Options{DatabaseURL: dbURL, Timezone: zone, Now: func() time.Time { return now }}), key
}

func call(t *testing.T, method, url, key string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, r)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestAPI drives GET /v1/prices and GET /v1/cost-mismatches through a running ledgerd.
func TestAPI(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 3, 12, 0, 0, 0, time.UTC)
	url, key := serve(t, now)
	at := "2026-11-02T09:00:00Z"
	recs := []map[string]any{
		{"attempt_id": "a", "request_id": "a", "attempt_no": 1, "started_at": at, "latency_ms": 900, "provider": "anthropic",
			"model": "claude-haiku-5-5", "service": "router", "status": "ok", "input_tokens": 333, "output_tokens": 9, "cost_usd": "0.0001"},
		{"attempt_id": "b", "request_id": "b", "attempt_no": 1, "started_at": at, "latency_ms": 900, "provider": "anthropic",
			"model": "claude-haiku-9", "service": "router", "status": "ok", "input_tokens": 333, "output_tokens": 9},
	}
	if code, body := call(t, http.MethodPost, url+"/v1/attempts", key, recs); code != http.StatusOK {
		t.Fatalf("ingest: %d %s", code, body)
	}

	// The catalog in force, loadable as a price file, and the model it could not price.
	code, body := call(t, http.MethodGet, url+"/v1/prices", key, nil)
	if code != http.StatusOK {
		t.Fatalf("prices: %d %s", code, body)
	}
	var listing struct {
		Models   []json.RawMessage         `json:"models"`
		Unpriced []analytics.UnpricedModel `json:"unpriced"`
	}
	if err := json.Unmarshal(body, &listing); err != nil {
		t.Fatal(err)
	}
	embedded, err := pricing.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if len(listing.Models) != len(embedded.Models()) {
		t.Errorf("%d models listed, the catalog has %d", len(listing.Models), len(embedded.Models()))
	}
	if len(listing.Unpriced) != 1 || listing.Unpriced[0].Model != "claude-haiku-9" || listing.Unpriced[0].Attempts != 1 ||
		listing.Unpriced[0].FirstSeen != "2026-11-02" || listing.Unpriced[0].InCatalog {
		t.Errorf("unpriced: %+v", listing.Unpriced)
	}
	if !bytes.Contains(body, []byte(`"input_per_mtok":"0.100000000"`)) {
		t.Errorf("rates are not decimal strings: %.300s", body)
	}
	file := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(file, body, 0o644); err != nil {
		t.Fatal(err)
	}
	reloaded, err := pricing.Load(file)
	if err != nil {
		t.Fatalf("GET /v1/prices does not load as a price file: %v", err)
	}
	if got, want := reloaded.Versions(), embedded.Versions(); len(got) != len(want) || got[0].Key != want[0].Key {
		t.Errorf("reloaded catalog has %d versions, want %d", len(got), len(want))
	}

	// The client said $0.0001 for a call ledgerd prices at $0.0000378.
	code, body = call(t, http.MethodGet, url+"/v1/cost-mismatches?from=2026-11-02&to=2026-11-03", key, nil)
	if code != http.StatusOK {
		t.Fatalf("cost-mismatches: %d %s", code, body)
	}
	want := `{"from":"2026-11-02T05:00:00Z","to":"2026-11-03T05:00:00Z","mismatches":[{"service":"router","provider":"anthropic",` +
		`"model":"claude-haiku-5-5","compared_attempts":1,"mismatched_attempts":1,"client_cost_usd":"0.000100000",` +
		`"ledger_cost_usd":"0.000037800","difference_usd":"0.000062200","abs_difference_usd":"0.000062200","example_attempt_id":"a"}]}` + "\n"
	if string(body) != want {
		t.Errorf("cost-mismatches:\n got %s\nwant %s", body, want)
	}

	// Without a range: the last 7 local days, today (2026-11-03 in New York) included.
	code, body = call(t, http.MethodGet, url+"/v1/cost-mismatches", key, nil)
	if wantRange := `{"from":"2026-10-28T04:00:00Z","to":"2026-11-04T05:00:00Z","mismatches":[{"service":"router"`; code != http.StatusOK ||
		!bytes.HasPrefix(body, []byte(wantRange)) {
		t.Errorf("default range: %d %s", code, body)
	}

	for _, c := range []struct {
		name, path, key string
		code            int
	}{
		{"no key", "/v1/prices", "", http.StatusUnauthorized},                                                     // behind a project key
		{"bad date", "/v1/cost-mismatches?from=yesterday&to=2026-11-03", key, http.StatusBadRequest},              // neither a date nor RFC 3339
		{"reversed", "/v1/cost-mismatches?from=2026-11-03&to=2026-11-02", key, http.StatusBadRequest},             // empty range
		{"too long", "/v1/cost-mismatches?from=2026-09-01&to=2026-11-03", key, http.StatusBadRequest},             // more than 31 days of raw rows
		{"rfc 3339", "/v1/cost-mismatches?from=2026-11-02T00:00:00Z&to=2026-11-02T01:00:00Z", key, http.StatusOK}, // times work too
	} {
		code, body := call(t, http.MethodGet, url+c.path, c.key, nil)
		if code != c.code {
			t.Errorf("%s: %d %s, want %d", c.name, code, body, c.code)
		}
		if code != http.StatusOK && !bytes.HasPrefix(body, []byte(`{"error":`)) {
			t.Errorf("%s: error body %s", c.name, body)
		}
	}
}
