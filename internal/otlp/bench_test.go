package otlp

import (
	"fmt"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// bigExport is an export of n spans, half of them GenAI calls with usage and half plain spans, the
// mix a traced service sends.
func bigExport(n int) *coltracepb.ExportTraceServiceRequest {
	spans := make([]*tracepb.Span, 0, n)
	for i := range n {
		id := fmt.Sprintf("%016x", i+1)
		if i%2 == 0 {
			spans = append(spans, span(id, "gen_ai.provider.name", "openai", "gen_ai.operation.name", "chat",
				"gen_ai.request.model", "gpt-6-luna", "gen_ai.response.model", "gpt-6-luna-2026-09-22", "gen_ai.response.id", "chatcmpl-"+id,
				"gen_ai.usage.input_tokens", 1200, "gen_ai.usage.cache_read.input_tokens", 1000, "gen_ai.usage.output_tokens", 300,
				"server.address", "api.openai.com", "ledgerd.tenant", "acme"))
		} else {
			spans = append(spans, span(id, "http.request.method", "POST", "http.route", "/checkout", "http.response.status_code", 200))
		}
	}
	return request(service, spans...)
}

// BenchmarkDecodeConvert measures the receiver's CPU work per export of 1,000 spans, from body
// bytes to validated records, in each encoding; compare the two ns/op figures of one run.
func BenchmarkDecodeConvert(b *testing.B) {
	req := bigExport(1000)
	pb, err := proto.Marshal(req)
	if err != nil {
		b.Fatal(err)
	}
	js := toJSON(b, req)
	for _, bc := range []struct {
		name   string
		body   []byte
		decode func([]byte) (*coltracepb.ExportTraceServiceRequest, error)
	}{{"protobuf", pb, DecodeProto}, {"json", js, DecodeJSON}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				r, err := bc.decode(bc.body)
				if err != nil {
					b.Fatal(err)
				}
				if res := Convert(r, now, nil); len(res.Records) != 500 {
					b.Fatalf("%d records", len(res.Records))
				}
			}
		})
	}
}
