package otlp_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/otlp"
	"github.com/ledgerd/ledgerd/internal/server"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/schema"
)

var clock = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

type fixture struct {
	url    string
	key    string
	st     *store.Store
	writer *ingest.Writer
	reg    *prometheus.Registry
}

// newFixture serves the receiver on its own database, with a writer that stores every attempt
// unpriced.
func newFixture(t *testing.T, maxBody int64) *fixture {
	t.Helper()
	st := store.New(dbtest.New(t))
	reg := prometheus.NewRegistry()
	w := ingest.NewWriter(st, func(*schema.Attempt) ingest.Costing { return ingest.Costing{} }, ingest.Options{Registerer: reg})
	now := func() time.Time { return clock }
	s := server.New(server.Options{Store: st, Writer: w, Registry: reg, Now: now, MaxBodyBytes: maxBody})
	otlp.New(otlp.Options{Writer: w, Registerer: reg, Now: now}).Mount(s)
	hs := httptest.NewServer(s.Echo)
	t.Cleanup(func() { hs.Close(); _ = w.Close(context.Background()) })
	key, err := st.CreateKey(context.Background(), "p")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{url: hs.URL + "/v1/traces", key: key, st: st, writer: w, reg: reg}
}

func (f *fixture) post(t *testing.T, ctype, encoding string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.key)
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
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func (f *fixture) attempts(t *testing.T) int {
	t.Helper()
	var n int
	if err := f.st.Pool.QueryRow(context.Background(), "SELECT count(*) FROM attempts").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// decode reads a response body as the message its Content-Type says.
func decode(t *testing.T, resp *http.Response, m proto.Message) {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	switch ct := resp.Header.Get("Content-Type"); ct {
	case "application/x-protobuf":
		err = proto.Unmarshal(b, m)
	case "application/json":
		err = protojson.Unmarshal(b, m)
	default:
		t.Fatalf("response Content-Type %q, body %s", ct, b)
	}
	if err != nil {
		t.Fatalf("decode %T from %q: %v", m, b, err)
	}
}

// genAIJSON is an OTLP/JSON export, written by hand as an exporter sends it: an OpenAI call, a plain
// span and a GenAI span without a model.
const genAIJSON = `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"chat-api"}}]},
"scopeSpans":[{"scope":{"name":"openai"},"spans":[
 {"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","spanId":"00f067aa0ba902b7","name":"chat gpt-6-luna","kind":3,
  "startTimeUnixNano":"1795946400250000000","endTimeUnixNano":"1795946401750700000",
  "attributes":[{"key":"gen_ai.provider.name","value":{"stringValue":"openai"}},{"key":"gen_ai.operation.name","value":{"stringValue":"chat"}},
   {"key":"gen_ai.request.model","value":{"stringValue":"gpt-6-luna"}},{"key":"gen_ai.usage.input_tokens","value":{"intValue":"1200"}},
   {"key":"gen_ai.usage.cache_read.input_tokens","value":{"intValue":"1000"}},{"key":"gen_ai.usage.output_tokens","value":{"intValue":"300"}}],
  "status":{}},
 {"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","spanId":"00f067aa0ba902b8","name":"GET /","startTimeUnixNano":"1795946400250000000","endTimeUnixNano":"1795946401750700000"},
 {"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","spanId":"00f067aa0ba902b9","name":"chat","startTimeUnixNano":"1795946400250000000","endTimeUnixNano":"1795946401750700000",
  "attributes":[{"key":"gen_ai.provider.name","value":{"stringValue":"openai"}},{"key":"gen_ai.usage.input_tokens","value":{"intValue":5}}]}
]}]}]}`

// TestReceiverJSON posts OTLP/JSON by plain HTTP: the record is stored once, the bad span comes back
// in partial_success in JSON, and a redelivery adds nothing.
func TestReceiverJSON(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1<<20)
	for round := range 2 {
		resp := f.post(t, "application/json; charset=utf-8", "", []byte(genAIJSON))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("round %d: status %d", round, resp.StatusCode)
		}
		var out coltracepb.ExportTraceServiceResponse
		decode(t, resp, &out)
		ps := out.GetPartialSuccess()
		want := "1 GenAI span(s) refused: span 00f067aa0ba902b9: gen_ai.request.model / gen_ai.response.model: must not be empty"
		if ps.GetRejectedSpans() != 1 || ps.GetErrorMessage() != want {
			t.Fatalf("round %d: partial success %v, want 1 rejected with %q", round, ps, want)
		}
		if n := f.attempts(t); n != 1 {
			t.Fatalf("round %d: %d attempts stored, want 1", round, n)
		}
	}
	var in, read, out int64
	var id, req string
	err := f.st.Pool.QueryRow(context.Background(),
		"SELECT attempt_id, request_id, input_tokens, cache_read_tokens, output_tokens FROM attempts").Scan(&id, &req, &in, &read, &out)
	if err != nil {
		t.Fatal(err)
	}
	if id != "00f067aa0ba902b7" || req != "4bf92f3577b34da6a3ce929d0e0e4736" || in != 200 || read != 1000 || out != 300 {
		t.Fatalf("stored %s %s %d/%d/%d", id, req, in, read, out)
	}
	for outcome, want := range map[string]float64{"recorded": 2, "rejected": 2, "ignored": 2} {
		if got := spanCount(t, f.reg, outcome); got != want {
			t.Errorf("ledgerd_otlp_spans_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
}

// spanCount reads ledgerd_otlp_spans_total for one outcome.
func spanCount(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "ledgerd_otlp_spans_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no ledgerd_otlp_spans_total{outcome=%q}", outcome)
	return 0
}

// protoBody is the JSON export in protobuf.
func protoBody(t *testing.T) []byte {
	t.Helper()
	req, err := otlp.DecodeJSON([]byte(genAIJSON))
	if err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestReceiverProtobufGzip: a gzipped protobuf export is answered in protobuf.
func TestReceiverProtobufGzip(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1<<20)
	resp := f.post(t, "application/x-protobuf", "gzip", gzipped(t, protoBody(t)))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var out coltracepb.ExportTraceServiceResponse
	decode(t, resp, &out)
	if out.GetPartialSuccess().GetRejectedSpans() != 1 {
		t.Fatalf("partial success %v", out.GetPartialSuccess())
	}
	if n := f.attempts(t); n != 1 {
		t.Fatalf("%d attempts stored, want 1", n)
	}
}

// TestReceiverFullSuccess: with nothing refused the response leaves partial_success unset (an empty
// protobuf message).
func TestReceiverFullSuccess(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1<<20)
	req, err := otlp.DecodeJSON([]byte(genAIJSON))
	if err != nil {
		t.Fatal(err)
	}
	spans := req.ResourceSpans[0].ScopeSpans[0]
	spans.Spans = spans.Spans[:2]
	body, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	resp := f.post(t, "application/x-protobuf", "", body)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || len(b) != 0 || resp.Header.Get("Content-Type") != "application/x-protobuf" {
		t.Fatalf("status %d, %s, body %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}

func TestReceiverErrors(t *testing.T) {
	t.Parallel()
	bomb := gzipped(t, bytes.Repeat([]byte{0}, 4<<20))
	cases := []struct {
		name     string
		ctype    string
		encoding string
		body     []byte
		code     int
		// status is the google.rpc.Status message expected in the body ("" when the body is the
		// server's plain JSON error).
		status string
	}{
		// Garbage protobuf: 400, which exporters never retry, with a Status in protobuf.
		{"bad protobuf", "application/x-protobuf", "", []byte("\x0a\x10\x0a"), 400, "unparseable OTLP body: protobuf"},
		// Broken JSON: 400 with a Status in JSON.
		{"bad JSON", "application/json", "", []byte(`{"resourceSpans":[`), 400, "unparseable OTLP body: JSON"},
		// A body over the limit: 413.
		{"too large", "application/x-protobuf", "", bytes.Repeat([]byte{0}, 2<<20), 413, "body larger than 1048576 bytes"},
		// A gzip bomb is stopped at the inflated limit.
		{"gzip bomb", "application/x-protobuf", "gzip", bomb, 413, "body larger than 1048576 bytes"},
		// Encodings other than gzip are refused.
		{"zstd", "application/json", "zstd", []byte(`{}`), 415, "Content-Encoding must be gzip or absent"},
		// Only the two OTLP content types are taken.
		{"text", "text/plain", "", []byte(`{}`), 415, ""},
		{"no content type", "", "", []byte(`{}`), 415, ""},
	}
	f := newFixture(t, 1<<20)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := f.post(t, tc.ctype, tc.encoding, tc.body)
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.code)
			}
			if tc.status == "" {
				return
			}
			var st rpcstatus.Status
			decode(t, resp, &st)
			if !strings.HasPrefix(st.GetMessage(), tc.status) || st.GetCode() != 3 {
				t.Fatalf("status message %q (code %d), want prefix %q", st.GetMessage(), st.GetCode(), tc.status)
			}
		})
	}
}

// TestReceiverAuth: the route is behind the project key like the rest of /v1.
func TestReceiverAuth(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1<<20)
	f.key = "ldg_wrong"
	if resp := f.post(t, "application/json", "", []byte(genAIJSON)); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", resp.StatusCode)
	}
	if n := f.attempts(t); n != 0 {
		t.Fatalf("%d attempts stored without a key", n)
	}
}

// TestReceiverUnavailable: when the writer cannot take records the answer is 503 with Retry-After,
// which exporters retry.
func TestReceiverUnavailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1<<20)
	if err := f.writer.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	resp := f.post(t, "application/json", "", []byte(genAIJSON))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	var st rpcstatus.Status
	decode(t, resp, &st)
	if st.GetCode() != 14 {
		t.Fatalf("status code %d (%s), want 14 (Unavailable)", st.GetCode(), st.GetMessage())
	}
}
