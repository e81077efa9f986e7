package schema

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ledgerd/ledgerd/money"
)

// FieldError says which field of a record is wrong and why.
type FieldError struct {
	Field  string
	Reason string
	// Others are the record's other invalid fields (Validate reports them all), each listed as a
	// rejection of its own.
	Others []*FieldError
}

// Error formats the error as "field: reason".
func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// IngestResponse is ledgerd's answer to POST /v1/attempts: valid records are committed (Accepted
// new ones, Duplicates already stored) and invalid ones listed by position (partial success, as
// OTLP does); Error says why a whole body was refused.
type IngestResponse struct {
	Accepted   int         `json:"accepted"`
	Duplicates int         `json:"duplicates"`
	Rejected   []Rejection `json:"rejected"`
	// Unpriced names the models of stored records that ledgerd has no price for, so the sender
	// learns at once: they are kept, and shown as unpriced (never $0) until a price file or
	// ledgerd reprice prices them.
	Unpriced []UnpricedModel `json:"unpriced,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// UnpricedModel is a provider and model of an ingest body that ledgerd could not price: the
// positions of its records in the body and the nearest ids the catalog knows (close matches only:
// the same provider, a similar name), if any.
type UnpricedModel struct {
	Provider string   `json:"provider"`
	Model    string   `json:"model"`
	Records  []int    `json:"records"`
	Nearest  []string `json:"nearest"`
}

// Rejection is one refused record of a batch, by its zero-based position in the body.
type Rejection struct {
	Index int    `json:"index"`
	Field string `json:"field,omitempty"`
	Error string `json:"error"`
}

// Batch is a decoded ingest body: the valid records, each with its position in the body, and the
// refused ones.
type Batch struct {
	Records  []Attempt
	Index    []int
	Rejected []Rejection
}

// Len is the number of records the body held, valid or not.
func (b *Batch) Len() int { return len(b.Records) + len(b.Rejected) }

// add appends the outcome of decoding the record at position i of the body.
func (b *Batch) add(i int, a Attempt, ferr *FieldError) {
	if ferr != nil {
		b.Rejected = append(b.Rejected, Rejection{Index: i, Field: ferr.Field, Error: ferr.Error()})
		for _, o := range ferr.Others {
			b.Rejected = append(b.Rejected, Rejection{Index: i, Field: o.Field, Error: o.Error()})
		}
		return
	}
	if b.Records == nil {
		if p, ok := recordArrays.Get().(*[]Attempt); ok {
			b.Records = *p
		}
	}
	if len(b.Records) == cap(b.Records) {
		// Doubled: past 256 records append grows by a quarter, which would copy a body of 1,000
		// records about four times over while it is read.
		b.Records = slices.Grow(b.Records, max(len(b.Records), 1))
		b.Index = slices.Grow(b.Index, cap(b.Records)-len(b.Index))
	}
	b.Records = append(b.Records, a)
	b.Index = append(b.Index, i)
}

// recordArrays recycles the arrays of released batches' records (Release). A body of 1,000
// records needs about 330 KB of them, and a new array for each body costs page faults, clearing
// and the copies of growing it, a share of ledgerd's CPU worth saving at large requests
// (docs/performance.md).
var recordArrays sync.Pool

// maxPooledRecords is the most records an array recordArrays keeps may hold.
const maxPooledRecords = 10_000

// Release gives the array of b's records back for another body to be decoded into, and drops the
// records from b (Index and Rejected stay).
// Nothing may use the records after: call it only once whatever they were handed to (the writer,
// until their commit ends) is done with them.
func (b *Batch) Release() {
	if b.Records != nil && cap(b.Records) <= maxPooledRecords {
		clear(b.Records) // drop the strings and maps they refer to
		p := b.Records[:0]
		recordArrays.Put(&p)
	}
	b.Records = nil
}

// ErrBody reports a body that cannot be parsed as a whole: not JSON, not an object or array, or
// broken JSON inside an array.
var ErrBody = errors.New("unparseable body")

// contentFields are refused with their own message: the ledger never stores prompts or replies.
var contentFields = map[string]bool{
	"prompt": true, "messages": true, "input": true, "output": true, "completion": true,
	"content": true, "response": true, "text": true,
}

// fieldKinds names every accepted field with the JSON kind it takes, for error messages.
var fieldKinds = map[string]string{
	"attempt_id": "a string", "request_id": "a string", "attempt_no": "a whole number",
	"started_at": "an RFC 3339 timestamp string", "latency_ms": "a whole number",
	"provider": "a string", "model": "a string", "service": "a string", "operation": "a string",
	"tenant": "a string", "status": "a string", "error_class": "a string",
	"http_status": "a whole number", "provider_request_id": "a string",
	"retry_after_ms": "a whole number", "input_tokens": "a whole number",
	"output_tokens": "a whole number", "cache_write_tokens": "a whole number",
	"cache_write_1h_tokens": "a whole number", "cache_read_tokens": "a whole number",
	"reasoning_tokens": "a whole number", "cost_usd": "a decimal string or number",
	"fallback": "true or false", "fallback_from": "a string", "batch": "true or false", "usage_unknown": "true or false",
	"prompt_hash": "a string", "metadata": "an object of string values", "org": "a string",
}

func init() {
	for k, v := range rateLimitFields {
		fieldKinds[k] = v
	}
}

// Fields lists the accepted field names, sorted; the JSON Schema test checks it against
// attempt.schema.json.
func Fields() []string {
	out := make([]string, 0, len(fieldKinds))
	for k := range fieldKinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// wire is the JSON shape of a record; pointers tell a missing field from a zero one.
type wire struct {
	AttemptID          *string           `json:"attempt_id"`
	RequestID          *string           `json:"request_id"`
	AttemptNo          *int64            `json:"attempt_no"`
	StartedAt          *time.Time        `json:"started_at"`
	LatencyMS          *int64            `json:"latency_ms"`
	Provider           *string           `json:"provider"`
	Model              *string           `json:"model"`
	Service            *string           `json:"service"`
	Operation          *string           `json:"operation"`
	Tenant             *string           `json:"tenant"`
	Status             *string           `json:"status"`
	ErrorClass         *string           `json:"error_class"`
	HTTPStatus         *int64            `json:"http_status"`
	ProviderRequestID  *string           `json:"provider_request_id"`
	RetryAfterMS       *int64            `json:"retry_after_ms"`
	InputTokens        *int64            `json:"input_tokens"`
	OutputTokens       *int64            `json:"output_tokens"`
	CacheWriteTokens   *int64            `json:"cache_write_tokens"`
	CacheWrite1hTokens *int64            `json:"cache_write_1h_tokens"`
	CacheReadTokens    *int64            `json:"cache_read_tokens"`
	ReasoningTokens    *int64            `json:"reasoning_tokens"`
	CostUSD            json.RawMessage   `json:"cost_usd"`
	Fallback           *bool             `json:"fallback"`
	FallbackFrom       *string           `json:"fallback_from"`
	Batch              *bool             `json:"batch"`
	UsageUnknown       *bool             `json:"usage_unknown"`
	PromptHash         *string           `json:"prompt_hash"`
	Metadata           map[string]string `json:"metadata"`
	Org                *string           `json:"org"`
	rateLimitsJSON
}

// DecodeBody reads an ingest body: one JSON object, a JSON array of objects, or (ndjson) one object
// per line. Records that fail decoding or validation are listed in Rejected; the error is non-nil
// only when the body as a whole cannot be read.
//
// A body that is an object or an array of objects, well formed and followed by nothing but white
// space, is split by a scanner that reads it once; any other body (broken, empty, with elements that
// are not objects, or whose reading fails) goes to the encoding/json splitter, which reads again what
// was read so far and then the rest, so that its outcome and error are the ones given.
func DecodeBody(r io.Reader, ndjson bool, now time.Time) (Batch, error) {
	if ndjson {
		return decodeBodyJSON(r, true, now, DecodeRecord)
	}
	body := bodyReader{r: r}
	defer body.release()
	if b, ok := body.split(now); ok {
		return b, nil
	}
	return decodeBodyJSON(body.replay(), false, now, DecodeRecord)
}

// recordDecoder decodes and validates one record: DecodeRecord, or decodeRecordJSON alone.
type recordDecoder func(raw []byte, now time.Time) (Attempt, *FieldError)

// decodeBodyJSON is the encoding/json body decoder, the reference for DecodeBody: it splits the body
// with json.Decoder (or, for ndjson, bufio.Scanner) and hands each element to record. DecodeBody
// uses it for NDJSON and whenever its own splitter meets anything unusual.
func decodeBodyJSON(r io.Reader, ndjson bool, now time.Time, record recordDecoder) (Batch, error) {
	var b Batch
	add := func(i int, raw []byte) {
		a, ferr := record(raw, now)
		b.add(i, a, ferr)
	}
	if ndjson {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64*1024), 1<<30)
		i := 0
		for sc.Scan() {
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			add(i, line)
			i++
		}
		if err := sc.Err(); err != nil {
			return Batch{}, fmt.Errorf("read ndjson: %w", err)
		}
		if i == 0 {
			return Batch{}, fmt.Errorf("%w: no records", ErrBody)
		}
		return b, nil
	}
	// One pass captures each element, a second decodes it: arrays are streamed element by element,
	// never unmarshalled whole first.
	br := bufio.NewReaderSize(r, 512) // only for the peek: larger reads pass straight through
	open, err := peekNonSpace(br)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return Batch{}, fmt.Errorf("%w: empty body", ErrBody)
		}
		return Batch{}, fmt.Errorf("read body: %w", err)
	}
	dec := json.NewDecoder(br)
	switch open {
	case '{':
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return Batch{}, bodyError(err)
		}
		add(0, raw)
	case '[':
		if _, err := dec.Token(); err != nil {
			return Batch{}, bodyError(err)
		}
		i := 0
		for ; dec.More(); i++ {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return Batch{}, bodyError(err)
			}
			add(i, raw)
		}
		if _, err := dec.Token(); err != nil {
			return Batch{}, bodyError(err)
		}
		if i == 0 {
			return Batch{}, fmt.Errorf("%w: empty array", ErrBody)
		}
	default:
		return Batch{}, fmt.Errorf("%w: expected a JSON object or array of objects", ErrBody)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err != nil && !isJSONError(err) {
			return Batch{}, fmt.Errorf("read body: %w", err)
		}
		return Batch{}, fmt.Errorf("%w: unexpected data after the JSON value (send NDJSON with Content-Type application/x-ndjson)", ErrBody)
	}
	return b, nil
}

func firstByte(b []byte) byte {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// peekNonSpace returns the first byte of r that is not JSON white space, leaving it unread.
func peekNonSpace(r *bufio.Reader) (byte, error) {
	for {
		c, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, r.UnreadByte()
		}
	}
}

// bodyError turns a failure to read the body's JSON into ErrBody, or into a read error (too large,
// broken gzip, deadline) the caller answers differently.
func bodyError(err error) error {
	if !isJSONError(err) && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read body: %w", err)
	}
	return fmt.Errorf("%w: %s", ErrBody, jsonReason(err))
}

// isJSONError tells a malformed body from a failure to read it (too large, broken gzip, cut off).
func isJSONError(err error) bool {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	return errors.As(err, &se) || errors.As(err, &te) || errors.Is(err, io.ErrUnexpectedEOF)
}

func jsonReason(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON at byte %d: %s", se.Offset, se.Error())
	}
	return err.Error()
}

// DecodeRecord decodes and validates one JSON record. The error names the first wrong field.
// Records of the common shape are read by a fast scanner; the rest, and every record it would
// refuse before validation, by encoding/json, whose results the scanner reproduces exactly.
func DecodeRecord(raw []byte, now time.Time) (Attempt, *FieldError) {
	a, _, st := decodeFast(raw)
	if st != scanOK {
		return decodeRecordJSON(raw, now)
	}
	return validated(a, now)
}

// validated ends the fast path as decodeRecordJSON ends: the Attempt as Validate leaves it, or only
// the error.
func validated(a Attempt, now time.Time) (Attempt, *FieldError) {
	if ferr := a.Validate(now); ferr != nil {
		return Attempt{}, ferr
	}
	return a, nil
}

// decodeRecordJSON is the encoding/json record decoder, the reference for DecodeRecord and its
// fallback for every record the fast decoder leaves alone. The error names the first wrong field.
func decodeRecordJSON(raw []byte, now time.Time) (Attempt, *FieldError) {
	var w wire
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Attempt{}, explain(raw)
	}
	a, ferr := w.attempt()
	if ferr != nil {
		return Attempt{}, ferr
	}
	if ferr := a.Validate(now); ferr != nil {
		return Attempt{}, ferr
	}
	return a, nil
}

// explain finds out which field made the encoding/json decode fail; it runs only for bad records.
func explain(raw []byte) *FieldError {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		if firstByte(raw) != '{' {
			return &FieldError{Reason: "record must be a JSON object"}
		}
		return &FieldError{Reason: "invalid JSON: " + jsonReason(err)}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if contentFields[strings.ToLower(k)] {
			return &FieldError{Field: k, Reason: "the ledger stores no prompts or replies: send usage and outcome only"}
		}
		kind, ok := fieldKinds[k]
		if !ok {
			return &FieldError{Field: k, Reason: "unknown field"}
		}
		one, _ := json.Marshal(map[string]json.RawMessage{k: m[k]})
		var w wire
		if err := json.Unmarshal(one, &w); err != nil {
			return &FieldError{Field: k, Reason: "must be " + kind}
		}
	}
	return &FieldError{Reason: "record could not be decoded"}
}

func (w *wire) attempt() (Attempt, *FieldError) {
	var a Attempt
	req := []struct {
		name string
		ok   bool
	}{
		{"attempt_id", w.AttemptID != nil}, {"request_id", w.RequestID != nil},
		{"attempt_no", w.AttemptNo != nil}, {"started_at", w.StartedAt != nil},
		{"latency_ms", w.LatencyMS != nil}, {"provider", w.Provider != nil},
		{"model", w.Model != nil}, {"service", w.Service != nil}, {"status", w.Status != nil},
	}
	for _, r := range req {
		if !r.ok {
			return a, &FieldError{Field: r.name, Reason: "required"}
		}
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	num := func(p *int64) int64 {
		if p == nil {
			return 0
		}
		return *p
	}
	a = Attempt{
		AttemptID: *w.AttemptID, RequestID: *w.RequestID, StartedAt: *w.StartedAt,
		LatencyMS: *w.LatencyMS, Provider: *w.Provider, Model: *w.Model, Service: *w.Service,
		Operation: str(w.Operation), Tenant: str(w.Tenant), Status: Status(*w.Status),
		ErrorClass: ErrorClass(str(w.ErrorClass)), HTTPStatus: int(num(w.HTTPStatus)),
		ProviderRequestID: str(w.ProviderRequestID), RetryAfterMS: num(w.RetryAfterMS),
		InputTokens: num(w.InputTokens), OutputTokens: num(w.OutputTokens),
		CacheWriteTokens: num(w.CacheWriteTokens), CacheWrite1hTokens: num(w.CacheWrite1hTokens),
		CacheReadTokens: num(w.CacheReadTokens), ReasoningTokens: num(w.ReasoningTokens),
		FallbackFrom: str(w.FallbackFrom), PromptHash: str(w.PromptHash), Metadata: w.Metadata,
		Org: str(w.Org),
	}
	if *w.AttemptNo < 1 || *w.AttemptNo > MaxAttemptNo {
		return a, &FieldError{Field: "attempt_no", Reason: fmt.Sprintf("must be between 1 and %d", MaxAttemptNo)}
	}
	a.AttemptNo = int(*w.AttemptNo)
	if w.HTTPStatus != nil && (*w.HTTPStatus < 100 || *w.HTTPStatus > 599) {
		return a, &FieldError{Field: "http_status", Reason: "must be an HTTP status between 100 and 599"}
	}
	if w.Fallback != nil {
		a.Fallback = *w.Fallback
	}
	if w.Batch != nil {
		a.Batch = *w.Batch
	}
	if w.UsageUnknown != nil {
		a.UsageUnknown = *w.UsageUnknown
	}
	if len(w.CostUSD) > 0 && string(w.CostUSD) != "null" {
		var c money.Nanos
		if err := json.Unmarshal(w.CostUSD, &c); err != nil {
			return a, &FieldError{Field: "cost_usd", Reason: "must be a decimal string or number of dollars"}
		}
		if c < 0 {
			return a, &FieldError{Field: "cost_usd", Reason: "must not be negative"}
		}
		a.CostUSD = &c
	}
	var ferr *FieldError
	if a.RateLimits, ferr = w.rateLimits(); ferr != nil {
		return a, ferr
	}
	return a, nil
}

// Validate checks the rules of the contract that types alone do not: lengths, ranges, the status and
// error class pairing and the token relations. It normalises Operation to its default and the error
// class of a cancelled attempt. now bounds started_at against clock skew. The error is the first
// invalid field, carrying every other one in Others, so a sender learns of all at once.
func (a *Attempt) Validate(now time.Time) *FieldError {
	var errs []*FieldError
	bad := func(e *FieldError) {
		if e != nil {
			errs = append(errs, e)
		}
	}
	type text struct {
		name     string
		v        string
		max      int
		required bool
	}
	texts := []text{
		{"attempt_id", a.AttemptID, MaxIDLen, true}, {"request_id", a.RequestID, MaxIDLen, true},
		{"provider", a.Provider, MaxNameLen, true}, {"model", a.Model, MaxNameLen, true},
		{"service", a.Service, MaxNameLen, true}, {"operation", a.Operation, MaxNameLen, false},
		{"tenant", a.Tenant, MaxNameLen, false}, {"fallback_from", a.FallbackFrom, MaxNameLen, false},
		{"prompt_hash", a.PromptHash, MaxIDLen, false},
		{"provider_request_id", a.ProviderRequestID, MaxProviderReqLen, false},
		{"org", a.Org, MaxNameLen, false},
	}
	for _, t := range texts {
		if t.required && t.v == "" {
			bad(&FieldError{Field: t.name, Reason: "must not be empty"})
		} else if reason := checkText(t.v, t.max); reason != "" {
			bad(&FieldError{Field: t.name, Reason: reason})
		}
	}
	if a.Operation == "" {
		a.Operation = DefaultOperation
	}
	if a.AttemptNo < 1 || a.AttemptNo > MaxAttemptNo {
		bad(&FieldError{Field: "attempt_no", Reason: fmt.Sprintf("must be between 1 and %d", MaxAttemptNo)})
	}
	if a.StartedAt.Before(Earliest) {
		bad(&FieldError{Field: "started_at", Reason: "must not be before 2000-01-01"})
	}
	if a.StartedAt.After(now.Add(MaxFutureSkew)) {
		bad(&FieldError{Field: "started_at", Reason: "lies more than 24h in the future"})
	}
	if a.LatencyMS < 0 || a.LatencyMS > MaxLatencyMS {
		bad(&FieldError{Field: "latency_ms", Reason: "must be between 0 and 86400000 (24h)"})
	}
	if a.RetryAfterMS < 0 || a.RetryAfterMS > MaxLatencyMS {
		bad(&FieldError{Field: "retry_after_ms", Reason: "must be between 0 and 86400000 (24h)"})
	}
	if a.HTTPStatus != 0 && (a.HTTPStatus < 100 || a.HTTPStatus > 599) {
		bad(&FieldError{Field: "http_status", Reason: "must be an HTTP status between 100 and 599"})
	}
	bad(a.validateOutcome())
	bad(a.validateTokens())
	bad(a.validateRateLimits())
	if a.CostUSD != nil && *a.CostUSD < 0 {
		bad(&FieldError{Field: "cost_usd", Reason: "must not be negative"})
	}
	if a.FallbackFrom != "" && !a.Fallback {
		bad(&FieldError{Field: "fallback_from", Reason: "set, but fallback is not true"})
	}
	if len(a.Metadata) > MaxMetadataKeys {
		bad(&FieldError{Field: "metadata", Reason: fmt.Sprintf("at most %d keys", MaxMetadataKeys)})
	}
	for k, v := range a.Metadata {
		if k == "" {
			bad(&FieldError{Field: "metadata", Reason: "keys must not be empty"})
		} else if reason := checkText(k, MaxMetadataLen); reason != "" {
			bad(&FieldError{Field: "metadata." + truncate(k), Reason: "key " + reason})
		} else if reason := checkText(v, MaxMetadataLen); reason != "" {
			bad(&FieldError{Field: "metadata." + truncate(k), Reason: reason})
		}
	}
	if len(errs) == 0 {
		return nil
	}
	first := *errs[0]
	first.Others = errs[1:]
	return &first
}

func (a *Attempt) validateOutcome() *FieldError {
	switch a.Status {
	case StatusOK:
		if a.ErrorClass != "" {
			return &FieldError{Field: "error_class", Reason: `must be absent when status is "ok"`}
		}
	case StatusCancelled:
		if a.ErrorClass != "" && a.ErrorClass != ErrorCancelled {
			return &FieldError{Field: "error_class", Reason: `must be absent or "cancelled" when status is "cancelled"`}
		}
		a.ErrorClass = ErrorCancelled
	case StatusError:
		if a.ErrorClass == "" {
			return &FieldError{Field: "error_class", Reason: `required when status is "error"`}
		}
		if !validClass(a.ErrorClass) {
			return &FieldError{Field: "error_class", Reason: fmt.Sprintf("%q is not one of %s", truncate(string(a.ErrorClass)), classList())}
		}
	default:
		return &FieldError{Field: "status", Reason: fmt.Sprintf(`%q is not one of "ok", "error", "cancelled"`, truncate(string(a.Status)))}
	}
	return nil
}

func (a *Attempt) validateTokens() *FieldError {
	counts := []struct {
		name string
		v    int64
	}{
		{"input_tokens", a.InputTokens}, {"output_tokens", a.OutputTokens},
		{"cache_write_tokens", a.CacheWriteTokens}, {"cache_write_1h_tokens", a.CacheWrite1hTokens},
		{"cache_read_tokens", a.CacheReadTokens}, {"reasoning_tokens", a.ReasoningTokens},
	}
	for _, c := range counts {
		if c.v < 0 || c.v > MaxTokens {
			return &FieldError{Field: c.name, Reason: "must be between 0 and 1000000000"}
		}
		if a.UsageUnknown && c.v != 0 {
			return &FieldError{Field: c.name, Reason: "must be absent when usage_unknown is true (the counts are unknown)"}
		}
	}
	if a.CacheWrite1hTokens > a.CacheWriteTokens {
		return &FieldError{Field: "cache_write_1h_tokens", Reason: "is the 1-hour part of cache_write_tokens and cannot exceed it"}
	}
	if a.ReasoningTokens > a.OutputTokens {
		return &FieldError{Field: "reasoning_tokens", Reason: "is the reasoning part of output_tokens and cannot exceed it"}
	}
	return nil
}

func validClass(c ErrorClass) bool {
	for _, k := range ErrorClasses {
		if k == c {
			return true
		}
	}
	return false
}

func classList() string {
	s := make([]string, len(ErrorClasses))
	for i, c := range ErrorClasses {
		s[i] = string(c)
	}
	return strings.Join(s, ", ")
}

func checkText(s string, max int) string {
	if len(s) > max {
		return fmt.Sprintf("longer than %d bytes", max)
	}
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return "contains a control character"
		}
	}
	return ""
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
