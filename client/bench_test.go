package client

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ledgerd/ledgerd/schema"
)

// BenchmarkReport measures what Report costs the caller, when the record is queued and when the queue
// is full and it is dropped. The sender is held in a request to a stub ledgerd so that it does not
// compete; a drainer stands in for it where the queue must keep room.
func BenchmarkReport(b *testing.B) {
	run := func(b *testing.B, drain, parallel bool) {
		stub := newLedgerStub(b, nil)
		stub.hold = make(chan struct{})
		stub.arrived = make(chan struct{}, 1)
		r, err := NewReporter(ReporterOptions{Endpoint: stub.srv.URL, APIKey: testKey, HTTPClient: stub.srv.Client(),
			MaxBatch: 1, QueueSize: 1024})
		if err != nil {
			b.Fatal(err)
		}
		r.Report(record(0))
		<-stub.arrived // the sender is held
		stop := make(chan struct{})
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			for drain {
				select {
				case <-r.queue:
				case <-stop:
					return
				}
			}
		}()
		if !drain {
			for range cap(r.queue) {
				r.Report(record(1))
			}
		}
		a := record(2)
		b.ReportAllocs()
		b.ResetTimer()
		if parallel {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r.Report(a)
				}
			})
		} else {
			for range b.N {
				r.Report(a)
			}
		}
		b.StopTimer()
		close(stop)
		<-drained
		for len(r.queue) > 0 {
			<-r.queue
		}
		close(stub.hold)
		if err := r.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("queued", func(b *testing.B) { run(b, true, false) })
	b.Run("queued-parallel", func(b *testing.B) { run(b, true, true) })
	b.Run("dropped", func(b *testing.B) { run(b, false, false) })
}

// BenchmarkTransport measures the cost of metering a response as the caller reads it, in 512-byte
// reads, against reading the same body without the Transport.
func BenchmarkTransport(b *testing.B) {
	cases := []struct {
		name, path, file, ct string
	}{
		{"anthropic-sse", "/v1/messages", "anthropic-stream.sse", "text/event-stream"},
		{"chat-sse", "/v1/chat/completions", "openai-chat-stream.sse", "text/event-stream"},
		{"anthropic-json", "/v1/messages", "anthropic-message.json", "application/json"},
	}
	reqBody := `{"model":"claude-haiku-5-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"` +
		strings.Repeat("lorem ipsum ", 400) + `"}]}`
	for _, tc := range cases {
		body := fixture(b, tc.file)
		base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Body != nil {
				_, _ = io.Copy(io.Discard, r.Body)
				_ = r.Body.Close()
			}
			h := http.Header{"Content-Type": {tc.ct}}
			return &http.Response{StatusCode: 200, Header: h, Body: io.NopCloser(bytes.NewReader(body))}, nil
		})
		tr, err := NewTransport(SinkFunc(func(schema.Attempt) {}), TransportOptions{Base: base, Service: "bench", Provider: "anthropic"})
		if err != nil {
			b.Fatal(err)
		}
		for _, rt := range []struct {
			name string
			rt   http.RoundTripper
		}{{"bare", base}, {"metered", tr}} {
			b.Run(tc.name+"/"+rt.name, func(b *testing.B) {
				buf := make([]byte, 512)
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for range b.N {
					req, _ := http.NewRequest(http.MethodPost, "https://api.anthropic.com"+tc.path, strings.NewReader(reqBody))
					req.Header.Set("Content-Type", "application/json")
					resp, err := rt.rt.RoundTrip(req)
					if err != nil {
						b.Fatal(err)
					}
					for {
						if _, err := resp.Body.Read(buf); err != nil {
							break
						}
					}
					_ = resp.Body.Close()
				}
			})
		}
	}
}
