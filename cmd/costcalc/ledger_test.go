package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/internal/app"
	"github.com/ledgerd/ledgerd/internal/apptest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/money"
)

// fixtureRecords is a week of traffic up to testNow, the one testdata/summary.json records:
//   - ticket-router on Claude Haiku 5.5: 280 calls of 333 input and 9 output tokens, every tenth
//     preceded by a rate-limited attempt (28 more attempts, no tokens);
//   - summarizer on Claude Sonnet 5.5: 70 calls of 2,000 input, 400 output and 3,856 cached
//     tokens (read, or written on every tenth call);
//   - contracts on Claude Sonnet 5.5: 14 long calls of 150,000 input and 2,000 output tokens;
//   - GPT-4o standing in for Claude Sonnet 5.5: 7 calls of 5,856 input and 350 output tokens;
//   - an in-house model ledgerd has no price for: 21 calls of 800 input and 200 output tokens.
func fixtureRecords() []map[string]any {
	from := testNow().Add(-7 * 24 * time.Hour)
	var out []map[string]any
	add := func(id string, at time.Time, no int, provider, model, service, status string, fields map[string]any) {
		r := map[string]any{"attempt_id": id, "request_id": "r-" + strings.TrimSuffix(id, "-retry"), "attempt_no": no,
			"started_at": at.Format(time.RFC3339Nano), "latency_ms": 800, "provider": provider, "model": model,
			"service": service, "status": status}
		if status == "error" {
			r["error_class"] = "rate_limited"
		}
		for k, v := range fields {
			r[k] = v
		}
		out = append(out, r)
	}
	for i := range 280 {
		at := from.Add(time.Duration(i) * 36 * time.Minute)
		no := 1
		if i%10 == 0 {
			add(fmt.Sprintf("router-%d", i), at, 1, "anthropic", "claude-haiku-5-5", "ticket-router", "error", nil)
			no = 2
		}
		add(fmt.Sprintf("router-%d-ok", i), at.Add(2*time.Second), no, "anthropic", "claude-haiku-5-5", "ticket-router", "ok",
			map[string]any{"input_tokens": 333, "output_tokens": 9})
	}
	for i := range 70 {
		f := map[string]any{"input_tokens": 2000, "output_tokens": 400, "cache_read_tokens": 3856}
		if i%10 == 0 {
			f = map[string]any{"input_tokens": 2000, "output_tokens": 400, "cache_write_tokens": 3856}
		}
		add(fmt.Sprintf("sum-%d", i), from.Add(time.Duration(i)*144*time.Minute+time.Minute), 1, "anthropic", "claude-sonnet-5-5", "summarizer", "ok", f)
	}
	for i := range 14 {
		add(fmt.Sprintf("contract-%d", i), from.Add(time.Duration(i)*12*time.Hour+2*time.Minute), 1, "anthropic", "claude-sonnet-5-5", "contracts", "ok",
			map[string]any{"input_tokens": 150000, "output_tokens": 2000})
	}
	for i := range 7 {
		add(fmt.Sprintf("fallback-%d", i), from.Add(time.Duration(i)*24*time.Hour+3*time.Minute), 1, "openai", "gpt-4o", "summarizer", "ok",
			map[string]any{"input_tokens": 5856, "output_tokens": 350, "fallback": true, "fallback_from": "claude-sonnet-5-5"})
	}
	for i := range 21 {
		add(fmt.Sprintf("inhouse-%d", i), from.Add(time.Duration(i)*8*time.Hour+4*time.Minute), 1, "acme", "in-house-7b", "tagger", "ok",
			map[string]any{"input_tokens": 800, "output_tokens": 200})
	}
	return out
}

// summaryServer serves testdata/summary.json as ledgerd would, for key "ldg_test", and checks
// the question it is asked.
func summaryServer(t *testing.T) *httptest.Server {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer ldg_test" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"invalid API key"}`))
			return
		}
		q := r.URL.Query()
		if r.URL.Path != "/v1/summary" || q.Get("from") != "2026-11-22T12:00:00Z" || q.Get("to") != "2026-11-29T12:00:00Z" ||
			q.Get("group_by") != "provider,model" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":"unexpected question %s"}`, r.URL)
			return
		}
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestLedgerGolden(t *testing.T) {
	t.Parallel()
	srv := summaryServer(t)
	env := map[string]string{"LEDGERD_URL": srv.URL, "LEDGERD_KEY": "ldg_test"}
	cases := []struct {
		golden string
		args   []string
	}{
		// the week's cost per model and projected over a month
		{"ledger.golden", []string{"ledger"}},
		// the same traffic on Claude Sonnet 5.5, over a 30.5-day month
		{"ledger-sonnet.golden", []string{"ledger", "--as-model", "claude-sonnet-5-5", "--days-per-month", "30.5"}},
		// on Claude Haiku 5.5, whose long-context tier the contracts' average stays under, as JSON
		{"ledger-haiku.json.golden", []string{"ledger", "--as-model", "claude-haiku-5-5", "--json"}},
	}
	for _, tc := range cases {
		t.Run(tc.golden, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runTest(t, env, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			checkGolden(t, tc.golden, strings.ReplaceAll(stdout, srv.URL, "http://ledgerd.test"))
		})
	}
}

// checkGolden compares out with testdata/name, or rewrites it under -update.
func checkGolden(t *testing.T, name, out string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if out != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, out, want)
	}
}

func TestLedgerErrors(t *testing.T) {
	t.Parallel()
	srv := summaryServer(t)
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"from":"2026-11-22T12:00:00Z","to":"2026-11-29T12:00:00Z","total":{"attempts":-1},"groups":[]}`))
	}))
	t.Cleanup(broken.Close)
	cases := []struct {
		name   string
		env    map[string]string
		args   []string
		code   int
		stderr string // a substring of stderr
	}{
		// a key is required
		{"no key", nil, []string{"ledger", "--url", srv.URL}, 2, "needs --key"},
		// a refused key is reported with ledgerd's message, never echoed
		{"bad key", nil, []string{"ledger", "--url", srv.URL, "--key", "ldg_secret"}, 1, "401 Unauthorized: invalid API key"},
		// --since takes days or hours
		{"bad since", nil, []string{"ledger", "--key", "k", "--since", "a week"}, 2, "--since"},
		// and whole hours only
		{"partial hour", nil, []string{"ledger", "--key", "k", "--since", "90m"}, 2, "whole number of hours"},
		// an unknown model to re-price on is bad usage, with suggestions
		{"unknown model", nil, []string{"ledger", "--url", srv.URL, "--key", "ldg_test", "--as-model", "claude-sonet-5-5"}, 2, "did you mean"},
		// a URL that is not http(s)
		{"bad url", nil, []string{"ledger", "--url", "ftp://x", "--key", "k"}, 2, "not an http(s) URL"},
		// nobody listening
		{"down", nil, []string{"ledger", "--url", "http://127.0.0.1:1", "--key", "k"}, 1, "ask ledgerd at http://127.0.0.1:1/v1/summary"},
		// an answer no ledger could give is refused
		{"bad answer", nil, []string{"ledger", "--url", broken.URL, "--key", "k"}, 1, "negative count"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runTest(t, tc.env, tc.args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) || strings.Contains(stderr, "ldg_secret") {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s\nwant stderr containing %q", code, tc.code, stdout, stderr, tc.stderr)
			}
		})
	}
}

// FuzzDecodeSummary feeds arbitrary answers to the summary decoder and projects what it accepts:
// neither may panic (amounts too large to scale are errors).
func FuzzDecodeSummary(f *testing.F) {
	body, err := os.ReadFile(filepath.Join("testdata", "summary.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(body)
	f.Add([]byte(`{"from":"2026-11-22T12:00:00Z","to":"2026-11-29T12:00:00Z","total":{},"groups":[{"key":{"model":"x"}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decodeSummary(bytes.NewReader(data))
		if err != nil {
			return
		}
		if _, err := project(s, nil, "", time.Time{}, big.NewRat(30, 1)); err != nil && !errors.Is(err, money.ErrRange) {
			t.Fatalf("accepted answer does not project: %v", err)
		}
	})
}

var record = flag.Bool("record", false, "rewrite testdata/summary.json from a live in-process ledgerd")

// TestLedgerLive posts the fixture traffic to a real ledgerd running in-process and checks that
// costcalc ledger prints from its live answer exactly what the golden files hold, which
// TestLedgerGolden produces from testdata/summary.json: the recording is the live answer.
func TestLedgerLive(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	key, err := store.New(pool).CreateKey(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	base := apptest.Start(t, app.Options{DatabaseURL: dbURL, Now: testNow})
	body, err := json.Marshal(fixtureRecords())
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/attempts", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("ingest: %s", resp.Status)
	}
	if *record {
		req, _ := http.NewRequest(http.MethodGet, base+"/v1/summary?from=2026-11-22T12:00:00Z&to=2026-11-29T12:00:00Z&group_by=provider,model", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("summary: %s %v", resp.Status, err)
		}
		if err := os.WriteFile(filepath.Join("testdata", "summary.json"), answer, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"LEDGERD_URL": base, "LEDGERD_KEY": key}
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"ledger.golden", []string{"ledger"}},
		{"ledger-sonnet.golden", []string{"ledger", "--as-model", "claude-sonnet-5-5", "--days-per-month", "30.5"}},
		{"ledger-haiku.json.golden", []string{"ledger", "--as-model", "claude-haiku-5-5", "--json"}},
	} {
		code, stdout, stderr := runTest(t, env, tc.args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.golden, code, stderr)
		}
		want, err := os.ReadFile(filepath.Join("testdata", tc.golden))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.ReplaceAll(stdout, base, "http://ledgerd.test"); got != string(want) {
			t.Errorf("%s: the live answer prints\n%s\nwant\n%s", tc.golden, got, want)
		}
	}
}
