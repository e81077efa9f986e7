package server_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/server"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/pricing"
	"github.com/ledgerd/ledgerd/schema"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func record(id string) string {
	return fmt.Sprintf(`{"attempt_id":%q,"request_id":"r-%s","attempt_no":1,"started_at":"2026-11-29T10:00:00Z","latency_ms":800,"provider":"anthropic","model":"claude-haiku-5-5","service":"router","status":"ok","input_tokens":333,"output_tokens":9}`, id, id)
}

type fixture struct {
	srv    *httptest.Server
	st     *store.Store
	writer *ingest.Writer
	keyA   string
	keyB   string
}

func newFixture(t *testing.T, maxBody int64) *fixture {
	return newFixtureWith(t, server.Options{MaxBodyBytes: maxBody})
}

func newFixtureWith(t *testing.T, opt server.Options) *fixture {
	t.Helper()
	ctx := context.Background()
	st := store.New(dbtest.New(t))
	reg := prometheus.NewRegistry()
	w := ingest.NewWriter(st, func(*schema.Attempt) ingest.Costing { return ingest.Costing{} }, ingest.Options{Registerer: reg})
	opt.Store, opt.Writer, opt.Registry, opt.Now = st, w, reg, func() time.Time { return now }
	s := server.New(opt)
	hs := httptest.NewServer(s.Echo)
	t.Cleanup(func() { hs.Close(); _ = w.Close(context.Background()) })
	keyA, err := st.CreateKey(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	keyB, err := st.CreateKey(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{srv: hs, st: st, writer: w, keyA: keyA, keyB: keyB}
}

// metrics returns the server's /metrics page.
func (f *fixture) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get(f.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func (f *fixture) post(t *testing.T, key, ctype, encoding string, body []byte) (int, http.Header, schema.IngestResponse) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/v1/attempts", bytes.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out schema.IngestResponse
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, resp.Header, out
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// TestIngestHTTP covers each answer of POST /v1/attempts.
func TestIngestHTTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 64<<10)
	bomb := gz(bytes.Repeat([]byte(" "), 1<<20))
	cases := []struct {
		name       string
		key        string
		ctype, enc string
		body       []byte
		status     int
		accepted   int
		dups       int
		rejected   []int
		errContain string
	}{
		{"no key", "", "", "", []byte(record("x1")), 401, 0, 0, nil, "missing API key"},
		{"wrong key", "ldg_nope", "", "", []byte(record("x1")), 401, 0, 0, nil, "invalid"},
		{"one object", f.keyA, "application/json", "", []byte(record("a1")), 200, 1, 0, nil, ""},
		{"same object again counts as duplicate", f.keyA, "", "", []byte(record("a1")), 200, 0, 1, nil, ""},
		{"array with one bad record", f.keyA, "application/json", "", []byte("[" + record("a2") + `,{"prompt":"hi"},` + record("a3") + "]"), 200, 2, 0, []int{1}, ""},
		{"ndjson", f.keyA, "application/x-ndjson", "", []byte(record("a4") + "\n" + record("a5") + "\n"), 200, 2, 0, nil, ""},
		{"gzip", f.keyA, "application/json", "gzip", gz([]byte(record("a6"))), 200, 1, 0, nil, ""},
		{"every record refused", f.keyA, "", "", []byte(`[{"messages":[]}]`), 400, 0, 0, []int{0}, "every record"},
		{"unparseable", f.keyA, "", "", []byte(`{"attempt_id": `), 400, 0, 0, nil, "unparseable"},
		{"too large", f.keyA, "", "", []byte("[" + strings.Repeat(record("big")+",", 300) + record("big") + "]"), 413, 0, 0, nil, "larger than"},
		{"gzip bomb", f.keyA, "", "gzip", bomb, 413, 0, 0, nil, "larger than"},
		{"broken gzip", f.keyA, "", "gzip", []byte("not gzip"), 400, 0, 0, nil, "gzip"},
		{"wrong content type", f.keyA, "text/plain", "", []byte(record("a7")), 415, 0, 0, nil, "Content-Type"},
		{"other project's record ids are its own", f.keyB, "", "", []byte(record("a1")), 200, 1, 0, nil, ""},
	}
	for _, c := range cases {
		status, _, resp := f.post(t, c.key, c.ctype, c.enc, c.body)
		if status != c.status || resp.Accepted != c.accepted || resp.Duplicates != c.dups {
			t.Errorf("%s: status %d accepted %d dups %d (%+v); want %d %d %d", c.name, status, resp.Accepted, resp.Duplicates, resp, c.status, c.accepted, c.dups)
			continue
		}
		var idx []int
		for _, r := range resp.Rejected {
			idx = append(idx, r.Index)
		}
		if fmt.Sprint(idx) != fmt.Sprint(c.rejected) {
			t.Errorf("%s: rejected %v, want %v", c.name, idx, c.rejected)
		}
		if c.errContain != "" && !strings.Contains(resp.Error, c.errContain) {
			t.Errorf("%s: error %q, want it to contain %q", c.name, resp.Error, c.errContain)
		}
	}
	var a, b int
	ctx := context.Background()
	if err := f.st.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE p.name = 'a'), count(*) FILTER (WHERE p.name = 'b')
		FROM attempts t JOIN projects p ON p.id = t.project_id`).Scan(&a, &b); err != nil {
		t.Fatal(err)
	}
	if a != 6 || b != 1 {
		t.Errorf("stored %d records for a and %d for b, want 6 and 1", a, b)
	}
}

// TestIngestUnavailable checks that a writer that cannot commit answers 503 with Retry-After, at
// once, rather than hanging or answering 2xx.
func TestIngestUnavailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1<<20)
	if err := f.writer.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	status, hdr, resp := f.post(t, f.keyA, "", "", []byte(record("z1")))
	if status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || !strings.Contains(resp.Error, "shutting down") {
		t.Fatalf("status %d retry-after %q error %q", status, hdr.Get("Retry-After"), resp.Error)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("answered after %v", d)
	}
}

// TestSchemaEndpoint checks GET /v1/schema serves the JSON Schema without a key.
func TestSchemaEndpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1<<20)
	resp, err := http.Get(f.srv.URL + "/v1/schema")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != 200 || doc["title"] == nil {
		t.Fatalf("status %d, %v, %v", resp.StatusCode, err, doc["title"])
	}
}

// TestSlowBody checks that a client trickling its body is answered 408 once BodyTimeout passes,
// instead of holding an in-flight slot for the server's whole read timeout.
func TestSlowBody(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, server.Options{BodyTimeout: 300 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /v1/attempts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n[{", f.keyA)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(status, "408") {
		t.Fatalf("status line %q, want 408", status)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("answered after %v", d)
	}
}

// TestProjectFairness checks that one project cannot take every ingest slot: with two slots, a
// project holding one is refused a second, while another project still gets in.
func TestProjectFairness(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, server.Options{MaxInFlight: 2, BodyTimeout: time.Minute})
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Project A's first request holds its slot: its body never finishes arriving. Nothing else
	// is sent until it is admitted; another request of A's in flight meanwhile would have it
	// refused instead.
	fmt.Fprintf(conn, "POST /v1/attempts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 1000\r\n\r\n[{", f.keyA)
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(f.metrics(t), "\nledgerd_ingest_requests_in_flight 1\n"); {
		if time.Now().After(deadline) {
			t.Fatal("project A's slow request was not admitted within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if status, hdr, _ := f.post(t, f.keyA, "", "", []byte(record("fa1"))); status != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" {
		t.Fatalf("project A's second request got %d (Retry-After %q), want 503 with Retry-After while its first is in flight",
			status, hdr.Get("Retry-After"))
	}
	if status, _, resp := f.post(t, f.keyB, "", "", []byte(record("fb1"))); status != http.StatusOK || resp.Accepted != 1 {
		t.Fatalf("project B got %d (%+v), want 200", status, resp)
	}
}

// TestIngestNamesUnpriced checks that the answer to a body holding records of a model ledgerd has
// no price for names that model, where its records are and the nearest known ids, so the sender
// learns at once; priced records and a usage-unknown record of a known model are not named.
func TestIngestNamesUnpriced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cat, err := pricing.Load("")
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(dbtest.New(t))
	reg := prometheus.NewRegistry()
	w := ingest.NewWriter(st, ingest.CatalogPrice(cat), ingest.Options{Registerer: reg})
	s := server.New(server.Options{Store: st, Writer: w, Registry: reg, Now: func() time.Time { return now },
		Suggest: func(p, m string) []string { return cat.SuggestFor(p, m, 3) }})
	hs := httptest.NewServer(s.Echo)
	t.Cleanup(func() { hs.Close(); _ = w.Close(context.Background()) })
	key, err := st.CreateKey(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{srv: hs, st: st, writer: w, keyA: key}
	haiku9 := strings.Replace(record("u1"), "claude-haiku-5-5", "claude-haiku-9", 1)
	acme := strings.Replace(strings.Replace(record("u3"), "claude-haiku-5-5", "acme-llm-2", 1), `"anthropic"`, `"acme"`, 1)
	unknownUsage := strings.Replace(record("u4"), `,"input_tokens":333,"output_tokens":9`, `,"usage_unknown":true`, 1)
	body := "[" + record("p1") + "," + haiku9 + "," + strings.Replace(haiku9, "u1", "u2", 2) + "," + acme + "," + unknownUsage + "]"
	status, _, resp := f.post(t, key, "application/json", "", []byte(body))
	if status != 200 || resp.Accepted != 5 {
		t.Fatalf("status %d, %+v", status, resp)
	}
	want := []schema.UnpricedModel{
		{Provider: "anthropic", Model: "claude-haiku-9", Records: []int{1, 2}, Nearest: []string{"claude-haiku-4-5"}},
		{Provider: "acme", Model: "acme-llm-2", Records: []int{3}, Nearest: []string{}},
	}
	if got, _ := json.Marshal(resp.Unpriced); !strings.HasPrefix(string(got), `[{"provider":"anthropic","model":"claude-haiku-9","records":[1,2],"nearest":["claude-haiku-4-5"`) ||
		len(resp.Unpriced) != 2 || fmt.Sprint(resp.Unpriced[1]) != fmt.Sprint(want[1]) {
		t.Errorf("unpriced %s, want %+v", got, want)
	}
}
