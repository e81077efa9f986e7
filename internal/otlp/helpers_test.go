package otlp

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// Fixed values the hand-built requests share.
var (
	now       = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	start     = time.Date(2026, 11, 29, 10, 0, 0, 250_000_000, time.UTC)
	traceHex  = "4bf92f3577b34da6a3ce929d0e0e4736"
	traceID   = mustHex(traceHex)
	spanLasts = 1500*time.Millisecond + 700*time.Microsecond
)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// kvs builds attributes from alternating keys and values (string, int, int64, float64 or bool).
func kvs(pairs ...any) []*commonpb.KeyValue {
	var out []*commonpb.KeyValue
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, &commonpb.KeyValue{Key: pairs[i].(string), Value: anyValue(pairs[i+1])})
	}
	return out
}

func anyValue(v any) *commonpb.AnyValue {
	switch x := v.(type) {
	case string:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: x}}
	case int:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: int64(x)}}
	case int64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: x}}
	case float64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: x}}
	case bool:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: x}}
	case []string:
		var vals []*commonpb.AnyValue
		for _, s := range x {
			vals = append(vals, anyValue(s))
		}
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vals}}}
	}
	panic(fmt.Sprintf("attribute value %T", v))
}

// span builds a span of the shared trace that starts at start and lasts spanLasts.
func span(idHex string, attrs ...any) *tracepb.Span {
	return &tracepb.Span{
		TraceId: traceID, SpanId: mustHex(idHex), Name: "chat model", Kind: tracepb.Span_SPAN_KIND_CLIENT,
		StartTimeUnixNano: uint64(start.UnixNano()), EndTimeUnixNano: uint64(start.Add(spanLasts).UnixNano()),
		Attributes: kvs(attrs...),
	}
}

// request wraps spans under one resource.
func request(resource []*commonpb.KeyValue, spans ...*tracepb.Span) *coltracepb.ExportTraceServiceRequest {
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   &resourcepb.Resource{Attributes: resource},
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: "test"}, Spans: spans}},
	}}}
}

// toJSON writes a request in OTLP's JSON mapping: protojson with enum numbers, then every id
// re-encoded from base64 to hex (upper case, which the spec allows).
func toJSON(t testing.TB, req *coltracepb.ExportTraceServiceRequest) []byte {
	t.Helper()
	b, err := otlpJSON(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func otlpJSON(req *coltracepb.ExportTraceServiceRequest) ([]byte, error) {
	b, err := protojson.MarshalOptions{UseEnumNumbers: true}.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("protojson: %w", err)
	}
	var tree any
	if err := json.Unmarshal(b, &tree); err != nil {
		return nil, fmt.Errorf("reread protojson: %w", err)
	}
	hexIDs(tree)
	return json.Marshal(tree)
}

func hexIDs(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if s, ok := val.(string); ok && (k == "traceId" || k == "spanId" || k == "parentSpanId") {
				b, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					panic(err)
				}
				x[k] = strings.ToUpper(hex.EncodeToString(b))
				continue
			}
			hexIDs(val)
		}
	case []any:
		for _, e := range x {
			hexIDs(e)
		}
	}
}
