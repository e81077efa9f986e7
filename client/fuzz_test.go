package client

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/schema"
)

// chunkReader returns its bytes n at a time, like a network read.
type chunkReader struct {
	b []byte
	n int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p[:min(len(p), r.n)], r.b)
	r.b = r.b[k:]
	return k, nil
}

// fuzzRoundTrip sends reqBody to path through a Transport whose base answers status, headers and
// respBody, read chunk bytes at a time, and returns what the caller read, what the base received
// and the records.
func fuzzRoundTrip(t *testing.T, path string, reqBody []byte, status int, contentType, header string,
	respBody []byte, chunk int) ([]byte, []byte, []schema.Attempt) {
	t.Helper()
	var sent []byte
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			sent, _ = io.ReadAll(r.Body)
			_ = r.Body.Close()
		}
		h := http.Header{}
		h.Set("Content-Type", contentType)
		h.Set("Retry-After", header)
		h.Set("Request-Id", header)
		for _, name := range []string{"anthropic-ratelimit-requests-limit", "anthropic-ratelimit-requests-remaining",
			"anthropic-ratelimit-tokens-reset", "openai-organization"} {
			h.Set(name, header)
		}
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(&chunkReader{respBody, chunk})}, nil
	})
	c := &capture{}
	tr, err := NewTransport(c, TransportOptions{Base: base, Service: "fuzz"})
	if err != nil {
		t.Fatal(err)
	}
	req := (&http.Request{
		Method: http.MethodPost, URL: &url.URL{Scheme: "https", Host: "api.example.com", Path: path},
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(reqBody)),
	}).WithContext(context.Background())
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return got, sent, c.all()
}

// FuzzTransport sends arbitrary provider answers through the Transport: whatever a provider sends,
// the caller must get it unchanged, the request must go out unchanged, exactly one record must come
// out and the ledger must accept it, however the body is split into reads.
func FuzzTransport(f *testing.F) {
	f.Fuzz(func(t *testing.T, path string, reqBody []byte, status int, contentType, header string,
		respBody []byte, chunk int) {
		status = 200 + int(uint(status)%400)
		chunk = 1 + int(uint(chunk)%97)
		got, sent, recs := fuzzRoundTrip(t, path, reqBody, status, contentType, header, respBody, chunk)
		if !bytes.Equal(got, respBody) {
			t.Fatalf("caller got %q, provider sent %q", got, respBody)
		}
		if !bytes.Equal(sent, reqBody) {
			t.Fatalf("provider got %q, caller sent %q", sent, reqBody)
		}
		if len(recs) != 1 {
			t.Fatalf("%d records", len(recs))
		}
		a := recs[0]
		_, _, whole := fuzzRoundTrip(t, path, reqBody, status, contentType, header, respBody, len(respBody)+1)
		if !reflect.DeepEqual(outcome(a), outcome(whole[0])) {
			t.Fatalf("reads of %d bytes give\n%+v\nreads of all give\n%+v", chunk, outcome(a), outcome(whole[0]))
		}
		if ferr := a.Validate(time.Now()); ferr != nil {
			t.Fatalf("record refused by the ledger: %v: %+v", ferr, a)
		}
	})
}

// FuzzSSEParser checks that the SSE parser and each dialect's meter see the same events and reach the
// same usage and outcome whatever the chunking of the stream.
func FuzzSSEParser(f *testing.F) {
	f.Fuzz(func(t *testing.T, d uint8, stream []byte, chunk int) {
		chunk = 1 + int(uint(chunk)%61)
		whole, split := parseSSE(stream, 0), parseSSE(stream, chunk)
		if !reflect.DeepEqual(whole, split) {
			t.Fatalf("chunks of %d: %q, whole: %q", chunk, split, whole)
		}
		run := func(evs []event) meter {
			m := meter{dialect: dialect(d % 5)}
			for _, e := range evs {
				m.event([]byte(e.name), []byte(e.data))
			}
			return m
		}
		m := run(whole)
		if m2 := run(split); m.usage != m2.usage || m.failed != m2.failed || m.complete != m2.complete {
			t.Fatalf("meters differ: %+v vs %+v", m, m2)
		}
		var a schema.Attempt
		m.usage.apply(&a)
		if a.CacheWrite1hTokens > a.CacheWriteTokens || a.ReasoningTokens > a.OutputTokens ||
			a.InputTokens < 0 || a.OutputTokens > schema.MaxTokens {
			t.Fatalf("counts out of the ledger's rules: %+v", m.usage)
		}
	})
}
