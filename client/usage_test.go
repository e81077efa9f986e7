package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/schema"
)

// event is one dispatched SSE event, for comparisons.
type event struct{ name, data string }

// parseSSE feeds stream to an sseParser in chunks of size n (all at once when n <= 0).
func parseSSE(stream []byte, n int) []event {
	var got []event
	p := sseParser{emit: func(name, data []byte) { got = append(got, event{string(name), string(data)}) }}
	if n <= 0 {
		n = len(stream) + 1
	}
	for i := 0; i < len(stream); i += n {
		p.write(stream[i:min(i+n, len(stream))])
	}
	p.end()
	return got
}

func TestSSEParser(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		stream string
		want   []event
	}{
		// named events, the space after the colon dropped
		{"named", "event: a\ndata: 1\n\nevent: b\ndata: 2\n\n", []event{{"a", "1"}, {"b", "2"}}},
		// CRLF line ends (Gemini)
		{"crlf", "data: x\r\n\r\ndata: y\r\n\r\n", []event{{"", "x"}, {"", "y"}}},
		// several data lines joined by LF
		{"multi-line data", "data: a\ndata: b\n\n", []event{{"", "a\nb"}}},
		// comments and unknown fields ignored; an event without data not dispatched
		{"comments", ": ping\nid: 7\nevent: e\n\nretry: 5\ndata:z\n\n", []event{{"", "z"}}},
		// the event name does not carry over to the next event
		{"name reset", "event: a\ndata: 1\n\ndata: 2\n\n", []event{{"a", "1"}, {"", "2"}}},
		// a last event without its blank line is still taken at the end
		{"no final blank line", "data: [DONE]\n", []event{{"", "[DONE]"}}},
		// a last line without its LF is still taken at the end
		{"no final LF", "data: [DONE]", []event{{"", "[DONE]"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, n := range []int{0, 1, 2, 3, 7} {
				if got := parseSSE([]byte(tc.stream), n); !reflect.DeepEqual(got, tc.want) {
					t.Errorf("chunks of %d: got %q, want %q", n, got, tc.want)
				}
			}
		})
	}
}

func TestSSEParserFixturesAnyChunking(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"anthropic-stream.sse", "anthropic-stream-overloaded.sse", "openai-chat-stream.sse",
		"openai-responses-stream.sse", "gemini-stream.sse"} {
		t.Run(f, func(t *testing.T) {
			t.Parallel()
			b := fixture(t, f)
			whole := parseSSE(b, 0)
			if len(whole) < 2 {
				t.Fatalf("only %d events", len(whole))
			}
			for n := 1; n < 40; n++ {
				if got := parseSSE(b, n); !reflect.DeepEqual(got, whole) {
					t.Fatalf("chunks of %d differ", n)
				}
			}
		})
	}
}

func TestSSEParserCapsWhatItKeeps(t *testing.T) {
	t.Parallel()
	var got []event
	p := sseParser{emit: func(name, data []byte) { got = append(got, event{string(name), string(data)}) }}
	big := strings.Repeat("x", 1<<20)
	p.write([]byte("data: "))
	for range 5 { // a 5 MiB line, in 1 MiB chunks, is dropped
		p.write([]byte(big))
	}
	p.write([]byte("\n\ndata: after\n\n"))
	if !p.dropped || !reflect.DeepEqual(got, []event{{"", "after"}}) {
		t.Errorf("dropped %v, events %q", p.dropped, got)
	}
	if cap(p.line) > maxKept+64<<10 {
		t.Errorf("kept %d bytes", cap(p.line))
	}
}

func TestMeterConversions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		d    dialect
		body string
		want counts
	}{
		// Chat Completions with the newer cache_write_tokens: both leave the input count
		{"chat cache write", dialectChat, `{"usage":{"prompt_tokens":1000,"completion_tokens":50,` +
			`"prompt_tokens_details":{"cached_tokens":600,"cache_write_tokens":300},"completion_tokens_details":{"reasoning_tokens":20}}}`,
			counts{input: 100, cacheWrite: 300, cacheRead: 600, output: 50, reasoning: 20}},
		// Responses with cache_write_tokens in input_tokens_details: 86 uncached, 500 written,
		// 3,840 read out of 4,426 input tokens
		{"responses cache write", dialectResponses, `{"model":"gpt-5","status":"completed","usage":{"input_tokens":4426,` +
			`"input_tokens_details":{"cached_tokens":3840,"cache_write_tokens":500},"output_tokens":120,` +
			`"output_tokens_details":{"reasoning_tokens":64},"total_tokens":4546}}`,
			counts{input: 86, cacheWrite: 500, cacheRead: 3840, output: 120, reasoning: 64}},
		// Anthropic's output_tokens_details.thinking_tokens is the reasoning part of output_tokens
		{"anthropic thinking", dialectAnthropic, `{"type":"message","usage":{"input_tokens":12,"output_tokens":900,` +
			`"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens_details":{"thinking_tokens":640}}}`,
			counts{input: 12, output: 900, reasoning: 640}},
		// Embeddings: prompt tokens only
		{"embeddings", dialectChat, `{"object":"list","usage":{"prompt_tokens":8,"total_tokens":8}}`, counts{input: 8}},
		// Gemini tool-use prompt tokens are input too
		{"gemini tool use", dialectGemini, `{"usageMetadata":{"promptTokenCount":100,"cachedContentTokenCount":40,` +
			`"toolUsePromptTokenCount":7,"candidatesTokenCount":5}}`, counts{input: 67, cacheRead: 40, output: 5}},
		// Gemini's stream without alt=sse: a JSON array of chunks, the last counts win
		{"gemini array", dialectGemini, `[{"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":1}},` +
			`{"candidates":[{"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":4}}]`,
			counts{input: 10, output: 4}},
		// inconsistent counts are clamped, never negative: cached above prompt
		{"chat cached above prompt", dialectChat, `{"usage":{"prompt_tokens":5,"prompt_tokens_details":{"cached_tokens":9}}}`,
			counts{cacheRead: 9}},
		// negative and huge counts are clamped to the ledger's range
		{"anthropic out of range", dialectAnthropic, `{"type":"message","usage":{"input_tokens":-4,"output_tokens":99999999999}}`,
			counts{output: schema.MaxTokens}},
		// an Anthropic message_delta carrying only output_tokens keeps message_start's other counts;
		// its thinking tokens are the stream's reasoning
		{"anthropic partial delta", dialectAnthropic, "", counts{input: 5, cacheRead: 7, output: 30, reasoning: 18}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := meter{dialect: tc.d}
			if tc.body == "" {
				m.event([]byte("message_start"), []byte(`{"type":"message_start","message":{"usage":{"input_tokens":5,"cache_read_input_tokens":7,"output_tokens":1}}}`))
				m.event([]byte("message_delta"), []byte(`{"type":"message_delta","usage":{"output_tokens":30,"output_tokens_details":{"thinking_tokens":18}}}`))
			} else {
				m.body([]byte(tc.body))
				if !m.complete {
					t.Error("body not understood")
				}
			}
			if m.usage != tc.want {
				t.Errorf("got %+v, want %+v", m.usage, tc.want)
			}
		})
	}
}

func TestMeterStreamErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		d    dialect
		ev   string // event name
		data string
		want schema.ErrorClass
	}{
		// Anthropic's error event after a 200
		{"anthropic overloaded", dialectAnthropic, "error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, schema.ErrorOverloaded},
		// an error type nobody knows
		{"anthropic unknown", dialectAnthropic, "error", `{"type":"error","error":{"type":"brand_new_error"}}`, schema.ErrorUnknown},
		// an error chunk inside a Chat Completions stream
		{"chat error chunk", dialectChat, "", `{"error":{"message":"The server had an error","type":"server_error"}}`, schema.ErrorServer},
		// Responses: response.failed carries the error code
		{"responses failed", dialectResponses, "response.failed", `{"type":"response.failed","response":{"status":"failed","error":{"code":"rate_limit_exceeded","message":"slow down"}}}`, schema.ErrorRateLimited},
		// Responses: the error event
		{"responses error event", dialectResponses, "error", `{"type":"error","code":"server_error","message":"boom"}`, schema.ErrorServer},
		// Gemini: an error object in a stream chunk
		{"gemini error chunk", dialectGemini, "", `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`, schema.ErrorOverloaded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := meter{dialect: tc.d}
			if !m.event([]byte(tc.ev), []byte(tc.data)) {
				t.Fatal("event not understood")
			}
			if m.failed != tc.want || !m.complete {
				t.Errorf("failed %q complete %v, want %q", m.failed, m.complete, tc.want)
			}
		})
	}
}

func TestClassifyHTTP(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status int
		body   string
		want   schema.ErrorClass
	}{
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"x"}}`, schema.ErrorBadRequest},                             // Anthropic table row
		{401, `{"type":"error","error":{"type":"authentication_error"}}`, schema.ErrorAuth},                                                  // bad key
		{402, `{"type":"error","error":{"type":"billing_error"}}`, schema.ErrorQuotaExhausted},                                               // billing
		{403, `{"type":"error","error":{"type":"permission_error"}}`, schema.ErrorPermission},                                                // permission
		{404, `{"type":"error","error":{"type":"not_found_error"}}`, schema.ErrorNotFound},                                                   // unknown model
		{413, `{"type":"error","error":{"type":"request_too_large"}}`, schema.ErrorRequestTooLarge},                                          // too large
		{429, `{"type":"error","error":{"type":"rate_limit_error"}}`, schema.ErrorRateLimited},                                               // rate limit
		{429, `{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}`, schema.ErrorQuotaExhausted},                             // OpenAI spent quota
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"Your credit balance is too low"}}`, schema.ErrorQuotaExhausted}, // Anthropic credit
		{500, `{"type":"error","error":{"type":"api_error"}}`, schema.ErrorServer},                                                           // server error
		{503, ``, schema.ErrorOverloaded},                                                     // OpenAI's overloaded engine
		{504, `{"type":"error","error":{"type":"timeout_error"}}`, schema.ErrorTimeout},       // timeout
		{529, `{"type":"error","error":{"type":"overloaded_error"}}`, schema.ErrorOverloaded}, // Anthropic overloaded
		{409, `{"error":{"type":"overloaded_error"}}`, schema.ErrorOverloaded},                // unlisted status: the body's type
		{409, `not json`, schema.ErrorBadRequest},                                             // unlisted 4xx, no body
		{507, ``, schema.ErrorServer},                                                         // unlisted 5xx
		{302, ``, schema.ErrorUnknown},                                                        // a redirect is no provider answer
		{400, `[{"error":{"code":400,"status":"INVALID_ARGUMENT"}}]`, schema.ErrorBadRequest}, // Google's array form
		{418, `{"error":"teapot"}`, schema.ErrorBadRequest},                                   // error as a plain string
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d %s", tc.status, tc.body), func(t *testing.T) {
			t.Parallel()
			e, _ := parseErrorBody([]byte(tc.body))
			if got := classifyHTTP(tc.status, e); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// timeoutErr is a net.Error that timed out.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var _ net.Error = timeoutErr{}

func TestClassifyFailure(t *testing.T) {
	t.Parallel()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	cases := []struct {
		name   string
		ctx    context.Context
		err    error
		status schema.Status
		class  schema.ErrorClass
	}{
		{"cancelled context", cancelled, errors.New("read: use of closed connection"), schema.StatusCancelled, schema.ErrorCancelled}, // the caller gave up
		{"deadline", expired, errors.New("whatever"), schema.StatusError, schema.ErrorTimeout},                                        // the caller's deadline passed
		{"net timeout", context.Background(), timeoutErr{}, schema.StatusError, schema.ErrorTimeout},                                  // e.g. http.Client.Timeout
		{"reset", context.Background(), errors.New("connection reset by peer"), schema.StatusError, schema.ErrorConnection},           // anything else
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, c := classifyFailure(tc.ctx, tc.err)
			if s != tc.status || c != tc.class {
				t.Errorf("got %s/%s", s, c)
			}
		})
	}
}

func TestProviderOf(t *testing.T) {
	t.Parallel()
	cases := []struct{ host, want string }{
		{"api.anthropic.com", "anthropic"},                         // Anthropic
		{"API.OpenAI.com:443", "openai"},                           // case and port ignored
		{"generativelanguage.googleapis.com", "gcp.gemini"},        // Gemini API
		{"us-central1-aiplatform.googleapis.com", "gcp.vertex_ai"}, // regional Vertex AI
		{"myco.openai.azure.com", "azure.ai.openai"},               // Azure OpenAI
		{"bedrock-runtime.eu-west-1.amazonaws.com", "aws.bedrock"}, // Bedrock
		{"llm-gateway.internal:8080", "llm-gateway.internal"},      // unknown: the host name
	}
	for _, tc := range cases {
		t.Run(tc.host, func(t *testing.T) {
			t.Parallel()
			if got := providerOf(tc.host); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDialectAndModelFromPath(t *testing.T) {
	t.Parallel()
	cases := []struct {
		path  string
		d     dialect
		model string
	}{
		{"/v1/messages", dialectAnthropic, ""},                                                   // Anthropic Messages
		{"/v1/messages/count_tokens", dialectNone, ""},                                           // free token counting
		{"/v1/chat/completions", dialectChat, ""},                                                // Chat Completions
		{"/openai/deployments/gpt4o/chat/completions", dialectChat, ""},                          // Azure
		{"/v1/embeddings", dialectChat, ""},                                                      // Embeddings
		{"/v1/responses", dialectResponses, ""},                                                  // Responses
		{"/v1beta/models/gemini-2.5-flash:generateContent", dialectGemini, "gemini-2.5-flash"},   // Gemini
		{"/v1beta/models/gemini-2.5-pro:streamGenerateContent", dialectGemini, "gemini-2.5-pro"}, // Gemini stream
		{"/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent", dialectGemini, "gemini-2.5-flash"},                         // Vertex AI
		{"/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-sonnet-5-5@20260101:streamRawPredict", dialectAnthropic, "claude-sonnet-5-5@20260101"}, // Claude on Vertex AI
		{"/v1/models", dialectNone, ""}, // listing models
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			t.Parallel()
			if d, m := dialectOf(tc.path), modelFromPath(tc.path); d != tc.d || m != tc.model {
				t.Errorf("got %d %q, want %d %q", d, m, tc.d, tc.model)
			}
		})
	}
}
