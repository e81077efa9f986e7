package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/schema"
)

const (
	anthropicReq = `{"model":"claude-haiku-5-5","max_tokens":64,"messages":[{"role":"user","content":"SECRET PROMPT"}]}`
	anthropicSSE = `{"model":"claude-haiku-5-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"SECRET PROMPT"}]}`
	chatReq      = `{"model":"gpt-4o","messages":[{"role":"user","content":"SECRET PROMPT"}]}`
	chatSSE      = `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"SECRET PROMPT"}]}`
	responsesReq = `{"model":"gpt-5-mini","input":"SECRET PROMPT"}`
	geminiReq    = `{"contents":[{"role":"user","parts":[{"text":"SECRET PROMPT"}]}]}`
)

// newTestTransport returns a Transport over srv's client transport, recording into a capture.
func newTestTransport(t *testing.T, srv *httptest.Server, provider string) (*http.Client, *capture) {
	t.Helper()
	c := &capture{}
	tr, err := NewTransport(c, TransportOptions{Base: srv.Client().Transport, Service: "test-svc", Provider: provider})
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: tr}, c
}

// post sends body to srv at path with ctx and reads the whole answer.
func post(ctx context.Context, t *testing.T, hc *http.Client, url, body string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// outcome keeps the fields of a record a test compares: what the Transport worked out, not the ids
// and times it generated.
func outcome(a schema.Attempt) schema.Attempt {
	a.AttemptID, a.RequestID, a.StartedAt, a.LatencyMS = "", "", time.Time{}, 0
	return a
}

func TestTransportProviderResponses(t *testing.T) {
	t.Parallel()
	ok := func(provider, model string, status int, in, cw, cw1h, cr, out, reasoning int64) schema.Attempt {
		return schema.Attempt{
			AttemptNo: 1, Provider: provider, Model: model, Service: "test-svc", Status: schema.StatusOK,
			HTTPStatus: status, InputTokens: in, CacheWriteTokens: cw, CacheWrite1hTokens: cw1h,
			CacheReadTokens: cr, OutputTokens: out, ReasoningTokens: reasoning,
		}
	}
	failed := func(a schema.Attempt, class schema.ErrorClass) schema.Attempt {
		a.Status, a.ErrorClass = schema.StatusError, class
		return a
	}
	withIDs := func(a schema.Attempt, reqID string, retryMS int64) schema.Attempt {
		a.ProviderRequestID, a.RetryAfterMS = reqID, retryMS
		return a
	}
	cases := []struct {
		name     string
		provider string
		path     string
		body     string
		rep      reply
		want     schema.Attempt
	}{
		{ // Anthropic JSON: input excludes the cache read; request id from the request-id header
			"anthropic message", "anthropic", "/v1/messages", anthropicReq,
			reply{status: 200, file: "anthropic-message.json", header: map[string]string{"request-id": "req_01A"}},
			withIDs(ok("anthropic", "claude-haiku-5-5", 200, 70, 0, 0, 3856, 9, 0), "req_01A", 0),
		},
		{ // Anthropic SSE: message_start counts overwritten by the cumulative message_delta
			"anthropic stream", "anthropic", "/v1/messages", anthropicSSE,
			reply{status: 200, file: "anthropic-stream.sse"},
			ok("anthropic", "claude-haiku-5-5", 200, 70, 3856, 0, 0, 12, 0),
		},
		{ // Anthropic 1h cache writes are the ephemeral_1h part of cache_creation_input_tokens
			"anthropic 1h cache write", "anthropic", "/v1/messages", anthropicReq,
			reply{status: 200, body: `{"type":"message","model":"claude-haiku-5-5","usage":{"input_tokens":10,` +
				`"cache_creation_input_tokens":2000,"cache_read_input_tokens":0,"cache_creation":` +
				`{"ephemeral_5m_input_tokens":500,"ephemeral_1h_input_tokens":1500},"output_tokens":40}}`},
			ok("anthropic", "claude-haiku-5-5", 200, 10, 2000, 1500, 0, 40, 0),
		},
		{ // HTTP 200, then event: error (overloaded_error): an error attempt with the usage seen
			"anthropic overloaded mid-stream", "anthropic", "/v1/messages", anthropicSSE,
			reply{status: 200, file: "anthropic-stream-overloaded.sse"},
			failed(ok("anthropic", "claude-haiku-5-5", 200, 412, 0, 0, 0, 1, 0), schema.ErrorOverloaded),
		},
		{ // the 429 body: rate_limited, request id from the body, retry-after seconds in ms
			"anthropic 429", "anthropic", "/v1/messages", anthropicReq,
			reply{status: 429, file: "anthropic-error-429.json", header: map[string]string{"retry-after": "30"}},
			withIDs(failed(ok("anthropic", "claude-haiku-5-5", 429, 0, 0, 0, 0, 0, 0), schema.ErrorRateLimited),
				"req_011CSHoEeqs5C35K2UUqR7Fy", 30000),
		},
		{ // 529 overloaded, with OpenAI's retry-after-ms preferred to retry-after
			"anthropic 529", "anthropic", "/v1/messages", anthropicReq,
			reply{status: 529, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
				header: map[string]string{"retry-after-ms": "1500", "retry-after": "2", "request-id": "req_9"}},
			withIDs(failed(ok("anthropic", "claude-haiku-5-5", 529, 0, 0, 0, 0, 0, 0), schema.ErrorOverloaded),
				"req_9", 1500),
		},
		{ // Chat Completions JSON: prompt_tokens includes cached_tokens; x-request-id
			"openai chat", "openai", "/v1/chat/completions", chatReq,
			reply{status: 200, file: "openai-chat.json", header: map[string]string{"x-request-id": "req_abc"}},
			withIDs(ok("openai", "gpt-4o", 200, 86, 0, 0, 3840, 9, 0), "req_abc", 0),
		},
		{ // Chat Completions SSE: usage only in the last chunk before [DONE]
			"openai chat stream", "openai", "/v1/chat/completions", chatSSE,
			reply{status: 200, file: "openai-chat-stream.sse"},
			ok("openai", "gpt-4o", 200, 86, 0, 0, 3840, 9, 0),
		},
		{ // a chat stream sent without stream_options.include_usage carries no usage: the record says
			// usage unknown, so the ledger never prices it at $0
			"openai chat stream without usage", "openai", "/v1/chat/completions",
			`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"SECRET PROMPT"}]}`,
			reply{status: 200, header: map[string]string{"content-type": "text/event-stream"}, body: "data: " +
				`{"object":"chat.completion.chunk","model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}` +
				"\n\ndata: " + `{"object":"chat.completion.chunk","model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` +
				"\n\ndata: [DONE]\n\n"},
			func() schema.Attempt {
				a := ok("openai", "gpt-4o", 200, 0, 0, 0, 0, 0, 0)
				a.UsageUnknown = true
				return a
			}(),
		},
		{ // a request naming no model (an Azure deployment) takes the model the response names
			"model from response", "azure.ai.openai", "/openai/deployments/d1/chat/completions",
			`{"messages":[]}`, reply{status: 200, file: "openai-chat.json"},
			ok("azure.ai.openai", "gpt-4o-2024-08-06", 200, 86, 0, 0, 3840, 9, 0),
		},
		{ // Responses JSON: reasoning tokens are part of output
			"openai responses", "openai", "/v1/responses", responsesReq,
			reply{status: 200, file: "openai-responses.json"},
			ok("openai", "gpt-5-mini", 200, 86, 0, 0, 3840, 201, 192),
		},
		{ // Responses SSE: usage in response.completed
			"openai responses stream", "openai", "/v1/responses", responsesReq,
			reply{status: 200, file: "openai-responses-stream.sse"},
			ok("openai", "gpt-5-mini", 200, 86, 0, 0, 3840, 201, 192),
		},
		{ // OpenAI 429 whose quota is spent: quota_exhausted, not rate_limited
			"openai insufficient quota", "openai", "/v1/chat/completions", chatReq,
			reply{status: 429, body: `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.",` +
				`"type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`},
			failed(ok("openai", "gpt-4o", 429, 0, 0, 0, 0, 0, 0), schema.ErrorQuotaExhausted),
		},
		{ // a 500 without a body: server_error from the status alone
			"openai 500", "openai", "/v1/chat/completions", chatReq,
			reply{status: 500, body: ""},
			failed(ok("openai", "gpt-4o", 500, 0, 0, 0, 0, 0, 0), schema.ErrorServer),
		},
		{ // Gemini JSON: model from the URL path; output = candidates + thoughts
			"gemini generate", "gcp.gemini", "/v1beta/models/gemini-2.5-flash:generateContent", geminiReq,
			reply{status: 200, file: "gemini-generate.json"},
			ok("gcp.gemini", "gemini-2.5-flash", 200, 86, 0, 0, 3840, 152, 150),
		},
		{ // Gemini SSE with CRLF line ends: the last chunk's counts win
			"gemini stream", "gcp.gemini", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", geminiReq,
			reply{status: 200, file: "gemini-stream.sse"},
			ok("gcp.gemini", "gemini-2.5-flash", 200, 86, 0, 0, 3840, 152, 150),
		},
		{ // Gemini's 429 names RESOURCE_EXHAUSTED: still rate_limited by its status
			"gemini 429", "gcp.gemini", "/v1beta/models/gemini-2.5-flash:generateContent", geminiReq,
			reply{status: 429, body: `{"error":{"code":429,"message":"Resource has been exhausted.","status":"RESOURCE_EXHAUSTED"}}`},
			failed(ok("gcp.gemini", "gemini-2.5-flash", 429, 0, 0, 0, 0, 0, 0), schema.ErrorRateLimited),
		},
		{ // a gateway path with no known usage format, naming a model, is recorded without usage
			"unknown path", "anthropic", "/gateway/generate", anthropicReq,
			reply{status: 200, body: `{"tokens":12}`},
			ok("anthropic", "claude-haiku-5-5", 200, 0, 0, 0, 0, 0, 0),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := serveReply(t, tc.rep)
			hc, c := newTestTransport(t, srv, tc.provider)
			_, got, err := post(context.Background(), t, hc, srv.URL+tc.path, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			want := []byte(tc.rep.body)
			if tc.rep.file != "" {
				want = fixture(t, tc.rep.file)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("caller got a changed body:\n%s\nwant\n%s", got, want)
			}
			a := c.one(t)
			if diff := outcome(a); !reflect.DeepEqual(diff, tc.want) {
				t.Errorf("record\n got %+v\nwant %+v", diff, tc.want)
			}
			checkRecord(t, a)
		})
	}
}

// checkRecord checks what every record must satisfy: it passes the ledger's validation, has
// random ids, and holds no prompt text.
func checkRecord(t *testing.T, a schema.Attempt) {
	t.Helper()
	if ferr := a.Validate(time.Now()); ferr != nil {
		t.Errorf("record fails validation: %v: %+v", ferr, a)
	}
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	if !hex32.MatchString(a.AttemptID) {
		t.Errorf("attempt id %q is not 32 hex digits", a.AttemptID)
	}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("SECRET")) || bytes.Contains(b, []byte("billing")) {
		t.Errorf("record holds prompt or reply text: %s", b)
	}
}

// cutServer streams the first events of file, then breaks the connection (abort) or ends the
// response cleanly.
func cutServer(t *testing.T, file string, events int, abort bool) *httptest.Server {
	t.Helper()
	parts := bytes.SplitAfter(fixture(t, file), []byte("\n\n"))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, p := range parts[:events] {
			_, _ = w.Write(p)
			w.(http.Flusher).Flush()
		}
		if abort {
			panic(http.ErrAbortHandler)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestTransportStreamCut(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		file      string
		path      string
		events    int
		abort     bool
		in, cw    int64
		cr, out   int64
		wantClass schema.ErrorClass
	}{
		// Anthropic stream broken after message_start: the counts seen so far are kept
		{"anthropic broken", "anthropic-stream.sse", "/v1/messages", 5, true, 70, 3856, 0, 1, schema.ErrorConnection},
		// the same stream ended cleanly but early (a proxy closing it): still cut
		{"anthropic ended early", "anthropic-stream.sse", "/v1/messages", 5, false, 70, 3856, 0, 1, schema.ErrorConnection},
		// Chat stream broken before the usage chunk: no usage at all
		{"chat broken", "openai-chat-stream.sse", "/v1/chat/completions", 2, true, 0, 0, 0, 0, schema.ErrorConnection},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := cutServer(t, tc.file, tc.events, tc.abort)
			hc, c := newTestTransport(t, srv, "p")
			_, _, err := post(context.Background(), t, hc, srv.URL+tc.path, chatSSE)
			if tc.abort && err == nil {
				t.Fatal("reading a broken stream did not fail")
			}
			a := c.one(t)
			if a.Status != schema.StatusError || a.ErrorClass != tc.wantClass {
				t.Errorf("status %s/%s, want error/%s", a.Status, a.ErrorClass, tc.wantClass)
			}
			if a.InputTokens != tc.in || a.CacheWriteTokens != tc.cw || a.CacheReadTokens != tc.cr || a.OutputTokens != tc.out {
				t.Errorf("usage in=%d cw=%d cr=%d out=%d, want %d %d %d %d", a.InputTokens, a.CacheWriteTokens,
					a.CacheReadTokens, a.OutputTokens, tc.in, tc.cw, tc.cr, tc.out)
			}
			checkRecord(t, a)
		})
	}
}

// holdServer streams the first events of file (all when events is 0), then holds the response open
// until the client goes away.
func holdServer(t *testing.T, file string, events int) *httptest.Server {
	t.Helper()
	parts := bytes.SplitAfter(fixture(t, file), []byte("\n\n"))
	if events > 0 {
		parts = parts[:events]
	}
	body := bytes.Join(parts, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.Copy(io.Discard, r.Body) // the server notices a client gone only once the body is read
		_, _ = w.Write(body)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestTransportStreamStoppedByCaller(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		events int    // the server sends these events (0: all), then holds the stream open
		until  string // the caller reads until it has seen this
		cancel bool   // then cancels the context and reads on (else closes the body)
		want   schema.Status
		out    int64
	}{
		// the caller closes after [DONE], before EOF, as SDKs do: a complete attempt
		{"close after done", 0, "[DONE]\n", false, schema.StatusOK, 9},
		// the caller closes halfway: cancelled, with no usage seen
		{"close halfway", 0, `"billing"`, false, schema.StatusCancelled, 0},
		// the caller cancels its context while the stream waits for more: cancelled
		{"cancel halfway", 2, `"billing"`, true, schema.StatusCancelled, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := holdServer(t, "openai-chat-stream.sse", tc.events)
			hc, c := newTestTransport(t, srv, "openai")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(chatSSE))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var seen []byte
			buf := make([]byte, 64)
			for !bytes.Contains(seen, []byte(tc.until)) {
				n, err := resp.Body.Read(buf)
				seen = append(seen, buf[:n]...)
				if err != nil {
					t.Fatalf("stream ended before %q: %v", tc.until, err)
				}
			}
			if len(c.all()) != 0 {
				t.Fatal("recorded before the stream ended")
			}
			if tc.cancel {
				cancel()
				if _, err := io.Copy(io.Discard, resp.Body); err == nil {
					t.Error("reading on after cancel did not fail")
				}
			}
			_ = resp.Body.Close()
			a := c.one(t)
			if a.Status != tc.want || a.OutputTokens != tc.out {
				t.Errorf("status %s output %d, want %s %d", a.Status, a.OutputTokens, tc.want, tc.out)
			}
			checkRecord(t, a)
		})
	}
}

func TestTransportNoResponse(t *testing.T) {
	t.Parallel()
	hang := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the server notices a client gone only once the body is read
		<-r.Context().Done()
	}
	cases := []struct {
		name    string
		closed  bool // the server is gone before the request
		timeout bool // the context has a short deadline (else it is cancelled)
		status  schema.Status
		class   schema.ErrorClass
	}{
		// nothing listens: connection_error
		{"refused", true, false, schema.StatusError, schema.ErrorConnection},
		// the caller's deadline passes while waiting for headers: timeout
		{"deadline", false, true, schema.StatusError, schema.ErrorTimeout},
		// the caller cancels while waiting for headers: cancelled
		{"cancelled", false, false, schema.StatusCancelled, schema.ErrorCancelled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(hang))
			t.Cleanup(srv.Close)
			hc, c := newTestTransport(t, srv, "openai")
			if tc.closed {
				srv.Close()
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.timeout {
				ctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
			} else if !tc.closed {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
			if _, _, err := post(ctx, t, hc, srv.URL+"/v1/chat/completions", chatReq); err == nil {
				t.Fatal("request did not fail")
			}
			a := c.one(t)
			if a.Status != tc.status || a.ErrorClass != tc.class || a.HTTPStatus != 0 {
				t.Errorf("got %s/%s http %d, want %s/%s", a.Status, a.ErrorClass, a.HTTPStatus, tc.status, tc.class)
			}
			checkRecord(t, a)
		})
	}
}

func TestTransportAttemptNumbers(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) <= 2 {
			w.WriteHeader(529)
			_, _ = w.Write([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
			return
		}
		_, _ = w.Write(fixture(t, "anthropic-message.json"))
	}))
	t.Cleanup(srv.Close)
	hc, c := newTestTransport(t, srv, "anthropic")
	ctx := WithRequest(context.Background(), Call{
		RequestID: "ticket-42", Service: "triage", Operation: "classify", Tenant: "acme", PromptHash: "ph1",
	})
	// An SDK retrying by itself: three HTTP attempts with the same context.
	for range 3 {
		if _, _, err := post(ctx, t, hc, srv.URL+"/v1/messages", anthropicReq); err != nil {
			t.Fatal(err)
		}
	}
	// The service falls back to another model for the same logical request.
	fb := WithFallback(ctx, "claude-haiku-5-5")
	if _, _, err := post(fb, t, hc, srv.URL+"/v1/messages", strings.Replace(anthropicReq, "haiku", "sonnet", 1)); err != nil {
		t.Fatal(err)
	}
	// A request without a call of its own is a logical request of its own.
	if _, _, err := post(context.Background(), t, hc, srv.URL+"/v1/messages", anthropicReq); err != nil {
		t.Fatal(err)
	}
	got := c.all()
	if len(got) != 5 {
		t.Fatalf("got %d records, want 5", len(got))
	}
	cases := []struct {
		no       int
		reqID    string
		status   schema.Status
		fallback bool
		model    string
	}{
		{1, "ticket-42", schema.StatusError, false, "claude-haiku-5-5"}, // first try: overloaded
		{2, "ticket-42", schema.StatusError, false, "claude-haiku-5-5"}, // the SDK's first retry
		{3, "ticket-42", schema.StatusOK, false, "claude-haiku-5-5"},    // the SDK's second retry succeeds
		{4, "ticket-42", schema.StatusOK, true, "claude-sonnet-5-5"},    // the fallback continues the numbering
		{1, "", schema.StatusOK, false, "claude-haiku-5-5"},             // no call: a new request id, attempt 1
	}
	for i, want := range cases {
		a := got[i]
		if a.AttemptNo != want.no || a.Status != want.status || a.Fallback != want.fallback || a.Model != want.model {
			t.Errorf("record %d: no %d status %s fallback %v model %s, want %+v", i, a.AttemptNo, a.Status, a.Fallback, a.Model, want)
		}
		if want.reqID != "" {
			if a.RequestID != want.reqID || a.Service != "triage" || a.Operation != "classify" || a.Tenant != "acme" || a.PromptHash != "ph1" {
				t.Errorf("record %d does not carry the call: %+v", i, a)
			}
		} else if a.RequestID == "ticket-42" || len(a.RequestID) != 32 || a.Service != "test-svc" {
			t.Errorf("record %d: want a generated request id and the default service, got %+v", i, a)
		}
		checkRecord(t, a)
	}
	if got[3].FallbackFrom != "claude-haiku-5-5" {
		t.Errorf("fallback_from %q", got[3].FallbackFrom)
	}
	if got[0].AttemptID == got[1].AttemptID {
		t.Error("attempt ids repeat")
	}
}

// onlyReader hides every method but Read, so http.NewRequest sets no GetBody.
type onlyReader struct{ io.Reader }

func TestTransportRequestBodyUntouched(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		body    func() io.Reader
		getBody bool
	}{
		// a strings.Reader body: http.NewRequest sets GetBody
		{"with GetBody", func() io.Reader { return strings.NewReader(chatReq) }, true},
		// a plain reader: no GetBody, the body is read once and sent on
		{"without GetBody", func() io.Reader { return onlyReader{strings.NewReader(chatReq)} }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			received := make(chan string, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				received <- string(b)
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(fixture(t, "openai-chat.json"))
			}))
			t.Cleanup(srv.Close)
			hc, c := newTestTransport(t, srv, "openai")
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", tc.body())
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			if (req.GetBody != nil) != tc.getBody {
				t.Fatalf("GetBody set: %v", req.GetBody != nil)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if got := <-received; got != chatReq {
				t.Errorf("server got %q, want %q", got, chatReq)
			}
			if tc.getBody {
				rc, _ := req.GetBody()
				b, _ := io.ReadAll(rc)
				if string(b) != chatReq {
					t.Errorf("GetBody now gives %q", b)
				}
			}
			if a := c.one(t); a.Model != "gpt-4o" {
				t.Errorf("model %q", a.Model)
			}
		})
	}
}

func TestTransportLatency(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		status int
		want   int64
	}{
		// a success runs to the end of its body
		{"ok to end of body", 200, 1500},
		// an error runs to its headers
		{"error to headers", 500, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := &fixedClock{now: t0}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				clock.set(t0.Add(200 * time.Millisecond))
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = w.Write(fixture(t, "openai-chat.json"))
			}))
			t.Cleanup(srv.Close)
			c := &capture{}
			tr, err := NewTransport(c, TransportOptions{Base: srv.Client().Transport, Service: "s", Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(chatReq))
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			clock.set(t0.Add(1500 * time.Millisecond))
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			a := c.one(t)
			if a.LatencyMS != tc.want || !a.StartedAt.Equal(t0) {
				t.Errorf("latency %d started %v, want %d %v", a.LatencyMS, a.StartedAt, tc.want, t0)
			}
			if a.Provider != "127.0.0.1" {
				t.Errorf("provider %q, want the host", a.Provider)
			}
		})
	}
}

func TestNewTransportErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		sink Sink
		opts TransportOptions
	}{
		{"no sink", nil, TransportOptions{Service: "s"}},                                  // a Transport must record somewhere
		{"no service", &capture{}, TransportOptions{}},                                    // every record needs a service
		{"bad service", &capture{}, TransportOptions{Service: "a\nb"}},                    // the ledger would refuse it
		{"long service", &capture{}, TransportOptions{Service: strings.Repeat("s", 129)}}, // over 128 bytes
		{"bad provider", &capture{}, TransportOptions{Service: "s", Provider: "\x00"}},    // the ledger would refuse it
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := NewTransport(tc.sink, tc.opts); err == nil {
				t.Error("no error")
			}
		})
	}
}

// TestTransportSkipsFreeCalls guards the reliability figures: listing models and counting tokens
// are not model attempts, so they pass through unrecorded.
func TestTransportSkipsFreeCalls(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, method, path, body string }{
		{"anthropic token count", http.MethodPost, "/v1/messages/count_tokens", anthropicReq},             // names a model, costs nothing
		{"gemini token count", http.MethodPost, "/v1beta/models/gemini-2.5-flash:countTokens", geminiReq}, // model in the path
		{"model list", http.MethodGet, "/v1/models", ""},                                                  // no model at all
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := serveReply(t, reply{status: 200, body: `{}`})
			hc, c := newTestTransport(t, srv, "anthropic")
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if got := c.all(); len(got) != 0 {
				t.Errorf("recorded %+v", got)
			}
		})
	}
}

// errReader fails every read.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("disk gone") }

func TestTransportRequestBodyError(t *testing.T) {
	t.Parallel()
	c := &capture{}
	base := roundTripFunc(func(*http.Request) (*http.Response, error) {
		t.Error("the request was sent")
		return nil, errors.New("unreachable")
	})
	tr, err := NewTransport(c, TransportOptions{Base: base, Service: "s", Provider: "openai"})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://api.openai.com/v1/chat/completions", errReader{})
	if _, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "disk gone") {
		t.Errorf("error %v", err)
	}
	// Nothing reached the provider, so there was no attempt to record.
	if got := c.all(); len(got) != 0 {
		t.Errorf("recorded %+v", got)
	}
}

// roundTripFunc adapts a function to an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestTransportOddResponses(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe() // a body that never ends
	t.Cleanup(func() { _ = pw.Close() })
	cases := []struct {
		name   string
		resp   *http.Response
		ctx    func() context.Context
		status schema.Status
		no     int
	}{
		// a WebSocket upgrade: recorded at once, its body (the session) never read
		{"switching protocols", &http.Response{StatusCode: 101, Header: http.Header{}, Body: pr}, context.Background, schema.StatusOK, 1},
		// a 204 without a body: recorded at once
		{"no body", &http.Response{StatusCode: 204, Header: http.Header{}, Body: http.NoBody}, context.Background, schema.StatusOK, 1},
		// a broken base returning a nil body does not crash the caller
		{"nil body", &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}}, context.Background, schema.StatusError, 1},
		// a runaway retry loop: the attempt number stays within the ledger's limit
		{"attempt number capped", &http.Response{StatusCode: 204, Header: http.Header{}, Body: http.NoBody}, func() context.Context {
			ctx := WithRequest(context.Background(), Call{RequestID: "r"})
			ctx.Value(callKey{}).(*callState).attempts.Store(schema.MaxAttemptNo + 5)
			return ctx
		}, schema.StatusOK, schema.MaxAttemptNo},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &capture{}
			base := roundTripFunc(func(*http.Request) (*http.Response, error) { return tc.resp, nil })
			tr, err := NewTransport(c, TransportOptions{Base: base, Service: "s"})
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequestWithContext(tc.ctx(), http.MethodPost, "https://api.openai.com/v1/chat/completions", strings.NewReader(chatReq))
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			if tc.resp.StatusCode != 101 {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
			a := c.one(t)
			if a.Status != tc.status || a.AttemptNo != tc.no || a.Provider != "openai" {
				t.Errorf("got %s attempt %d provider %s, want %s %d openai", a.Status, a.AttemptNo, a.Provider, tc.status, tc.no)
			}
			checkRecord(t, a)
		})
	}
}

// TestTransportJSONClosedUnread guards the bill: a caller that closes a JSON answer without reading
// it was still charged, so the attempt is recorded as answered, with its usage.
func TestTransportJSONClosedUnread(t *testing.T) {
	t.Parallel()
	srv := serveReply(t, reply{status: 200, file: "anthropic-message.json"})
	hc, c := newTestTransport(t, srv, "anthropic")
	resp, err := hc.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(anthropicReq))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	a := c.one(t)
	if a.Status != schema.StatusOK || a.InputTokens != 70 || a.CacheReadTokens != 3856 || a.OutputTokens != 9 {
		t.Errorf("got %s with %d/%d/%d tokens", a.Status, a.InputTokens, a.CacheReadTokens, a.OutputTokens)
	}
}

// TestTransportGroupsSDKRetries sends calls as the Anthropic and OpenAI Go SDKs do, without
// WithRequest: one request cloned per attempt, X-Stainless-Retry-Count 0, 1, 2 (or, in other
// Stainless SDKs, one Idempotency-Key for every attempt). The SDK's retries of one call must share
// a request id and be numbered 1, 2, 3; the next call, even with the same body, is a new one.
func TestTransportGroupsSDKRetries(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if n := calls.Add(1); n == 1 || n == 2 || n == 5 {
			w.WriteHeader(529)
			_, _ = w.Write([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
			return
		}
		_, _ = w.Write(fixture(t, "anthropic-message.json"))
	}))
	t.Cleanup(srv.Close)
	hc, c := newTestTransport(t, srv, "anthropic")
	// sdkCall is the SDKs' retry loop: the same request cloned, the retry count in a header.
	sdkCall := func(header string, value func(retry int) string) {
		t.Helper()
		for retry := 0; retry <= 2; retry++ {
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(anthropicReq))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(header, value(retry))
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
	}
	count := func(retry int) string { return strconv.Itoa(retry) }
	sdkCall("X-Stainless-Retry-Count", count)                                         // 529, 529, 200: one call of three attempts
	sdkCall("X-Stainless-Retry-Count", count)                                         // the same body again, 200 at once: a new call
	sdkCall("Idempotency-Key", func(int) string { return "stainless-go-retry-7f3c" }) // 529, 200
	got := c.all()
	if len(got) != 6 {
		t.Fatalf("got %d records, want 6", len(got))
	}
	want := []struct {
		call, no int
	}{{0, 1}, {0, 2}, {0, 3}, {1, 1}, {2, 1}, {2, 2}}
	ids := map[int]string{}
	for i, w := range want {
		a := got[i]
		if a.AttemptNo != w.no {
			t.Errorf("record %d: attempt %d, want %d", i, a.AttemptNo, w.no)
		}
		if id, ok := ids[w.call]; ok && id != a.RequestID {
			t.Errorf("record %d: request id %s, want %s (the same call)", i, a.RequestID, id)
		}
		ids[w.call] = a.RequestID
		checkRecord(t, a)
	}
	if ids[0] == ids[1] || ids[1] == ids[2] || ids[0] == ids[2] {
		t.Errorf("three calls share request ids: %v", ids)
	}
	if n := len(hcTransport(hc).retries.calls); n != 0 {
		t.Errorf("%d calls still remembered after every call succeeded", n)
	}
}

func hcTransport(hc *http.Client) *Transport { return hc.Transport.(*Transport) }
