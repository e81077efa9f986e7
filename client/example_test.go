package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/client"
	"github.com/ledgerd/ledgerd/schema"
)

// A Reporter batches records and sends them to ledgerd in the background; Close sends what is left.
func ExampleReporter() {
	// A stand-in for ledgerd's ingest API.
	var received atomic.Int64
	ledgerd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch []schema.Attempt
		if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		received.Add(int64(len(batch)))
		fmt.Fprintf(w, `{"accepted":%d,"duplicates":0,"rejected":[]}`, len(batch))
	}))
	defer ledgerd.Close()

	rep, err := client.NewReporter(client.ReporterOptions{
		Endpoint:      ledgerd.URL,
		APIKey:        "ldk_example",
		MaxBatch:      100,
		FlushInterval: time.Second,
		Registerer:    prometheus.NewRegistry(), // your service's registry
	})
	if err != nil {
		log.Fatal(err)
	}
	for i := range 3 {
		rep.Report(schema.Attempt{
			AttemptID: fmt.Sprintf("a%d", i), RequestID: "ticket-42", AttemptNo: i + 1,
			StartedAt: time.Now(), LatencyMS: 900, Provider: "anthropic", Model: "claude-haiku-5-5",
			Service: "support-bot", Status: schema.StatusOK, InputTokens: 70, OutputTokens: 9,
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rep.Close(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("ledgerd received", received.Load(), "records")
	// Output: ledgerd received 3 records
}

// A Transport in a plain http.Client records each HTTP attempt; in production give it a *Reporter as
// its sink and the client to the provider's SDK.
func ExampleTransport() {
	// A stand-in for the OpenAI API.
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-request-id", "req_7f3a")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-2024-08-06",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"billing"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":3926,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":3840}}}`)
	}))
	defer provider.Close()

	sink := client.SinkFunc(func(a schema.Attempt) {
		fmt.Printf("%s %s, %s attempt %d: %s, input %d, cache read %d, output %d, provider id %s\n",
			a.Provider, a.Model, a.RequestID, a.AttemptNo, a.Status, a.InputTokens, a.CacheReadTokens,
			a.OutputTokens, a.ProviderRequestID)
	})
	tr, err := client.NewTransport(sink, client.TransportOptions{
		Service:  "support-bot",
		Provider: "openai", // the stand-in's host does not say; api.openai.com would
	})
	if err != nil {
		log.Fatal(err)
	}
	hc := &http.Client{Transport: tr}

	ctx := client.WithRequest(context.Background(), client.Call{
		RequestID: "ticket-42", Operation: "classify", Tenant: "acme",
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, provider.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o","messages":[{"role":"user","content":"Where is my invoice?"}]}`))
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body) // the attempt is recorded when the body ends
	_ = resp.Body.Close()
	// Output: openai gpt-4o, ticket-42 attempt 1: ok, input 86, cache read 3840, output 9, provider id req_7f3a
}
