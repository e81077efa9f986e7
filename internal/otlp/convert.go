package otlp

import (
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/ledgerd/ledgerd/internal/ratelimits"
	"github.com/ledgerd/ledgerd/schema"
)

// The attributes the mapping reads. docs/otlp.md explains each.
const (
	attrProvider      = "gen_ai.provider.name"
	attrSystem        = "gen_ai.system" // before semantic conventions v1.37
	attrOperation     = "gen_ai.operation.name"
	attrRequestModel  = "gen_ai.request.model"
	attrResponseModel = "gen_ai.response.model"
	attrResponseID    = "gen_ai.response.id"
	attrInput         = "gen_ai.usage.input_tokens"
	attrPromptOld     = "gen_ai.usage.prompt_tokens"
	attrOutput        = "gen_ai.usage.output_tokens"
	attrCompletionOld = "gen_ai.usage.completion_tokens"
	attrCacheRead     = "gen_ai.usage.cache_read.input_tokens"
	attrCacheReadOld  = "gen_ai.usage.cache_read_input_tokens"
	attrCacheWrite    = "gen_ai.usage.cache_creation.input_tokens"
	attrCacheWriteOld = "gen_ai.usage.cache_creation_input_tokens"
	attrReasoning     = "gen_ai.usage.reasoning.output_tokens"
	attrErrorType     = "error.type"
	attrHTTPStatus    = "http.response.status_code"
	attrResendCount   = "http.request.resend_count"
	attrService       = "service.name"
	attrAttemptNo     = "ledgerd.attempt_no"
	attrFallback      = "ledgerd.fallback"
	attrFallbackFrom  = "ledgerd.fallback_from"
	attrPromptHash    = "ledgerd.prompt_hash"
	attrOrg           = "ledgerd.org"
	// attrHeaderPrefix starts the attributes of captured response headers (OpenTelemetry's HTTP
	// conventions: http.response.header.<lower-case name>, a string array).
	attrHeaderPrefix = "http.response.header."
	genAIPrefix      = "gen_ai."
)

// DefaultTenantAttributes are the attributes, span first and then resource, that name an attempt's
// tenant when Options.TenantAttributes is empty.
var DefaultTenantAttributes = []string{"ledgerd.tenant", "tenant.id"}

// usageAttrs are the token counts that make a successful GenAI span an attempt.
var usageAttrs = []string{attrInput, attrPromptOld, attrOutput, attrCompletionOld, attrCacheRead,
	attrCacheReadOld, attrCacheWrite, attrCacheWriteOld, attrReasoning}

// notCalls are gen_ai.operation.name values of spans that are not one call to a model: an agent
// span sums the usage of the model calls beneath it, which are recorded on their own.
var notCalls = map[string]bool{"invoke_agent": true, "create_agent": true, "execute_tool": true}

// renamedSystems maps gen_ai.system values that semantic conventions v1.37 renamed to their
// gen_ai.provider.name spelling, so old and new instrumentations share a series.
var renamedSystems = map[string]string{
	"gemini": "gcp.gemini", "vertex_ai": "gcp.vertex_ai", "az.ai.openai": "azure.ai.openai",
	"az.ai.inference": "azure.ai.inference", "xai": "x_ai",
}

// sources names, for a refusal message, where each record field comes from.
var sources = map[string]string{
	"attempt_id": "spanId", "request_id": "traceId", "attempt_no": attrAttemptNo + " / " + attrResendCount,
	"started_at": "startTimeUnixNano", "latency_ms": "endTimeUnixNano - startTimeUnixNano",
	"provider": attrProvider + " / " + attrSystem, "model": attrRequestModel + " / " + attrResponseModel,
	"service": "resource " + attrService, "operation": attrOperation, "tenant": "tenant attribute",
	"http_status": attrHTTPStatus, "provider_request_id": attrResponseID,
	"input_tokens": attrInput, "output_tokens": attrOutput, "cache_write_tokens": attrCacheWrite,
	"cache_read_tokens": attrCacheRead, "reasoning_tokens": attrReasoning,
	"fallback_from": attrFallbackFrom, "prompt_hash": attrPromptHash, "org": attrOrg,
}

// Rejection is one GenAI span the mapping refused.
type Rejection struct {
	// SpanID is the span's id in hex ("" when it has none).
	SpanID string
	// Field is the attribute or span field at fault.
	Field string
	// Reason says what is wrong with it.
	Reason string
}

// String formats the refusal for a partial-success message: "span ID: field: reason".
func (r Rejection) String() string {
	id := r.SpanID
	if id == "" {
		id = "(no id)"
	}
	return fmt.Sprintf("span %s: %s: %s", id, r.Field, r.Reason)
}

// Result is what an export request holds for the ledger.
type Result struct {
	// Records are the attempts of the GenAI spans, validated.
	Records []schema.Attempt
	// Rejected are the GenAI spans refused, in request order.
	Rejected []Rejection
	// Ignored counts the spans that are not GenAI model calls with usage or an error.
	Ignored int
}

// Convert maps the spans of an export request to attempt records; docs/otlp.md states the mapping.
// tenantAttrs are the attributes naming the tenant (DefaultTenantAttributes when empty); now bounds
// start times against clock skew.
func Convert(req *coltracepb.ExportTraceServiceRequest, now time.Time, tenantAttrs []string) Result {
	if len(tenantAttrs) == 0 {
		tenantAttrs = DefaultTenantAttributes
	}
	var res Result
	for _, rs := range req.GetResourceSpans() {
		resAttrs := rs.GetResource().GetAttributes()
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				if !hasGenAI(sp.GetAttributes()) {
					res.Ignored++
					continue
				}
				m := &mapping{span: attrMap(sp.GetAttributes()), resource: resAttrs, tenantAttrs: tenantAttrs}
				a, rej, ok := m.attempt(sp, now)
				switch {
				case rej != nil:
					rej.SpanID = hex.EncodeToString(sp.GetSpanId())
					res.Rejected = append(res.Rejected, *rej)
				case ok:
					res.Records = append(res.Records, a)
				default:
					res.Ignored++
				}
			}
		}
	}
	return res
}

func hasGenAI(attrs []*commonpb.KeyValue) bool {
	for _, kv := range attrs {
		if strings.HasPrefix(kv.GetKey(), genAIPrefix) {
			return true
		}
	}
	return false
}

// attrMap indexes a span's attributes by key; the first of duplicate keys wins.
func attrMap(attrs []*commonpb.KeyValue) map[string]*commonpb.AnyValue {
	m := make(map[string]*commonpb.AnyValue, len(attrs))
	for _, kv := range attrs {
		if _, dup := m[kv.GetKey()]; !dup {
			m[kv.GetKey()] = kv.GetValue()
		}
	}
	return m
}

// mapping turns one GenAI span into an attempt, remembering the first attribute that failed.
type mapping struct {
	span        map[string]*commonpb.AnyValue
	resource    []*commonpb.KeyValue
	tenantAttrs []string
	bad         *Rejection
}

func (m *mapping) fail(field, format string, args ...any) {
	if m.bad == nil {
		m.bad = &Rejection{Field: field, Reason: fmt.Sprintf(format, args...)}
	}
}

// str reads a string attribute of the span; a value of another type is an error.
func (m *mapping) str(key string) string {
	v, ok := m.span[key]
	if !ok {
		return ""
	}
	s, ok := v.GetValue().(*commonpb.AnyValue_StringValue)
	if !ok {
		m.fail(key, "must be a string")
		return ""
	}
	return strings.TrimSpace(s.StringValue)
}

// first reads the first of keys the span has as a string, and which key it was.
func (m *mapping) first(keys ...string) (string, string) {
	for _, k := range keys {
		if _, ok := m.span[k]; ok {
			return m.str(k), k
		}
	}
	return "", ""
}

// count reads a non-negative whole number: an int, an integral double or a decimal string.
func (m *mapping) count(key string) (int64, bool) {
	v, ok := m.span[key]
	if !ok {
		return 0, false
	}
	n, err := wholeNumber(v)
	if err != "" {
		m.fail(key, "%s", err)
		return 0, false
	}
	if n < 0 {
		m.fail(key, "must not be negative")
		return 0, false
	}
	return n, true
}

// countOf reads the first of keys the span has.
func (m *mapping) countOf(keys ...string) (int64, bool) {
	for _, k := range keys {
		if _, ok := m.span[k]; ok {
			return m.count(k)
		}
	}
	return 0, false
}

func wholeNumber(v *commonpb.AnyValue) (int64, string) {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_IntValue:
		return x.IntValue, ""
	case *commonpb.AnyValue_DoubleValue:
		f := x.DoubleValue
		if f != math.Trunc(f) || math.IsInf(f, 0) || f > math.MaxInt64/2 || f < math.MinInt64/2 {
			return 0, "must be a whole number"
		}
		return int64(f), ""
	case *commonpb.AnyValue_StringValue:
		n, err := strconv.ParseInt(strings.TrimSpace(x.StringValue), 10, 64)
		if err != nil {
			return 0, "must be a whole number"
		}
		return n, ""
	}
	return 0, "must be a whole number"
}

// flag reads a boolean attribute: a bool or the string "true" or "false".
func (m *mapping) flag(key string) (value, present bool) {
	v, ok := m.span[key]
	if !ok {
		return false, false
	}
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_BoolValue:
		return x.BoolValue, true
	case *commonpb.AnyValue_StringValue:
		if b, err := strconv.ParseBool(strings.TrimSpace(x.StringValue)); err == nil {
			return b, true
		}
	}
	m.fail(key, "must be true or false")
	return false, false
}

// text reads error.type, which instrumentations set as a string and a few as a status number.
func (m *mapping) text(key string) string {
	v, ok := m.span[key]
	if !ok {
		return ""
	}
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return strings.TrimSpace(x.StringValue)
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	}
	m.fail(key, "must be a string")
	return ""
}

// tenant reads the first tenant attribute present on the span, else on the resource.
func (m *mapping) tenant() string {
	for _, k := range m.tenantAttrs {
		if _, ok := m.span[k]; ok {
			return m.str(k)
		}
	}
	for _, k := range m.tenantAttrs {
		for _, kv := range m.resource {
			if kv.GetKey() == k {
				if s, ok := kv.GetValue().GetValue().(*commonpb.AnyValue_StringValue); ok {
					return strings.TrimSpace(s.StringValue)
				}
				m.fail("resource "+k, "must be a string")
				return ""
			}
		}
	}
	return ""
}

// org reads ledgerd.org on the span, else on the resource, else the organization a captured
// response header names.
func (m *mapping) org() string {
	if _, ok := m.span[attrOrg]; ok {
		return m.str(attrOrg)
	}
	for _, kv := range m.resource {
		if kv.GetKey() == attrOrg {
			if s, ok := kv.GetValue().GetValue().(*commonpb.AnyValue_StringValue); ok {
				return strings.TrimSpace(s.StringValue)
			}
			m.fail("resource "+attrOrg, "must be a string")
			return ""
		}
	}
	return ratelimits.Org(m.header)
}

// header returns a captured response header: the first value of http.response.header.<name>, a
// string array, or the value itself when an instrumentation sent a string or a number. A header in
// any other form counts as not sent, as a header the client could not read.
func (m *mapping) header(name string) string {
	v, ok := m.span[attrHeaderPrefix+name]
	if !ok {
		return ""
	}
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_ArrayValue:
		if vs := x.ArrayValue.GetValues(); len(vs) > 0 {
			return vs[0].GetStringValue()
		}
	}
	return ""
}

func (m *mapping) service() string {
	for _, kv := range m.resource {
		if kv.GetKey() == attrService {
			if s, ok := kv.GetValue().GetValue().(*commonpb.AnyValue_StringValue); ok {
				return strings.TrimSpace(s.StringValue)
			}
			m.fail("resource "+attrService, "must be a string")
			return ""
		}
	}
	return ""
}

// attempt maps a span carrying gen_ai attributes. It returns ok false, without a rejection, for a
// span that is not an attempt: an agent or tool span, or a successful span without usage.
func (m *mapping) attempt(sp *tracepb.Span, now time.Time) (a schema.Attempt, rej *Rejection, ok bool) {
	op := m.str(attrOperation)
	if notCalls[op] {
		return a, nil, false
	}
	hasUsage := false
	for _, k := range usageAttrs {
		if _, ok := m.span[k]; ok {
			hasUsage = true
			break
		}
	}
	provider, providerKey := m.first(attrProvider, attrSystem)
	provider = strings.ToLower(provider)
	if providerKey == attrSystem {
		if renamed, ok := renamedSystems[provider]; ok {
			provider = renamed
		}
	}
	model, _ := m.first(attrRequestModel, attrResponseModel)
	if model == "" {
		model = m.str(attrResponseModel)
	}
	errType := m.text(attrErrorType)
	httpStatus, _ := m.count(attrHTTPStatus)
	statusCode := sp.GetStatus().GetCode()
	failed := statusCode == tracepb.Status_STATUS_CODE_ERROR || errType != "" || httpStatus >= 400
	if !hasUsage && !(failed && (provider != "" || model != "")) {
		return a, nil, false
	}

	a = schema.Attempt{
		AttemptID: hex.EncodeToString(sp.GetSpanId()), RequestID: hex.EncodeToString(sp.GetTraceId()),
		Provider: provider, Model: model, Service: m.service(), Operation: op, Tenant: m.tenant(),
		ProviderRequestID: m.str(attrResponseID), PromptHash: m.str(attrPromptHash),
		FallbackFrom: m.str(attrFallbackFrom), HTTPStatus: int(min(httpStatus, math.MaxInt32)),
		Status: schema.StatusOK,
	}
	if failed {
		a.Status, a.ErrorClass = classify(errType, int(min(httpStatus, 1000)), sp.GetStatus().GetMessage())
	}
	m.ids(sp)
	m.times(sp, &a)
	m.attemptNo(&a)
	fallback, set := m.flag(attrFallback)
	a.Fallback = fallback || !set && a.FallbackFrom != ""
	m.tokens(&a)
	a.Org = m.org()
	a.RateLimits = ratelimits.Parse(m.header, time.Unix(0, int64(min(sp.GetEndTimeUnixNano(), math.MaxInt64))).UTC())
	if m.bad != nil {
		return a, m.bad, false
	}
	if ferr := a.Validate(now); ferr != nil {
		field := ferr.Field
		if src, ok := sources[field]; ok {
			field = src
		}
		return a, &Rejection{Field: field, Reason: ferr.Reason}, false
	}
	return a, nil, true
}

func (m *mapping) ids(sp *tracepb.Span) {
	if !validID(sp.GetTraceId(), 16) {
		m.fail("traceId", "must be 16 bytes (32 hex digits), not all zero")
	}
	if !validID(sp.GetSpanId(), 8) {
		m.fail("spanId", "must be 8 bytes (16 hex digits), not all zero")
	}
}

func validID(b []byte, n int) bool {
	if len(b) != n {
		return false
	}
	for _, c := range b {
		if c != 0 {
			return true
		}
	}
	return false
}

func (m *mapping) times(sp *tracepb.Span, a *schema.Attempt) {
	start, end := sp.GetStartTimeUnixNano(), sp.GetEndTimeUnixNano()
	switch {
	case start == 0 || start > math.MaxInt64:
		m.fail("startTimeUnixNano", "must be a time after 1970")
	case end < start:
		m.fail("endTimeUnixNano", "must not be before startTimeUnixNano")
	case end-start > uint64(schema.MaxLatencyMS)*uint64(time.Millisecond):
		m.fail("endTimeUnixNano", "span lasts longer than 24h")
	default:
		a.StartedAt = time.Unix(0, int64(start)).UTC()
		a.LatencyMS = int64((end - start) / uint64(time.Millisecond))
	}
}

// attemptNo is ledgerd.attempt_no, else http.request.resend_count + 1, else 1.
func (m *mapping) attemptNo(a *schema.Attempt) {
	a.AttemptNo = 1
	if n, ok := m.count(attrAttemptNo); ok {
		if n < 1 || n > schema.MaxAttemptNo {
			m.fail(attrAttemptNo, "must be between 1 and %d", schema.MaxAttemptNo)
			return
		}
		a.AttemptNo = int(n)
		return
	}
	if _, present := m.span[attrAttemptNo]; present {
		return
	}
	if n, ok := m.count(attrResendCount); ok {
		if n >= schema.MaxAttemptNo {
			m.fail(attrResendCount, "must be below %d", schema.MaxAttemptNo)
			return
		}
		a.AttemptNo = int(n) + 1
	}
}

// tokens converts the OpenTelemetry counts to the ledger's non-overlapping ones. OpenTelemetry's
// input count includes cache reads and writes and its output count includes reasoning. An input
// count smaller than the cache counts together can only come from an instrumentation that reports
// input without them (Anthropic's own usage shape): it is taken as already uncached. Likewise a
// reasoning count larger than the output count is taken as reported beside it, and added.
func (m *mapping) tokens(a *schema.Attempt) {
	in, _ := m.countOf(attrInput, attrPromptOld)
	out, _ := m.countOf(attrOutput, attrCompletionOld)
	read, _ := m.countOf(attrCacheRead, attrCacheReadOld)
	write, _ := m.countOf(attrCacheWrite, attrCacheWriteOld)
	reasoning, _ := m.count(attrReasoning)
	for _, c := range []struct {
		key string
		v   int64
	}{{attrInput, in}, {attrOutput, out}, {attrCacheRead, read}, {attrCacheWrite, write}, {attrReasoning, reasoning}} {
		if c.v > schema.MaxTokens {
			m.fail(c.key, "must not exceed %d", int64(schema.MaxTokens))
			return
		}
	}
	if in >= read+write {
		in -= read + write
	}
	if reasoning > out {
		out += reasoning
	}
	a.InputTokens, a.OutputTokens, a.CacheReadTokens, a.CacheWriteTokens, a.ReasoningTokens = in, out, read, write, reasoning
}
