package otlp_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/ledgerd/ledgerd/internal/app"
	"github.com/ledgerd/ledgerd/internal/apptest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/store"
)

// startLedgerd runs the whole service in-process on its own database, pricing with
// testdata/prices.yaml, and returns its address.
func startLedgerd(t *testing.T, dbURL string) string {
	t.Helper()
	base := apptest.Start(t, app.Options{DatabaseURL: dbURL, PricesFile: "testdata/prices.yaml",
		Now: func() time.Time { return clock }})
	return strings.TrimPrefix(base, "http://")
}

// stored is one attempts row with its series, as the test compares it.
type stored struct {
	AttemptID, RequestID                         string
	AttemptNo                                    int
	Tenant, Service, Operation, Provider, Model  string
	FallbackFrom                                 string
	Fallback                                     bool
	Status, ErrorClass                           string
	HTTPStatus, LatencyMS                        int
	Input, CacheWrite, CacheRead, Output, Reason int64
	CostNanos, NoCacheNanos                      int64
	ProviderRequestID, PromptHash                string
	StartedAt                                    time.Time
}

// storedSQL reads a project's attempts; -1 stands for a NULL (unpriced) cost.
const storedSQL = `SELECT a.attempt_id, a.request_id, a.attempt_no, s.tenant, s.service, s.operation, s.provider,
	s.model, s.fallback_from, a.fallback, a.status::text, a.error_class::text, coalesce(a.http_status, 0), a.latency_ms,
	a.input_tokens, a.cache_write_tokens, a.cache_read_tokens, a.output_tokens, a.reasoning_tokens,
	coalesce(a.cost_nanos, -1), coalesce(a.nocache_cost_nanos, -1), coalesce(a.provider_request_id, ''),
	coalesce(a.prompt_hash, ''), a.started_at
FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id
WHERE a.project_id = $1 ORDER BY a.started_at, a.attempt_id`

func readStored(t *testing.T, pool *pgxpool.Pool, project int64) []stored {
	t.Helper()
	rows, err := pool.Query(context.Background(), storedSQL, project)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (stored, error) {
		var s stored
		err := r.Scan(&s.AttemptID, &s.RequestID, &s.AttemptNo, &s.Tenant, &s.Service, &s.Operation, &s.Provider,
			&s.Model, &s.FallbackFrom, &s.Fallback, &s.Status, &s.ErrorClass, &s.HTTPStatus, &s.LatencyMS,
			&s.Input, &s.CacheWrite, &s.CacheRead, &s.Output, &s.Reason, &s.CostNanos, &s.NoCacheNanos,
			&s.ProviderRequestID, &s.PromptHash, &s.StartedAt)
		s.StartedAt = s.StartedAt.UTC()
		return s, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// t0 is when the traced request began.
var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// emit records the spans of one checkout request the way an instrumented service would: a server
// span, an agent span over the model calls, an overloaded Anthropic call, its successful retry, an
// OpenAI fallback and a Gemini call.
func emit(tp trace.TracerProvider) {
	tr := tp.Tracer("genai-test")
	at := func(ms int) trace.SpanStartEventOption {
		return trace.WithTimestamp(t0.Add(time.Duration(ms) * time.Millisecond))
	}
	ctx, root := tr.Start(context.Background(), "POST /checkout", at(0), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", "POST")))
	ctx, agent := tr.Start(ctx, "invoke_agent planner", at(1), trace.WithAttributes(attribute.String("gen_ai.operation.name", "invoke_agent"),
		attribute.String("gen_ai.provider.name", "openai"), attribute.Int("gen_ai.usage.input_tokens", 9999)))
	call := func(name string, from, to int, status codes.Code, attrs ...attribute.KeyValue) {
		_, sp := tr.Start(ctx, name, at(from), trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(append(attrs, attribute.String("ledgerd.tenant", "acme"))...))
		if status == codes.Error {
			sp.SetStatus(codes.Error, "overloaded")
		}
		sp.End(trace.WithTimestamp(t0.Add(time.Duration(to) * time.Millisecond)))
	}
	call("chat otel-test-claude", 10, 810, codes.Error, attribute.String("gen_ai.provider.name", "anthropic"),
		attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.request.model", "otel-test-claude"),
		attribute.String("error.type", "overloaded_error"), attribute.Int("http.response.status_code", 529))
	call("chat otel-test-claude", 1000, 3200, codes.Unset, attribute.String("gen_ai.provider.name", "anthropic"),
		attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.request.model", "otel-test-claude"),
		attribute.String("gen_ai.response.id", "msg_01"), attribute.Int("ledgerd.attempt_no", 2),
		attribute.String("ledgerd.prompt_hash", "sys-v1"), attribute.Int("gen_ai.usage.input_tokens", 3050),
		attribute.Int("gen_ai.usage.cache_read.input_tokens", 2000), attribute.Int("gen_ai.usage.cache_creation.input_tokens", 1000),
		attribute.Int("gen_ai.usage.output_tokens", 300))
	call("chat otel-test-gpt", 3300, 4100, codes.Unset, attribute.String("gen_ai.provider.name", "openai"),
		attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.request.model", "otel-test-gpt"),
		attribute.String("ledgerd.fallback_from", "otel-test-claude"), attribute.Int("gen_ai.usage.input_tokens", 1200),
		attribute.Int("gen_ai.usage.cache_read.input_tokens", 1000), attribute.Int("gen_ai.usage.output_tokens", 300),
		attribute.Int("gen_ai.usage.reasoning.output_tokens", 100))
	call("generate_content otel-test-gemini", 4200, 4700, codes.Unset, attribute.String("gen_ai.system", "gemini"),
		attribute.String("gen_ai.operation.name", "generate_content"), attribute.String("gen_ai.request.model", "otel-test-gemini"),
		attribute.Int("gen_ai.usage.input_tokens", 1000), attribute.Int("gen_ai.usage.cache_read.input_tokens", 600),
		attribute.Int("gen_ai.usage.output_tokens", 200), attribute.Int("gen_ai.usage.reasoning.output_tokens", 300))
	agent.End(trace.WithTimestamp(t0.Add(4800 * time.Millisecond)))
	root.End(trace.WithTimestamp(t0.Add(5000 * time.Millisecond)))
}

// TestExporterEndToEnd sends GenAI spans with the OpenTelemetry Go SDK's OTLP/HTTP exporter, in
// protobuf and in gzipped JSON, to a running ledgerd, and checks the attempts stored, their costs
// (hand-computed from testdata/prices.yaml), that a redelivery adds nothing, and that a refused span
// reaches the exporter as a partial success.
func TestExporterEndToEnd(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	addr := startLedgerd(t, dbURL)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st := store.New(pool)

	cases := []struct {
		name string
		opts []otlptracehttp.Option
	}{
		// The exporter's default: protobuf, uncompressed.
		{"protobuf", nil},
		// OTLP/JSON with gzip, as the exporter writes it with WithEncoding(EncodingJSON).
		{"json-gzip", []otlptracehttp.Option{otlptracehttp.WithEncoding(otlptracehttp.EncodingJSON),
			otlptracehttp.WithCompression(otlptracehttp.GzipCompression)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			key, err := st.CreateKey(ctx, "shop-"+tc.name)
			if err != nil {
				t.Fatal(err)
			}
			project, err := st.Authenticate(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			exp, err := otlptracehttp.New(ctx, append([]otlptracehttp.Option{otlptracehttp.WithEndpoint(addr), otlptracehttp.WithInsecure(),
				otlptracehttp.WithHeaders(map[string]string{"Authorization": "Bearer " + key}),
				otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false})}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithBatcher(exp),
				sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "checkout"))))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

			emit(tp)
			if err := tp.ForceFlush(ctx); err != nil {
				t.Fatalf("force flush: %v", err)
			}
			ended := rec.Ended()
			if len(ended) != 6 {
				t.Fatalf("%d spans ended, want 6", len(ended))
			}
			id := func(i int) string { return ended[i].SpanContext().SpanID().String() }
			traceID := ended[0].SpanContext().TraceID().String()
			at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
			base := stored{RequestID: traceID, AttemptNo: 1, Tenant: "acme", Service: "checkout", Operation: "chat",
				Provider: "anthropic", Model: "otel-test-claude", Status: "ok", ErrorClass: "none"}
			want := []stored{base, base, base, base}
			// The overloaded first attempt: no usage, priced at zero.
			want[0].AttemptID, want[0].StartedAt, want[0].LatencyMS = id(0), at(10), 800
			want[0].Status, want[0].ErrorClass, want[0].HTTPStatus = "error", "overloaded", 529
			// Its retry: 50 uncached + 1000 written + 2000 read at $3/$3.75/$0.30, 300 out at $15:
			// $0.009000; without caching 3050 × $3 + 300 × $15 = $0.013650.
			want[1].AttemptID, want[1].StartedAt, want[1].LatencyMS, want[1].AttemptNo = id(1), at(1000), 2200, 2
			want[1].Input, want[1].CacheWrite, want[1].CacheRead, want[1].Output = 50, 1000, 2000, 300
			want[1].CostNanos, want[1].NoCacheNanos, want[1].ProviderRequestID, want[1].PromptHash = 9_000_000, 13_650_000, "msg_01", "sys-v1"
			// The OpenAI fallback: 200 uncached at $2 + 1000 read at $0.50 + 300 out at $8 = $0.003300;
			// without caching 1200 × $2 + 300 × $8 = $0.004800.
			want[2].AttemptID, want[2].StartedAt, want[2].LatencyMS = id(2), at(3300), 800
			want[2].Provider, want[2].Model, want[2].Fallback, want[2].FallbackFrom = "openai", "otel-test-gpt", true, "otel-test-claude"
			want[2].Input, want[2].CacheRead, want[2].Output, want[2].Reason = 200, 1000, 300, 100
			want[2].CostNanos, want[2].NoCacheNanos = 3_300_000, 4_800_000
			// Gemini: 400 uncached at $1 + 600 read at $0.25 + (200 + 300 thoughts) out at $4 =
			// $0.002550; without caching 1000 × $1 + 500 × $4 = $0.003000.
			want[3].AttemptID, want[3].StartedAt, want[3].LatencyMS, want[3].Operation = id(3), at(4200), 500, "generate_content"
			want[3].Provider, want[3].Model = "gcp.gemini", "otel-test-gemini"
			want[3].Input, want[3].CacheRead, want[3].Output, want[3].Reason = 400, 600, 500, 300
			want[3].CostNanos, want[3].NoCacheNanos = 2_550_000, 3_000_000

			if got := readStored(t, pool, project.ID); !reflect.DeepEqual(got, want) {
				t.Fatalf("stored attempts:\n got %+v\nwant %+v", got, want)
			}
			// Any read from ledgerd first folds the rollup deltas it committed.
			resp, err := http.Get("http://" + addr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			var attempts, requests, cost int64
			if err := pool.QueryRow(ctx, `SELECT sum(attempts), sum(requests), sum(cost_nanos) FROM rollup_hourly WHERE project_id = $1`,
				project.ID).Scan(&attempts, &requests, &cost); err != nil {
				t.Fatal(err)
			}
			if attempts != 4 || requests != 3 || cost != 14_850_000 {
				t.Fatalf("hourly rollup: %d attempts, %d requests, %d nanos; want 4, 3, 14850000", attempts, requests, cost)
			}

			// The same spans again: the exporter succeeds and nothing new is stored.
			if err := exp.ExportSpans(ctx, ended); err != nil {
				t.Fatalf("export again: %v", err)
			}
			if got := readStored(t, pool, project.ID); !reflect.DeepEqual(got, want) {
				t.Fatalf("after redelivery:\n got %+v\nwant %+v", got, want)
			}

			// A GenAI span without a model comes back to the exporter as a partial success.
			badRec := tracetest.NewSpanRecorder()
			badTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(badRec),
				sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "checkout"))))
			_, sp := badTP.Tracer("genai-test").Start(ctx, "chat", trace.WithTimestamp(t0),
				trace.WithAttributes(attribute.String("gen_ai.provider.name", "openai"), attribute.Int("gen_ai.usage.input_tokens", 5)))
			sp.End(trace.WithTimestamp(t0.Add(time.Second)))
			err = exp.ExportSpans(ctx, badRec.Ended())
			wantErr := "traces export: OTLP partial success: 1 GenAI span(s) refused: span " + sp.SpanContext().SpanID().String() +
				": gen_ai.request.model / gen_ai.response.model: must not be empty (1 spans rejected)"
			if err == nil || err.Error() != wantErr {
				t.Fatalf("export of a refused span: %v\nwant %s", err, wantErr)
			}
		})
	}
}
