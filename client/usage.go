package client

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/ledgerd/ledgerd/schema"
)

// counts is the usage of one attempt in the ledger's terms: input, cache write and cache read never
// overlap; cacheWrite1h is part of cacheWrite and reasoning part of output.
type counts struct {
	input, cacheWrite, cacheWrite1h, cacheRead, output, reasoning int64
}

// tok reads a provider's count, clamped to the ledger's range; a missing count is 0.
func tok(p *int64) int64 {
	if p == nil {
		return 0
	}
	return min(max(*p, 0), schema.MaxTokens)
}

// apply writes c to a, keeping the parts within their wholes whatever the provider sent.
func (c counts) apply(a *schema.Attempt) {
	a.InputTokens = c.input
	a.CacheWriteTokens = c.cacheWrite
	a.CacheWrite1hTokens = min(c.cacheWrite1h, c.cacheWrite)
	a.CacheReadTokens = c.cacheRead
	a.OutputTokens = c.output
	a.ReasoningTokens = min(c.reasoning, c.output)
}

// anthropicUsage is the usage object of Anthropic Messages. Pointers tell a missing field from a zero
// one, because a stream's message_delta overwrites only the fields it carries.
type anthropicUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	CacheCreation            *struct {
		Ephemeral1h *int64 `json:"ephemeral_1h_input_tokens"`
	} `json:"cache_creation"`
	// OutputTokensDetails.ThinkingTokens is the part of output_tokens spent on extended thinking.
	OutputTokensDetails *struct {
		ThinkingTokens *int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// merge overwrites u's fields with those o carries.
func (u *anthropicUsage) merge(o *anthropicUsage) {
	if o == nil {
		return
	}
	for _, f := range []struct{ dst, src **int64 }{
		{&u.InputTokens, &o.InputTokens}, {&u.OutputTokens, &o.OutputTokens},
		{&u.CacheCreationInputTokens, &o.CacheCreationInputTokens},
		{&u.CacheReadInputTokens, &o.CacheReadInputTokens},
	} {
		if *f.src != nil {
			*f.dst = *f.src
		}
	}
	if o.CacheCreation != nil && o.CacheCreation.Ephemeral1h != nil {
		u.CacheCreation = o.CacheCreation
	}
	if o.OutputTokensDetails != nil && o.OutputTokensDetails.ThinkingTokens != nil {
		u.OutputTokensDetails = o.OutputTokensDetails
	}
}

// counts converts: Anthropic's input_tokens already excludes both cache counts; output_tokens
// includes the thinking tokens, which are the reasoning.
func (u *anthropicUsage) counts() counts {
	c := counts{
		input:      tok(u.InputTokens),
		cacheWrite: tok(u.CacheCreationInputTokens),
		cacheRead:  tok(u.CacheReadInputTokens),
		output:     tok(u.OutputTokens),
	}
	if u.CacheCreation != nil {
		c.cacheWrite1h = tok(u.CacheCreation.Ephemeral1h)
	}
	if u.OutputTokensDetails != nil {
		c.reasoning = tok(u.OutputTokensDetails.ThinkingTokens)
	}
	return c
}

// openAIUsage is the usage object of both OpenAI APIs: Chat Completions names its counts prompt and
// completion tokens, Responses input and output tokens. Either way the input count includes cached
// tokens.
type openAIUsage struct {
	PromptTokens        *int64 `json:"prompt_tokens"`
	CompletionTokens    *int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens     *int64 `json:"cached_tokens"`
		CacheWriteTokens *int64 `json:"cache_write_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails *struct {
		ReasoningTokens *int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
	InputTokens        *int64 `json:"input_tokens"`
	OutputTokens       *int64 `json:"output_tokens"`
	InputTokensDetails *struct {
		CachedTokens     *int64 `json:"cached_tokens"`
		CacheWriteTokens *int64 `json:"cache_write_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails *struct {
		ReasoningTokens *int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

// counts converts: input = prompt − cached − cache write, in both APIs (Chat Completions'
// prompt_tokens_details, Responses' input_tokens_details).
func (u *openAIUsage) counts() counts {
	var prompt, cached, written, reasoning int64
	var c counts
	if u.PromptTokens != nil || u.CompletionTokens != nil {
		prompt, c.output = tok(u.PromptTokens), tok(u.CompletionTokens)
		if d := u.PromptTokensDetails; d != nil {
			cached, written = tok(d.CachedTokens), tok(d.CacheWriteTokens)
		}
		if d := u.CompletionTokensDetails; d != nil {
			reasoning = tok(d.ReasoningTokens)
		}
	} else {
		prompt, c.output = tok(u.InputTokens), tok(u.OutputTokens)
		if d := u.InputTokensDetails; d != nil {
			cached, written = tok(d.CachedTokens), tok(d.CacheWriteTokens)
		}
		if d := u.OutputTokensDetails; d != nil {
			reasoning = tok(d.ReasoningTokens)
		}
	}
	c.input = max(prompt-cached-written, 0)
	c.cacheRead, c.cacheWrite, c.reasoning = cached, written, reasoning
	return c
}

// geminiUsage is Gemini's usageMetadata, where promptTokenCount includes the cached tokens and
// thoughts are counted apart from candidates.
type geminiUsage struct {
	PromptTokenCount        *int64 `json:"promptTokenCount"`
	CachedContentTokenCount *int64 `json:"cachedContentTokenCount"`
	CandidatesTokenCount    *int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      *int64 `json:"thoughtsTokenCount"`
	ToolUsePromptTokenCount *int64 `json:"toolUsePromptTokenCount"`
}

// counts converts: input = prompt − cached + tool-use prompt; output = candidates + thoughts.
func (u *geminiUsage) counts() counts {
	cached, thoughts := tok(u.CachedContentTokenCount), tok(u.ThoughtsTokenCount)
	return counts{
		input:     min(max(tok(u.PromptTokenCount)-cached, 0)+tok(u.ToolUsePromptTokenCount), schema.MaxTokens),
		cacheRead: cached,
		output:    min(tok(u.CandidatesTokenCount)+thoughts, schema.MaxTokens),
		reasoning: thoughts,
	}
}

// apiError is the error object of error bodies and stream error events: Anthropic's {type, message},
// OpenAI's {type, code, message} and Google's {code, status, message}.
type apiError struct {
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
	Status  string          `json:"status"`
	Message string          `json:"message"`
}

// code is the error code when it is a string (OpenAI's), else "".
func (e *apiError) code() string {
	var s string
	if len(e.Code) > 0 && e.Code[0] == '"' && json.Unmarshal(e.Code, &s) == nil {
		return s
	}
	return ""
}

// class is the error class the error's type, code or status names, or "" when none is known.
func (e *apiError) class() schema.ErrorClass {
	for _, k := range []string{e.Type, e.code(), e.Status} {
		if c, ok := classByType[k]; ok {
			return c
		}
	}
	return ""
}

// quotaSpent reports whether the error says the quota or credit is spent.
func (e *apiError) quotaSpent() bool {
	for _, s := range []string{e.Type, e.code(), e.Message} {
		s = strings.ToLower(s)
		for _, sign := range quotaSigns {
			if strings.Contains(s, sign) {
				return true
			}
		}
	}
	return false
}

// streamClass is the class of an error reported inside a 2xx body; an unknown type is "unknown".
func streamClass(e *apiError) schema.ErrorClass {
	if e == nil {
		return schema.ErrorUnknown
	}
	if c := e.class(); c != "" {
		return c
	}
	return schema.ErrorUnknown
}

// parseErrorBody reads the body of a non-2xx response: the error object and, for Anthropic, the
// request id. Unparseable bodies give a zero error.
func parseErrorBody(b []byte) (apiError, string) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' { // Google answers stream requests with an array
		var all []json.RawMessage
		if json.Unmarshal(b, &all) != nil || len(all) == 0 {
			return apiError{}, ""
		}
		b = all[0]
	}
	var body struct {
		Error     json.RawMessage `json:"error"`
		RequestID string          `json:"request_id"`
	}
	if json.Unmarshal(b, &body) != nil {
		return apiError{}, ""
	}
	var e apiError
	switch {
	case len(body.Error) > 0 && body.Error[0] == '{':
		if json.Unmarshal(body.Error, &e) != nil {
			e = apiError{}
		}
	case len(body.Error) > 0 && body.Error[0] == '"':
		_ = json.Unmarshal(body.Error, &e.Message)
	}
	return e, clean(body.RequestID, schema.MaxProviderReqLen)
}

// meter reads usage and outcome from the JSON documents of a 2xx response body: the whole body of a
// plain response, or the data of each SSE event of a stream.
type meter struct {
	dialect  dialect
	anth     anthropicUsage
	usage    counts
	hasUsage bool
	// complete is set by the response's final event, or once a whole JSON body was read.
	complete bool
	// failed is the class of an error the body reported (a stream's error event, a failed response).
	failed schema.ErrorClass
	// model is the model the response names, used when the request named none.
	model string
}

// skipAnthropic lists the Anthropic events that carry content, never usage: they are not parsed.
var skipAnthropic = map[string]bool{
	"content_block_start": true, "content_block_delta": true, "content_block_stop": true, "ping": true,
}

// body reads a whole JSON body (Gemini's stream without alt=sse is an array of responses).
func (m *meter) body(b []byte) {
	b = bytes.TrimSpace(b)
	if m.dialect == dialectGemini && len(b) > 0 && b[0] == '[' {
		var all []json.RawMessage
		if json.Unmarshal(b, &all) != nil {
			return
		}
		for _, d := range all {
			if !m.event(nil, d) {
				return
			}
		}
		m.complete = true
		return
	}
	if m.event(nil, b) {
		m.complete = true
	}
}

// event reads one JSON document, named by its SSE event type when it came in a stream. It reports
// whether the document was understood.
func (m *meter) event(name, data []byte) bool {
	switch m.dialect {
	case dialectAnthropic:
		return m.anthropic(name, data)
	case dialectChat:
		return m.chat(data)
	case dialectResponses:
		return m.responses(name, data)
	case dialectGemini:
		return m.gemini(data)
	}
	return false
}

func (m *meter) setModel(s string) {
	if s = clean(s, schema.MaxNameLen); s != "" {
		m.model = s
	}
}

func (m *meter) fail(c schema.ErrorClass) {
	m.failed = c
	m.complete = true
}

func (m *meter) anthropic(name, data []byte) bool {
	if skipAnthropic[string(name)] {
		return true
	}
	var ev struct {
		Type    string `json:"type"`
		Model   string `json:"model"`
		Message *struct {
			Model string          `json:"model"`
			Usage *anthropicUsage `json:"usage"`
		} `json:"message"`
		Usage *anthropicUsage `json:"usage"`
		Error *apiError       `json:"error"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return false
	}
	t := ev.Type
	if t == "" {
		t = string(name)
	}
	switch t {
	case "message": // a whole response
		m.setModel(ev.Model)
		m.anth.merge(ev.Usage)
		m.hasUsage = m.hasUsage || ev.Usage != nil
	case "message_start":
		if ev.Message != nil {
			m.setModel(ev.Message.Model)
			m.anth.merge(ev.Message.Usage)
			m.hasUsage = m.hasUsage || ev.Message.Usage != nil
		}
	case "message_delta": // counts are cumulative: the last one wins
		m.anth.merge(ev.Usage)
		m.hasUsage = m.hasUsage || ev.Usage != nil
	case "message_stop":
		m.complete = true
	case "error":
		m.fail(streamClass(ev.Error))
	}
	m.usage = m.anth.counts()
	return true
}

func (m *meter) chat(data []byte) bool {
	if bytes.Equal(bytes.TrimSpace(data), []byte("[DONE]")) {
		m.complete = true
		return true
	}
	var ev struct {
		Model string       `json:"model"`
		Usage *openAIUsage `json:"usage"`
		Error *apiError    `json:"error"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return false
	}
	m.setModel(ev.Model)
	if ev.Usage != nil {
		m.usage, m.hasUsage = ev.Usage.counts(), true
	}
	if ev.Error != nil {
		m.fail(streamClass(ev.Error))
	}
	return true
}

// responseObject is an OpenAI Responses response: a whole JSON body, or inside a stream event.
type responseObject struct {
	Model  string       `json:"model"`
	Status string       `json:"status"`
	Usage  *openAIUsage `json:"usage"`
	Error  *apiError    `json:"error"`
}

func (m *meter) takeResponse(r *responseObject) {
	m.setModel(r.Model)
	if r.Usage != nil {
		m.usage, m.hasUsage = r.Usage.counts(), true
	}
	if r.Status == "failed" {
		m.fail(streamClass(r.Error))
	}
}

func (m *meter) responses(name, data []byte) bool {
	var ev struct {
		responseObject
		Type     string          `json:"type"`
		Response *responseObject `json:"response"`
		Code     string          `json:"code"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return false
	}
	t := ev.Type
	if t == "" {
		t = string(name)
	}
	switch t {
	case "": // a whole response
		m.takeResponse(&ev.responseObject)
	case "response.created", "response.in_progress", "response.completed", "response.incomplete",
		"response.failed":
		if ev.Response != nil {
			m.takeResponse(ev.Response)
		}
		if t == "response.completed" || t == "response.incomplete" || t == "response.failed" {
			m.complete = true
		}
	case "error":
		m.fail(streamClass(&apiError{Type: ev.Code}))
	}
	return true
}

func (m *meter) gemini(data []byte) bool {
	var ev struct {
		UsageMetadata *geminiUsage `json:"usageMetadata"`
		ModelVersion  string       `json:"modelVersion"`
		Candidates    []struct {
			FinishReason string `json:"finishReason"`
		} `json:"candidates"`
		Error *apiError `json:"error"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return false
	}
	m.setModel(ev.ModelVersion)
	if ev.UsageMetadata != nil { // each chunk carries the counts so far: the last one wins
		m.usage, m.hasUsage = ev.UsageMetadata.counts(), true
	}
	for _, c := range ev.Candidates {
		if c.FinishReason != "" {
			m.complete = true
		}
	}
	if ev.Error != nil {
		m.fail(streamClass(ev.Error))
	}
	return true
}
