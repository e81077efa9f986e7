package otlp

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// ErrBody reports an export body that cannot be decoded as a whole; the receiver answers it 400,
// which exporters never retry.
var ErrBody = errors.New("unparseable OTLP body")

// DecodeProto decodes a binary protobuf ExportTraceServiceRequest (application/x-protobuf).
func DecodeProto(body []byte) (*coltracepb.ExportTraceServiceRequest, error) {
	req := &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(body, req); err != nil {
		return nil, fmt.Errorf("%w: protobuf: %v", ErrBody, err)
	}
	return req, nil
}

// DecodeJSON decodes an ExportTraceServiceRequest in OTLP's JSON mapping (application/json): the
// proto3 JSON mapping except that trace and span ids are hex strings, not base64. 64-bit integers
// may be strings or numbers and enums numbers or names, as protojson accepts; keys are matched
// without regard to case; unknown fields are ignored, as the OTLP specification asks. Only the
// fields the ledger reads are kept: resource attributes, and each span's ids, times, attributes
// and status.
func DecodeJSON(body []byte) (*coltracepb.ExportTraceServiceRequest, error) {
	var w jsonRequest
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("%w: JSON: %v", ErrBody, err)
	}
	req := &coltracepb.ExportTraceServiceRequest{ResourceSpans: make([]*tracepb.ResourceSpans, 0, len(w.ResourceSpans))}
	for _, jrs := range w.ResourceSpans {
		rs := &tracepb.ResourceSpans{}
		if jrs.Resource != nil {
			rs.Resource = &resourcepb.Resource{Attributes: jrs.Resource.Attributes.proto()}
		}
		for _, jss := range jrs.ScopeSpans {
			ss := &tracepb.ScopeSpans{Spans: make([]*tracepb.Span, 0, len(jss.Spans))}
			for _, js := range jss.Spans {
				sp := &tracepb.Span{
					TraceId: js.TraceID.b, SpanId: js.SpanID.b, Name: js.Name,
					StartTimeUnixNano: uint64(js.StartTimeUnixNano), EndTimeUnixNano: uint64(js.EndTimeUnixNano),
					Attributes: js.Attributes.proto(),
				}
				if js.Status != nil {
					sp.Status = &tracepb.Status{Code: tracepb.Status_StatusCode(js.Status.Code), Message: js.Status.Message}
				}
				ss.Spans = append(ss.Spans, sp)
			}
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		req.ResourceSpans = append(req.ResourceSpans, rs)
	}
	return req, nil
}

// The JSON shapes of the messages DecodeJSON reads. Fields the ledger never reads (events, links,
// scopes, kind, flags) are left out, so encoding/json skips them.
type (
	jsonRequest struct {
		ResourceSpans []jsonResourceSpans `json:"resourceSpans"`
	}
	jsonResourceSpans struct {
		Resource   *jsonResource    `json:"resource"`
		ScopeSpans []jsonScopeSpans `json:"scopeSpans"`
	}
	jsonResource struct {
		Attributes jsonAttributes `json:"attributes"`
	}
	jsonScopeSpans struct {
		Spans []jsonSpan `json:"spans"`
	}
	jsonSpan struct {
		TraceID           jsonID         `json:"traceId"`
		SpanID            jsonID         `json:"spanId"`
		Name              string         `json:"name"`
		StartTimeUnixNano jsonUint64     `json:"startTimeUnixNano"`
		EndTimeUnixNano   jsonUint64     `json:"endTimeUnixNano"`
		Attributes        jsonAttributes `json:"attributes"`
		Status            *jsonStatus    `json:"status"`
	}
	jsonStatus struct {
		Code    jsonStatusCode `json:"code"`
		Message string         `json:"message"`
	}
	jsonAttributes []jsonKeyValue
	jsonKeyValue   struct {
		Key   string        `json:"key"`
		Value *jsonAnyValue `json:"value"`
	}
	// jsonAnyValue keeps the scalar kinds; arrays, maps and bytes carry no usage and are dropped,
	// leaving an AnyValue without a value, which the mapping treats as a wrong type.
	jsonAnyValue struct {
		StringValue *string      `json:"stringValue"`
		BoolValue   *bool        `json:"boolValue"`
		IntValue    *jsonInt64   `json:"intValue"`
		DoubleValue *jsonFloat64 `json:"doubleValue"`
	}
)

func (a jsonAttributes) proto() []*commonpb.KeyValue {
	if len(a) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, len(a))
	for i, kv := range a {
		out[i] = &commonpb.KeyValue{Key: kv.Key, Value: kv.Value.proto()}
	}
	return out
}

func (v *jsonAnyValue) proto() *commonpb.AnyValue {
	av := &commonpb.AnyValue{}
	switch {
	case v == nil:
	case v.StringValue != nil:
		av.Value = &commonpb.AnyValue_StringValue{StringValue: *v.StringValue}
	case v.BoolValue != nil:
		av.Value = &commonpb.AnyValue_BoolValue{BoolValue: *v.BoolValue}
	case v.IntValue != nil:
		av.Value = &commonpb.AnyValue_IntValue{IntValue: int64(*v.IntValue)}
	case v.DoubleValue != nil:
		av.Value = &commonpb.AnyValue_DoubleValue{DoubleValue: float64(*v.DoubleValue)}
	}
	return av
}

// jsonID is a trace or span id. OTLP/JSON writes ids in hex; a 16- or 8-byte id in base64, as
// plain protojson writes it, is accepted too (its padding is never hex). A string that is neither
// is kept empty, so that the span is refused for its id rather than the whole body for one span.
type jsonID struct{ b []byte }

// UnmarshalJSON reads a trace or span id written in hex (OTLP/JSON) or base64 (protojson).
func (id *jsonID) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("trace and span ids must be hex strings: %w", err)
	}
	if b, err := hex.DecodeString(s); err == nil {
		id.b = b
		return nil
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && (len(b) == 16 || len(b) == 8) {
		id.b = b
		return nil
	}
	id.b = nil
	return nil
}

// jsonInt64 is a proto3 JSON int64: a decimal string or a number.
type jsonInt64 int64

// UnmarshalJSON reads an int64 written as a JSON string or number.
func (i *jsonInt64) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	v, err := strconv.ParseInt(unquote(data), 10, 64)
	if err != nil {
		return fmt.Errorf("int64 value %s: %w", data, err)
	}
	*i = jsonInt64(v)
	return nil
}

// jsonUint64 is a proto3 JSON fixed64, as span times are: a decimal string or a number.
type jsonUint64 uint64

// UnmarshalJSON reads a uint64 written as a JSON string or number.
func (i *jsonUint64) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	v, err := strconv.ParseUint(unquote(data), 10, 64)
	if err != nil {
		return fmt.Errorf("uint64 value %s: %w", data, err)
	}
	*i = jsonUint64(v)
	return nil
}

// jsonFloat64 is a proto3 JSON double: a number, or "NaN", "Infinity", "-Infinity" or a number in
// a string.
type jsonFloat64 float64

// UnmarshalJSON reads a double, including the strings NaN and Infinity.
func (f *jsonFloat64) UnmarshalJSON(data []byte) error {
	s := unquote(data)
	switch s {
	case "null":
		return nil
	case "NaN":
		*f = jsonFloat64(math.NaN())
		return nil
	case "Infinity":
		*f = jsonFloat64(math.Inf(1))
		return nil
	case "-Infinity":
		*f = jsonFloat64(math.Inf(-1))
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || strings.TrimSpace(s) != s {
		return fmt.Errorf("double value %s is not a number", data)
	}
	*f = jsonFloat64(v)
	return nil
}

// jsonStatusCode is the span status enum: OTLP/JSON sends its number; protojson's names are
// accepted too.
type jsonStatusCode int32

// UnmarshalJSON reads a span status code by number or by enum name.
func (c *jsonStatusCode) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	if len(data) > 0 && data[0] == '"' {
		var name string
		if err := json.Unmarshal(data, &name); err != nil {
			return err
		}
		v, ok := tracepb.Status_StatusCode_value[name]
		if !ok {
			return fmt.Errorf("unknown status code %q", name)
		}
		*c = jsonStatusCode(v)
		return nil
	}
	var v int32
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("status code %s: %w", data, err)
	}
	*c = jsonStatusCode(v)
	return nil
}

// unquote strips the quotes of a JSON string holding a number; escapes never occur in one.
func unquote(data []byte) string {
	if len(data) >= 2 && data[0] == '"' && data[len(data)-1] == '"' {
		return string(data[1 : len(data)-1])
	}
	return string(data)
}
