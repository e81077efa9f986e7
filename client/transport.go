package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ledgerd/ledgerd/internal/ratelimits"
	"github.com/ledgerd/ledgerd/internal/retryafter"
	"github.com/ledgerd/ledgerd/schema"
)

// Sink receives the attempts a Transport records. *Reporter is one. Report is called on the caller's
// goroutine (inside RoundTrip or a response body's Read or Close) and must not block.
type Sink interface {
	Report(schema.Attempt)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(schema.Attempt)

// Report calls f(a).
func (f SinkFunc) Report(a schema.Attempt) { f(a) }

// TransportOptions configures a Transport.
type TransportOptions struct {
	// Base sends the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// Service names the calling service when the context's Call names none. Required.
	Service string
	// Provider names the provider of every request, overriding the name found from the host (needed
	// behind a proxy or gateway whose host says nothing of the provider).
	Provider string
	// Org names the provider organization (or key pool) the API key of this Transport bills to:
	// every key of one organization draws on the same rate limits, so give each Transport of a
	// key of that organization the same Org. When empty, the organization id the provider's answer
	// names (anthropic-organization-id, openai-organization) is recorded.
	Org string
	// Logger receives debug messages about responses whose usage could not be read; nil discards.
	Logger *slog.Logger
	// Now is the clock for started_at and latency; nil means time.Now.
	Now func() time.Time
}

// Transport is an http.RoundTripper that records one schema.Attempt per HTTP attempt passing
// through it: give it to the HTTP client of the Anthropic, OpenAI or Gemini SDK, or use it with a
// plain http.Client. It never changes what the caller sends or receives.
//
// What it records:
//   - provider from the host (or TransportOptions.Provider); model from the request body's "model"
//     field, else Gemini's URL path (models/{model}:generateContent), else the model the response
//     names, else "unknown";
//   - usage, converted to the ledger's non-overlapping counts, from Anthropic Messages, OpenAI Chat
//     Completions (streams need stream_options.include_usage), OpenAI Responses and Gemini
//     generateContent, plain JSON or SSE, chosen by the URL path; other paths are recorded without
//     usage. A 2xx answer of those APIs that carried no usage (a chat stream without
//     include_usage) is recorded with UsageUnknown: counted apart, never priced at $0;
//   - request id, service, operation, tenant and fallback from the context (WithRequest), with
//     attempts of the same logical request numbered 1, 2, 3, ... (the SDK's own retries included);
//     without a call in the context, the retries an SDK makes by itself are still numbered as
//     attempts of one logical request when it says so in its headers (X-Stainless-Retry-Count,
//     sent by the Anthropic and OpenAI Go SDKs; Idempotency-Key), and any other HTTP request is
//     its own logical request;
//   - status and error class from the HTTP status, the error body, or an error event inside a 2xx
//     stream; a stream that ends before its final event is a connection_error, with the usage seen so
//     far; a cancelled context gives status cancelled, a deadline the class timeout;
//   - the provider's request id (request-id, x-request-id or the error body's request_id) and
//     retry-after (retry-after-ms, or retry-after in seconds or as a date);
//   - the org (TransportOptions.Org) and, from every answer whatever its status, the rate limits
//     its headers report: Anthropic's anthropic-ratelimit-* and OpenAI's x-ratelimit-* limits,
//     remaining counts and resets (OpenAI's reset durations added to the time the answer came).
//
// When it records, and so what latency_ms means: a 2xx response is recorded when its body reaches
// its end, fails, or is closed, and its latency runs to that moment (the whole generation of a
// stream). Any other response is recorded when RoundTrip returns, with latency to the response
// headers; its body (up to 64 KiB) is read then to classify the error and stays readable for the
// caller. A 101 (a WebSocket upgrade) is recorded at once, without usage. A request that gets no
// response is recorded with latency to the failure.
//
// Streams are read as the caller reads them, never buffered whole nor delayed: the Transport keeps
// only the SSE event being assembled (up to 4 MiB). A plain JSON body is copied as it is read (up to
// 4 MiB) and parsed at its end. A JSON request body is read once into memory to find "model" and
// "stream" (no other field is parsed, no prompt text is kept), and the same bytes are sent on.
type Transport struct {
	base     http.RoundTripper
	sink     Sink
	service  string
	provider string
	org      string
	log      *slog.Logger
	now      func() time.Time
	// retries numbers an SDK's own retries of a call made without WithRequest.
	retries retryCalls
}

// NewTransport returns a Transport that hands its records to sink.
func NewTransport(sink Sink, opts TransportOptions) (*Transport, error) {
	if sink == nil {
		return nil, errors.New("ledgerd client: new transport: sink is nil")
	}
	if opts.Service == "" {
		return nil, errors.New("ledgerd client: new transport: Service is required")
	}
	if clean(opts.Service, schema.MaxNameLen) == "" {
		return nil, fmt.Errorf("ledgerd client: new transport: Service %q is not a valid name", opts.Service)
	}
	if opts.Provider != "" && clean(opts.Provider, schema.MaxNameLen) == "" {
		return nil, fmt.Errorf("ledgerd client: new transport: Provider %q is not a valid name", opts.Provider)
	}
	if opts.Org != "" && clean(opts.Org, schema.MaxNameLen) == "" {
		return nil, fmt.Errorf("ledgerd client: new transport: Org %q is not a valid name", opts.Org)
	}
	t := &Transport{
		base: opts.Base, sink: sink, service: opts.Service, provider: opts.Provider, org: opts.Org,
		log: opts.Logger, now: opts.Now,
	}
	if t.base == nil {
		t.base = http.DefaultTransport
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	if t.now == nil {
		t.now = time.Now
	}
	return t, nil
}

// maxErrorBody caps how much of a non-2xx body is read to classify the error.
const maxErrorBody = 64 << 10

// RoundTrip sends req through the base RoundTripper and records the attempt. Errors of the base
// RoundTripper are returned unchanged.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	out, fields, body, err := readRequest(req)
	if err != nil {
		return nil, fmt.Errorf("ledgerd client: read request body: %w", err)
	}
	if !modelCall(req, fields.Model) {
		// Listing models, counting tokens and other free calls are not attempts: recording them
		// would dilute error rates and attempts per call.
		return t.base.RoundTrip(out)
	}
	r := t.begin(req, body)
	if fields.Model != "" {
		r.a.Model = fields.Model
	}
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		r.failure(err)
		return nil, err
	}
	if resp.Body == nil { // a RoundTripper must not return one, but a broken base should not crash us
		resp.Body = http.NoBody
	}
	r.a.HTTPStatus = resp.StatusCode
	r.a.ProviderRequestID = clean(resp.Header.Get("Request-Id"), schema.MaxProviderReqLen)
	if r.a.ProviderRequestID == "" {
		r.a.ProviderRequestID = clean(resp.Header.Get("X-Request-Id"), schema.MaxProviderReqLen)
	}
	answered := t.now()
	if d, ok := retryafter.Parse(resp.Header, answered); ok {
		r.a.RetryAfterMS = d.Milliseconds()
	}
	r.a.RateLimits = ratelimits.Parse(resp.Header.Get, answered)
	if r.a.Org == "" {
		r.a.Org = ratelimits.Org(resp.Header.Get)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols { // a WebSocket session: its body is no response
		r.a.LatencyMS = r.elapsed()
		r.a.Status = schema.StatusOK
		r.report()
		return resp, nil
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		t.errorResponse(r, resp)
		return resp, nil
	}
	mode := responseMode(r.meter.dialect, resp, fields.Stream)
	if mode == modeOpaque && resp.Body == http.NoBody {
		r.finish(endEOF, nil, true)
		return resp, nil
	}
	mb := &meteredBody{rc: resp.Body, rec: r, mode: mode}
	mb.sse.emit = func(name, data []byte) { r.meter.event(name, data) }
	resp.Body = mb
	return resp, nil
}

// modelCall tells whether req asks a model for an answer: it goes to a known generation endpoint
// or names a model, and is not a token count.
func modelCall(req *http.Request, bodyModel string) bool {
	p := strings.ToLower(req.URL.Path)
	if strings.HasSuffix(p, "count_tokens") || strings.HasSuffix(p, ":counttokens") {
		return false
	}
	return dialectOf(req.URL.Path) != dialectNone || bodyModel != "" || modelFromPath(req.URL.Path) != ""
}

// begin starts the record of an attempt of req, whose body is body. Without a call in the
// context, an SDK's retries of one call are numbered by their headers (retries.go).
func (t *Transport) begin(req *http.Request, body []byte) *recording {
	ctx := req.Context()
	r := &recording{t: t, ctx: ctx, start: t.now(), meter: meter{dialect: dialectOf(req.URL.Path)}}
	call, no, inCall := nextAttempt(ctx)
	if !inCall {
		if c, n := t.retries.attempt(req, body, r.start); c != nil {
			r.retry, call.RequestID, no = c, c.requestID, n
		}
	}
	r.a = schema.Attempt{
		AttemptID: newID(), RequestID: call.RequestID, AttemptNo: min(no, schema.MaxAttemptNo), StartedAt: r.start,
		Provider: t.provider, Model: modelFromPath(req.URL.Path), Service: call.Service,
		Operation: call.Operation, Tenant: call.Tenant, Fallback: call.Fallback || call.FallbackFrom != "",
		FallbackFrom: call.FallbackFrom, PromptHash: call.PromptHash, Org: t.org,
	}
	if r.a.Provider == "" {
		r.a.Provider = providerOf(req.URL.Host)
	}
	if r.a.Provider == "" {
		r.a.Provider = "unknown"
	}
	if r.a.Service == "" {
		r.a.Service = t.service
	}
	return r
}

// errorResponse records a non-2xx response, classified by its status and body, and leaves the body
// readable for the caller.
func (t *Transport) errorResponse(r *recording, resp *http.Response) {
	r.a.LatencyMS = r.elapsed()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		t.log.Debug("ledgerd client: read error body", "status", resp.StatusCode, "err", err)
	}
	resp.Body = &readCloser{Reader: io.MultiReader(bytes.NewReader(b), resp.Body), Closer: resp.Body}
	e, reqID := parseErrorBody(b)
	if r.a.ProviderRequestID == "" {
		r.a.ProviderRequestID = reqID
	}
	r.a.Status, r.a.ErrorClass = schema.StatusError, classifyHTTP(resp.StatusCode, e)
	r.report()
}

type readCloser struct {
	io.Reader
	io.Closer
}

// bodyMode is how a 2xx body is read.
type bodyMode int

const (
	modeOpaque bodyMode = iota // passed through; usage unknown
	modeJSON                   // copied (bounded) and parsed at its end
	modeSSE                    // parsed event by event
)

func responseMode(d dialect, resp *http.Response, stream bool) bodyMode {
	if d == dialectNone {
		return modeOpaque
	}
	if enc := resp.Header.Get("Content-Encoding"); enc != "" && enc != "identity" {
		return modeOpaque
	}
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	switch {
	case mt == "text/event-stream", ct == "" && stream:
		return modeSSE
	case isJSON(ct, false):
		return modeJSON
	}
	return modeOpaque
}

// recording is the attempt being recorded.
type recording struct {
	t     *Transport
	ctx   context.Context
	start time.Time
	a     schema.Attempt
	meter meter
	// retry is the SDK call this attempt belongs to, when numbered by its retry headers.
	retry *retryCall
}

// elapsed is the latency so far in milliseconds, within the ledger's range whatever the clock does.
func (r *recording) elapsed() int64 {
	return min(max(r.t.now().Sub(r.start).Milliseconds(), 0), schema.MaxLatencyMS)
}

// failure records an attempt that got no response.
func (r *recording) failure(err error) {
	r.a.LatencyMS = r.elapsed()
	r.a.Status, r.a.ErrorClass = classifyFailure(r.ctx, err)
	r.report()
}

// end is how a 2xx body finished.
type end int

const (
	endEOF   end = iota // read to its end
	endError            // a read failed
	endClose            // closed before its end
)

// finish records a 2xx response whose body ended as how says; opaque reports whether its usage is
// unknown by design (an unparsed body), rather than missing.
func (r *recording) finish(how end, err error, opaque bool) {
	m := &r.meter
	r.a.LatencyMS = r.elapsed()
	switch {
	case m.failed != "":
		r.a.Status, r.a.ErrorClass = schema.StatusError, m.failed
	case m.complete || opaque && how != endError:
		r.a.Status = schema.StatusOK
	case how == endError:
		r.a.Status, r.a.ErrorClass = classifyFailure(r.ctx, err)
	case how == endEOF: // the body ended before the response was whole: a cut stream
		r.a.Status, r.a.ErrorClass = schema.StatusError, schema.ErrorConnection
	case errors.Is(r.ctx.Err(), context.DeadlineExceeded):
		r.a.Status, r.a.ErrorClass = schema.StatusError, schema.ErrorTimeout
	default: // the caller stopped reading
		r.a.Status, r.a.ErrorClass = schema.StatusCancelled, schema.ErrorCancelled
	}
	m.usage.apply(&r.a)
	if !m.hasUsage && !opaque && m.failed == "" {
		// The answer was billed but said nothing of its tokens (an OpenAI chat stream without
		// stream_options.include_usage): unknown, which the ledger never prices at $0.
		r.a.UsageUnknown = true
		r.t.log.Debug("ledgerd client: no usage in response", "provider", r.a.Provider, "model", r.a.Model,
			"request_id", r.a.RequestID)
	}
	r.report()
}

// report hands the attempt to the sink, naming the model "unknown" when nothing named it.
func (r *recording) report() {
	if r.a.Model == "" {
		r.a.Model = r.meter.model
	}
	if r.a.Model == "" {
		r.a.Model = "unknown"
	}
	if r.retry != nil {
		r.t.retries.done(r.retry, sdkRetries(&r.a), r.t.now())
	}
	r.t.sink.Report(r.a)
}

// meteredBody passes a 2xx body through to the caller, reading usage on the way, and records the
// attempt once, at the end of the body, at a read error, or at Close, whichever comes first.
type meteredBody struct {
	rc   io.ReadCloser
	rec  *recording
	mode bodyMode

	mu       sync.Mutex // guards the fields below; never held while reading rc
	sse      sseParser
	buf      []byte // modeJSON: the body so far
	overflow bool   // modeJSON: the body outgrew maxKept
	done     bool
}

// Read reads from the body and meters what it read.
func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return n, err
	}
	if n > 0 {
		b.feed(p[:n])
	}
	switch {
	case errors.Is(err, io.EOF):
		b.finish(endEOF, nil)
	case err != nil:
		b.finish(endError, err)
	}
	return n, err
}

// Close closes the body, recording the attempt if it was not yet.
// A JSON answer closed unread was still billed, so the rest of it (bounded) is read first to record
// its usage; a stream closed early is a cancellation.
func (b *meteredBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.done && b.mode == modeJSON && !b.overflow {
		rest, err := io.ReadAll(io.LimitReader(b.rc, int64(maxKept-len(b.buf)+1)))
		b.feed(rest)
		if err == nil && !b.overflow {
			b.finish(endEOF, nil)
		}
	}
	err := b.rc.Close()
	if !b.done {
		b.finish(endClose, nil)
	}
	return err
}

func (b *meteredBody) feed(p []byte) {
	switch b.mode {
	case modeSSE:
		b.sse.write(p)
	case modeJSON:
		if b.overflow {
			return
		}
		if len(b.buf)+len(p) > maxKept {
			b.overflow, b.buf = true, nil
			return
		}
		b.buf = append(b.buf, p...)
	}
}

func (b *meteredBody) finish(how end, err error) {
	b.done = true
	opaque := b.mode == modeOpaque
	switch b.mode {
	case modeSSE:
		// Take a last event whose blank line never came: a caller may stop reading at [DONE].
		b.sse.end()
		if b.sse.dropped {
			b.rec.t.log.Debug("ledgerd client: SSE event larger than 4 MiB skipped", "request_id", b.rec.a.RequestID)
		}
	case modeJSON:
		if b.overflow {
			opaque = true
			b.rec.t.log.Debug("ledgerd client: JSON body larger than 4 MiB not read for usage",
				"request_id", b.rec.a.RequestID)
		} else {
			b.rec.meter.body(b.buf)
		}
		b.buf = nil
	}
	b.rec.finish(how, err, opaque)
}
