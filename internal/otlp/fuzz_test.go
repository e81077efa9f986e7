package otlp

import (
	"errors"
	"reflect"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// FuzzDecodeProto decodes arbitrary protobuf bodies. Whatever decodes must convert with every span
// accounted for and only valid records, and the same request written as OTLP/JSON must decode and
// convert to the same result.
func FuzzDecodeProto(f *testing.F) {
	pb, err := proto.Marshal(mixed())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(pb)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeProto(body)
		if err != nil {
			if !errors.Is(err, ErrBody) {
				t.Fatalf("error %v is not ErrBody", err)
			}
			return
		}
		res := checkConvert(t, req)
		js, err := otlpJSON(req)
		if err != nil {
			// Nesting deeper than encoding/json's limit: a JSON body that deep is refused too.
			return
		}
		fromJSON, err := DecodeJSON(js)
		if err != nil {
			t.Fatalf("OTLP/JSON of a decoded protobuf body does not decode: %v\n%s", err, js)
		}
		if got := Convert(fromJSON, now, nil); !reflect.DeepEqual(got, res) {
			t.Fatalf("JSON and protobuf disagree:\nprotobuf %+v\njson     %+v", res, got)
		}
	})
}

// FuzzDecodeJSON decodes arbitrary JSON bodies. Whatever decodes must convert with every span
// accounted for and only valid records, and must convert the same after a protobuf round trip.
func FuzzDecodeJSON(f *testing.F) {
	f.Add(toJSON(f, mixed()))
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"S/kvNXezTaajzpKdDg5HNg==","spanId":"APBnqgupArc=","startTimeUnixNano":1,"attributes":[{"key":"gen_ai.usage.input_tokens","value":{"doubleValue":"Infinity"}}],"status":{"code":"STATUS_CODE_ERROR"}}]}]}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeJSON(body)
		if err != nil {
			if !errors.Is(err, ErrBody) {
				t.Fatalf("error %v is not ErrBody", err)
			}
			return
		}
		res := checkConvert(t, req)
		pb, err := proto.Marshal(req)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		again, err := DecodeProto(pb)
		if err != nil {
			t.Fatalf("protobuf of a decoded JSON body does not decode: %v", err)
		}
		if got := Convert(again, now, nil); !reflect.DeepEqual(got, res) {
			t.Fatalf("round trip changed the result:\nbefore %+v\nafter  %+v", res, got)
		}
	})
}

// checkConvert converts req and checks what must hold for any input.
func checkConvert(t *testing.T, req *coltracepb.ExportTraceServiceRequest) Result {
	t.Helper()
	res := Convert(req, now, nil)
	spans := 0
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			spans += len(ss.GetSpans())
		}
	}
	if n := len(res.Records) + len(res.Rejected) + res.Ignored; n != spans {
		t.Fatalf("%d spans, but %d records + %d rejected + %d ignored", spans, len(res.Records), len(res.Rejected), res.Ignored)
	}
	for _, a := range res.Records {
		again := a
		if ferr := again.Validate(now); ferr != nil {
			t.Fatalf("record %+v fails validation: %v", a, ferr)
		}
		if len(a.AttemptID) != 16 || len(a.RequestID) != 32 {
			t.Fatalf("record ids %q %q are not hex span and trace ids", a.AttemptID, a.RequestID)
		}
	}
	return res
}
