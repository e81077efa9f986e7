package otlp

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/ledgerd/ledgerd/schema"
)

// mixed is a request with one span of each kind the receiver meets: an OpenAI call with cache
// reads, a failed Anthropic call, a plain HTTP span and a GenAI span without a model.
func mixed() *coltracepb.ExportTraceServiceRequest {
	openai := span("1111111111111111", "gen_ai.provider.name", "openai", "gen_ai.operation.name", "chat", "gen_ai.request.model", "gpt-6-luna",
		"gen_ai.usage.input_tokens", 1200, "gen_ai.usage.cache_read.input_tokens", 1000, "gen_ai.usage.output_tokens", 300,
		"gen_ai.usage.reasoning.output_tokens", 100.0, "gen_ai.response.finish_reasons", []string{"stop"})
	failed := span("2222222222222222", "gen_ai.provider.name", "anthropic", "gen_ai.request.model", "claude-sonnet-5-5", "error.type", "overloaded_error",
		"http.response.status_code", 529, "ledgerd.attempt_no", "2")
	failed.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "Overloaded"}
	plain := span("3333333333333333", "http.request.method", "POST")
	bad := span("4444444444444444", "gen_ai.provider.name", "openai", "gen_ai.usage.input_tokens", 1)
	return request(kvs("service.name", "chat-api", "tenant.id", "acme"), openai, failed, plain, bad)
}

func mixedWant() Result {
	openai := schema.Attempt{AttemptID: "1111111111111111", RequestID: traceHex, AttemptNo: 1, StartedAt: start, LatencyMS: 1500,
		Provider: "openai", Model: "gpt-6-luna", Service: "chat-api", Operation: "chat", Tenant: "acme", Status: schema.StatusOK,
		InputTokens: 200, CacheReadTokens: 1000, OutputTokens: 300, ReasoningTokens: 100}
	failed := schema.Attempt{AttemptID: "2222222222222222", RequestID: traceHex, AttemptNo: 2, StartedAt: start, LatencyMS: 1500,
		Provider: "anthropic", Model: "claude-sonnet-5-5", Service: "chat-api", Operation: "default", Tenant: "acme",
		Status: schema.StatusError, ErrorClass: schema.ErrorOverloaded, HTTPStatus: 529}
	return Result{
		Records:  []schema.Attempt{openai, failed},
		Rejected: []Rejection{{SpanID: "4444444444444444", Field: "gen_ai.request.model / gen_ai.response.model", Reason: "must not be empty"}},
		Ignored:  1,
	}
}

// TestDecodeBothEncodings checks that protobuf and OTLP/JSON bodies of one request decode to the
// same, right records.
func TestDecodeBothEncodings(t *testing.T) {
	t.Parallel()
	pb, err := proto.Marshal(mixed())
	if err != nil {
		t.Fatal(err)
	}
	fromProto, err := DecodeProto(pb)
	if err != nil {
		t.Fatalf("DecodeProto: %v", err)
	}
	js := toJSON(t, mixed())
	if !strings.Contains(string(js), `"spanId":"1111111111111111"`) || !strings.Contains(string(js), `"startTimeUnixNano":"`) {
		t.Fatalf("test JSON is not in OTLP's mapping: %s", js)
	}
	fromJSON, err := DecodeJSON(js)
	if err != nil {
		t.Fatalf("DecodeJSON: %v", err)
	}
	want := mixedWant()
	for name, req := range map[string]*coltracepb.ExportTraceServiceRequest{"protobuf": fromProto, "json": fromJSON} {
		if got := Convert(req, now, nil); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, got, want)
		}
	}
}

// TestDecodeJSONShapes feeds hand-written OTLP/JSON, covering the spellings the mapping allows.
func TestDecodeJSONShapes(t *testing.T) {
	t.Parallel()
	const tmpl = `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"chat-api"}}]},
	"scopeSpans":[{"scope":{"name":"x"},"spans":[{"traceId":TRACE,"spanId":SPAN,"parentSpanId":"","name":"chat gpt-6-luna","kind":3,
	"startTimeUnixNano":START,"endTimeUnixNano":"1795946401750700000",
	"attributes":[{"key":"gen_ai.provider.name","value":{"stringValue":"openai"}},{"key":"gen_ai.request.model","value":{"stringValue":"gpt-6-luna"}},
	{"key":"gen_ai.usage.input_tokens","value":{"intValue":INPUT}},{"key":"gen_ai.usage.output_tokens","value":{"intValue":"7"}},
	{"key":"gen_ai.request.temperature","value":{"doubleValue":"NaN"}},{"key":"gen_ai.input.messages","value":{"kvlistValue":{"values":[]}}},
	{"key":"blob","value":{"bytesValue":"AAEC"}}],
	"events":[{"name":"e","timeUnixNano":"1"}],"links":[{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","spanId":"00f067aa0ba902b7"}],
	"status":{"code":STATUS,"message":"m"},"futureField":{"x":[1,2]}}]}]}]}`
	fill := func(trace, spanID, startNs, input, status string) string {
		r := strings.NewReplacer("TRACE", trace, "SPAN", spanID, "START", startNs, "INPUT", input, "STATUS", status)
		return r.Replace(tmpl)
	}
	cases := []struct {
		name string
		body string
		// recorded false expects the span refused; failed expects status error.
		recorded bool
		failed   bool
	}{
		// The spec's shape: hex ids, int64 as strings, enums as numbers.
		{"hex ids, strings for int64", fill(`"4bf92f3577b34da6a3ce929d0e0e4736"`, `"00f067aa0ba902b7"`, `"1795946400250000000"`, `"12"`, "0"), true, false},
		// Upper-case hex and int64 written as plain numbers.
		{"upper-case hex, numbers for int64", fill(`"4BF92F3577B34DA6A3CE929D0E0E4736"`, `"00F067AA0BA902B7"`, `1795946400250000000`, `12`, "0"), true, false},
		// Plain protojson's base64 ids are told apart by length and accepted.
		{"base64 ids", fill(`"S/kvNXezTaajzpKdDg5HNg=="`, `"APBnqgupArc="`, `"1795946400250000000"`, `"12"`, "0"), true, false},
		// protojson's enum names are accepted for the status code.
		{"status code by name", fill(`"4bf92f3577b34da6a3ce929d0e0e4736"`, `"00f067aa0ba902b7"`, `"1795946400250000000"`, `"12"`, `"STATUS_CODE_ERROR"`), true, true},
		// An id that is neither hex nor base64 refuses the span, not the body.
		{"bad id refuses the span", fill(`"not-an-id"`, `"00f067aa0ba902b7"`, `"1795946400250000000"`, `"12"`, "0"), false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, err := DecodeJSON([]byte(tc.body))
			if err != nil {
				t.Fatalf("DecodeJSON: %v", err)
			}
			got := Convert(req, now, nil)
			if !tc.recorded {
				if len(got.Rejected) != 1 || got.Rejected[0].Field != "traceId" {
					t.Fatalf("got %+v, want the span refused for its trace id", got)
				}
				return
			}
			want := schema.Attempt{AttemptID: spanHex, RequestID: traceHex, AttemptNo: 1, StartedAt: start, LatencyMS: 1500,
				Provider: "openai", Model: "gpt-6-luna", Service: "chat-api", Operation: "default", Status: schema.StatusOK,
				InputTokens: 12, OutputTokens: 7}
			if tc.failed {
				want.Status, want.ErrorClass = schema.StatusError, schema.ErrorUnknown
			}
			if len(got.Records) != 1 || !reflect.DeepEqual(got.Records[0], want) {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		json bool
		body string
	}{
		// Not JSON at all.
		{"not JSON", true, `resourceSpans`},
		// A JSON array is not an ExportTraceServiceRequest.
		{"array", true, `[]`},
		// Cut off mid-way.
		{"truncated", true, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"4bf9`},
		// Two values in one body.
		{"trailing data", true, `{} {}`},
		// An empty body is not a JSON value.
		{"empty JSON", true, ``},
		// An int64 that is not a number.
		{"bad intValue", true, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":"a","value":{"intValue":"x"}}]}]}]}]}`},
		// A time that overflows uint64.
		{"time overflow", true, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"startTimeUnixNano":"18446744073709551616"}]}]}]}`},
		// Ids must be strings.
		{"numeric id", true, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"spanId":12}]}]}]}`},
		// An unknown status name.
		{"unknown status name", true, `{"resourceSpans":[{"scopeSpans":[{"spans":[{"status":{"code":"BROKEN"}}]}]}]}`},
		// Protobuf with a field of a wrong wire type.
		{"bad protobuf", false, "\x0a\x05\x0a\x03"},
		// Protobuf cut off inside a length-delimited field.
		{"truncated protobuf", false, "\x0a\x10\x0a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var err error
			if tc.json {
				_, err = DecodeJSON([]byte(tc.body))
			} else {
				_, err = DecodeProto([]byte(tc.body))
			}
			if !errors.Is(err, ErrBody) {
				t.Fatalf("err = %v, want ErrBody", err)
			}
		})
	}
}

// TestDecodeEmpty: an empty protobuf body and "{}" are valid, empty exports.
func TestDecodeEmpty(t *testing.T) {
	t.Parallel()
	for name, decode := range map[string]func() (*coltracepb.ExportTraceServiceRequest, error){
		"protobuf": func() (*coltracepb.ExportTraceServiceRequest, error) { return DecodeProto(nil) },
		"json":     func() (*coltracepb.ExportTraceServiceRequest, error) { return DecodeJSON([]byte(`{}`)) },
		"null": func() (*coltracepb.ExportTraceServiceRequest, error) {
			return DecodeJSON([]byte(`{"resourceSpans":null}`))
		},
	} {
		req, err := decode()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := Convert(req, now, nil); len(got.Records)+len(got.Rejected)+got.Ignored != 0 {
			t.Fatalf("%s: %+v", name, got)
		}
	}
}
