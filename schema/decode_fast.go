package schema

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ledgerd/ledgerd/money"
)

// The fast decoder reads the common shape of a record with a byte scanner and no reflection: known
// field names spelt exactly, each once, strings without escapes, whole numbers, timestamps and costs
// that parse. Anything else (an escape, a case variant, an unknown or repeated key, a wrong type, a
// value the contract refuses before validation) makes it give up, and the record goes to
// decodeRecordJSON, so every outcome and error message is the encoding/json decoder's. Both paths end
// in the same Validate, which is a function of the Attempt alone.

// Field numbers of the fast decoder: a bit each in fastRecord.seen and .set. The string fields come
// first, then the whole numbers, then the rest.
const (
	fAttemptID = iota
	fRequestID
	fProvider
	fModel
	fService
	fOperation
	fTenant
	fStatus
	fErrorClass
	fProviderRequestID
	fFallbackFrom
	fPromptHash
	fOrg
	fAttemptNo // first whole number
	fLatencyMS
	fHTTPStatus
	fRetryAfterMS
	fInputTokens
	fOutputTokens
	fCacheWriteTokens
	fCacheWrite1hTokens
	fCacheReadTokens
	fReasoningTokens
	fLimitRequests // the rate limits' limit and remaining, in RateLimits.limits order
	fRemainingRequests
	fLimitTokens
	fRemainingTokens
	fLimitInputTokens
	fRemainingInputTokens
	fLimitOutputTokens
	fRemainingOutputTokens
	fStartedAt     // first of the rest
	fResetRequests // the rate limits' resets, in RateLimits.limits order
	fResetTokens
	fResetInputTokens
	fResetOutputTokens
	fCostUSD
	fFallback
	fBatch
	fUsageUnknown
	fMetadata
	nFields
)

// rateLimitFieldMask has a bit for each ratelimit_* field.
const rateLimitFieldMask = (1<<fStartedAt - 1<<fLimitRequests) | (1<<fCostUSD - 1<<fResetRequests)

// requiredFields is the mask of the fields a record must carry with a non-null value.
const requiredFields = 1<<fAttemptID | 1<<fRequestID | 1<<fAttemptNo | 1<<fStartedAt | 1<<fLatencyMS |
	1<<fProvider | 1<<fModel | 1<<fService | 1<<fStatus

// fieldID returns the field number of an exactly spelt field name, or -1. encoding/json would also
// match case variants; the fast decoder leaves those to it.
func fieldID(key []byte) int {
	switch string(key) {
	case "attempt_id":
		return fAttemptID
	case "request_id":
		return fRequestID
	case "attempt_no":
		return fAttemptNo
	case "started_at":
		return fStartedAt
	case "latency_ms":
		return fLatencyMS
	case "provider":
		return fProvider
	case "model":
		return fModel
	case "service":
		return fService
	case "operation":
		return fOperation
	case "tenant":
		return fTenant
	case "status":
		return fStatus
	case "error_class":
		return fErrorClass
	case "http_status":
		return fHTTPStatus
	case "provider_request_id":
		return fProviderRequestID
	case "retry_after_ms":
		return fRetryAfterMS
	case "input_tokens":
		return fInputTokens
	case "output_tokens":
		return fOutputTokens
	case "cache_write_tokens":
		return fCacheWriteTokens
	case "cache_write_1h_tokens":
		return fCacheWrite1hTokens
	case "cache_read_tokens":
		return fCacheReadTokens
	case "reasoning_tokens":
		return fReasoningTokens
	case "cost_usd":
		return fCostUSD
	case "fallback":
		return fFallback
	case "fallback_from":
		return fFallbackFrom
	case "batch":
		return fBatch
	case "usage_unknown":
		return fUsageUnknown
	case "prompt_hash":
		return fPromptHash
	case "metadata":
		return fMetadata
	case "org":
		return fOrg
	case "ratelimit_limit_requests":
		return fLimitRequests
	case "ratelimit_remaining_requests":
		return fRemainingRequests
	case "ratelimit_reset_requests":
		return fResetRequests
	case "ratelimit_limit_tokens":
		return fLimitTokens
	case "ratelimit_remaining_tokens":
		return fRemainingTokens
	case "ratelimit_reset_tokens":
		return fResetTokens
	case "ratelimit_limit_input_tokens":
		return fLimitInputTokens
	case "ratelimit_remaining_input_tokens":
		return fRemainingInputTokens
	case "ratelimit_reset_input_tokens":
		return fResetInputTokens
	case "ratelimit_limit_output_tokens":
		return fLimitOutputTokens
	case "ratelimit_remaining_output_tokens":
		return fRemainingOutputTokens
	case "ratelimit_reset_output_tokens":
		return fResetOutputTokens
	}
	return -1
}

// scan is how far the fast decoder got.
type scan uint8

const (
	// scanOK means the record was decoded.
	scanOK scan = iota
	// scanShort means the data ended inside the object: read more, or let encoding/json explain.
	scanShort
	// scanOdd means the record is not of the common shape: encoding/json decodes it.
	scanOdd
)

// span is the content of a JSON string, between its quotes, as offsets into the decoded data.
type span struct{ lo, hi int }

// fastRecord is a record as the fast decoder reads it, before it becomes an Attempt.
type fastRecord struct {
	seen, set uint64 // fields met, and fields met with a value other than null
	str       [fAttemptNo]span
	num       [fStartedAt - fAttemptNo]int64
	startedAt time.Time
	resets    [4]time.Time // ratelimit_reset_*, in RateLimits.limits order
	cost      money.Nanos
	fallback  bool
	batch     bool
	usageUnk  bool
	meta      [MaxMetadataKeys][2]span
	nMeta     int
}

// decodeFast decodes the JSON object at the start of data (after white space) if it has the common
// shape, returning the Attempt before validation and the offset just past the object. data may go
// on after the object; what follows is not looked at.
func decodeFast(data []byte) (Attempt, int, scan) {
	var r fastRecord
	end, st := r.parse(data)
	if st != scanOK {
		return Attempt{}, 0, st
	}
	a, ok := r.attempt(data[:end])
	if !ok {
		return Attempt{}, 0, scanOdd
	}
	return a, end, scanOK
}

// parse reads the object at the start of d into r and returns the offset just past it.
func (r *fastRecord) parse(d []byte) (int, scan) {
	i := skipSpace(d, 0)
	if i >= len(d) {
		return 0, scanShort
	}
	if d[i] != '{' {
		return 0, scanOdd
	}
	if i = skipSpace(d, i+1); i >= len(d) {
		return 0, scanShort
	}
	for {
		if d[i] != '"' {
			return 0, scanOdd
		}
		next, st := scanString(d, i)
		if st != scanOK {
			return 0, st
		}
		id := fieldID(d[i+1 : next-1])
		if id < 0 || r.seen&(1<<id) != 0 {
			return 0, scanOdd
		}
		r.seen |= 1 << id
		if i, st = colon(d, next); st != scanOK {
			return 0, st
		}
		if i, st = r.value(d, i, id); st != scanOK {
			return 0, st
		}
		var done bool
		if i, done, st = memberEnd(d, i); st != scanOK || done {
			return i, st
		}
	}
}

// value reads the value of field id, which starts at d[i], and returns the offset just past it. A
// null leaves the field unset, as encoding/json leaves its pointer nil.
func (r *fastRecord) value(d []byte, i, id int) (int, scan) {
	if d[i] == 'n' {
		return literal(d, i, "null")
	}
	var next int
	st := scanOdd
	switch {
	case id < fAttemptNo:
		if d[i] == '"' {
			if next, st = scanString(d, i); st == scanOK {
				r.str[id] = span{i + 1, next - 1}
			}
		}
	case id < fStartedAt:
		next, st = r.int(d, i, id)
	case id == fStartedAt:
		next, st = timestamp(d, i, &r.startedAt)
	case id >= fResetRequests && id <= fResetOutputTokens:
		next, st = timestamp(d, i, &r.resets[id-fResetRequests])
	case id == fCostUSD:
		next, st = r.costUSD(d, i)
	case id == fFallback:
		next, st = boolean(d, i, &r.fallback)
	case id == fBatch:
		next, st = boolean(d, i, &r.batch)
	case id == fUsageUnknown:
		next, st = boolean(d, i, &r.usageUnk)
	case id == fMetadata:
		next, st = r.metadata(d, i)
	}
	if st == scanOK {
		r.set |= 1 << id
	}
	return next, st
}

// timestamp reads an RFC 3339 timestamp string, as time.Time unmarshals it, into *t.
func timestamp(d []byte, i int, t *time.Time) (int, scan) {
	if d[i] != '"' {
		return 0, scanOdd
	}
	next, st := scanString(d, i)
	if st == scanOK && t.UnmarshalJSON(d[i:next]) != nil {
		st = scanOdd
	}
	return next, st
}

// int reads a whole number of at most 18 digits; a fraction, an exponent or a longer number is left
// to encoding/json. "-0" is 0, as strconv.ParseInt reads it.
func (r *fastRecord) int(d []byte, i, id int) (int, scan) {
	neg := d[i] == '-'
	if neg {
		if i++; i >= len(d) {
			return 0, scanShort
		}
	}
	start := i
	var n int64
	for ; i < len(d) && d[i] >= '0' && d[i] <= '9'; i++ {
		n = n*10 + int64(d[i]-'0')
	}
	switch {
	case i >= len(d):
		return 0, scanShort
	case i == start || i-start > 18 || d[start] == '0' && i-start > 1:
		return 0, scanOdd
	}
	if neg {
		n = -n
	}
	r.num[id-fAttemptNo] = n
	return i, scanOK
}

// costUSD reads cost_usd, a string or a number, exactly as money.Nanos unmarshals it; a cost that
// does not parse or is negative is left to encoding/json, which names the error.
func (r *fastRecord) costUSD(d []byte, i int) (int, scan) {
	var next int
	st := scanOdd
	switch c := d[i]; {
	case c == '"':
		next, st = scanString(d, i)
	case c == '-' || c >= '0' && c <= '9':
		next, st = scanNumber(d, i)
	}
	if st != scanOK {
		return 0, st
	}
	lit, amount := d[i:next], d[i:next]
	if amount[0] == '"' {
		amount = amount[1 : len(amount)-1]
	}
	if c, ok := plainDollars(amount); ok {
		r.cost = c
		return next, scanOK
	}
	if r.cost.UnmarshalJSON(lit) != nil || r.cost < 0 {
		return 0, scanOdd
	}
	return next, scanOK
}

// plainDollars reads the usual form of a cost, up to nine digits, optionally a point and up to nine
// more, without money.ParseUSD's big.Rat: such an amount is a whole number of Nanos, so ParseUSD
// gives the same without rounding. Any other form is left to ParseUSD.
func plainDollars(s []byte) (money.Nanos, bool) {
	whole, frac, point := s, []byte(nil), bytes.IndexByte(s, '.')
	if point >= 0 {
		whole, frac = s[:point], s[point+1:]
		if len(frac) == 0 {
			return 0, false
		}
	}
	if len(whole) == 0 || len(whole) > 9 || len(frac) > 9 {
		return 0, false
	}
	var n money.Nanos
	for _, c := range whole {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + money.Nanos(c-'0')
	}
	n *= money.PerDollar
	unit := money.PerDollar
	for _, c := range frac {
		if c < '0' || c > '9' {
			return 0, false
		}
		unit /= 10
		n += money.Nanos(c-'0') * unit
	}
	return n, true
}

// metadata reads an object of string values; a null value inside it, or more keys than a record may
// carry, is left to encoding/json.
func (r *fastRecord) metadata(d []byte, i int) (int, scan) {
	if d[i] != '{' {
		return 0, scanOdd
	}
	if i = skipSpace(d, i+1); i >= len(d) {
		return 0, scanShort
	}
	if d[i] == '}' {
		return i + 1, scanOK
	}
	for {
		if d[i] != '"' || r.nMeta == len(r.meta) {
			return 0, scanOdd
		}
		next, st := scanString(d, i)
		if st != scanOK {
			return 0, st
		}
		key := span{i + 1, next - 1}
		if i, st = colon(d, next); st != scanOK {
			return 0, st
		}
		if d[i] != '"' {
			return 0, scanOdd
		}
		if next, st = scanString(d, i); st != scanOK {
			return 0, st
		}
		r.meta[r.nMeta] = [2]span{key, {i + 1, next - 1}}
		r.nMeta++
		var done bool
		if i, done, st = memberEnd(d, next); st != scanOK || done {
			return i, st
		}
	}
}

// attempt turns the parsed record into an Attempt, or reports false where the encoding/json path
// refuses it before validation (a required field missing, attempt_no or http_status out of range, a
// rate limit without what remains of it or below 1),
// so that its error message is the one given. obj is the object's bytes: the Attempt's strings all
// share one copy of it.
func (r *fastRecord) attempt(obj []byte) (Attempt, bool) {
	num := func(id int) int64 { return r.num[id-fAttemptNo] }
	if r.set&requiredFields != requiredFields || num(fAttemptNo) < 1 || num(fAttemptNo) > MaxAttemptNo {
		return Attempt{}, false
	}
	if r.set&(1<<fHTTPStatus) != 0 && (num(fHTTPStatus) < 100 || num(fHTTPStatus) > 599) {
		return Attempt{}, false
	}
	s := string(obj)
	str := func(id int) string { return s[r.str[id].lo:r.str[id].hi] }
	a := Attempt{
		AttemptID: str(fAttemptID), RequestID: str(fRequestID), AttemptNo: int(num(fAttemptNo)),
		StartedAt: r.startedAt, LatencyMS: num(fLatencyMS), Provider: str(fProvider),
		Model: str(fModel), Service: str(fService), Operation: str(fOperation),
		Tenant: str(fTenant), Status: Status(str(fStatus)), ErrorClass: ErrorClass(str(fErrorClass)),
		HTTPStatus: int(num(fHTTPStatus)), ProviderRequestID: str(fProviderRequestID),
		RetryAfterMS: num(fRetryAfterMS), InputTokens: num(fInputTokens),
		OutputTokens: num(fOutputTokens), CacheWriteTokens: num(fCacheWriteTokens),
		CacheWrite1hTokens: num(fCacheWrite1hTokens), CacheReadTokens: num(fCacheReadTokens),
		ReasoningTokens: num(fReasoningTokens), Fallback: r.fallback,
		FallbackFrom: str(fFallbackFrom), Batch: r.batch, PromptHash: str(fPromptHash), Org: str(fOrg),
		UsageUnknown: r.usageUnk,
	}
	if r.set&rateLimitFieldMask != 0 {
		var ok bool
		if a.RateLimits, ok = r.rateLimits(); !ok {
			return Attempt{}, false
		}
	}
	if r.set&(1<<fCostUSD) != 0 {
		c := r.cost
		a.CostUSD = &c
	}
	if r.set&(1<<fMetadata) != 0 {
		a.Metadata = make(map[string]string, r.nMeta)
		for _, kv := range r.meta[:r.nMeta] {
			a.Metadata[s[kv[0].lo:kv[0].hi]] = s[kv[1].lo:kv[1].hi]
		}
	}
	return a, true
}

// rateLimits gathers the ratelimit_* fields, or reports false where the encoding/json path refuses
// them (rateLimitsJSON.rateLimits).
func (r *fastRecord) rateLimits() (*RateLimits, bool) {
	var out RateLimits
	for i, f := range out.limits() {
		limitID := fLimitRequests + 2*i
		hasLimit, hasRemaining := r.set&(1<<limitID) != 0, r.set&(1<<(limitID+1)) != 0
		limit := r.num[limitID-fAttemptNo]
		if hasLimit != hasRemaining || hasLimit && (limit < 1 || limit > MaxRateLimit) {
			return nil, false
		}
		if hasLimit {
			f.l.Limit, f.l.Remaining = limit, r.num[limitID+1-fAttemptNo]
		}
		if r.set&(1<<(fResetRequests+i)) != 0 {
			f.l.Reset = r.resets[i]
		}
	}
	return &out, true
}

// colon reads the colon after an object key ending at d[i] and returns the start of the value.
func colon(d []byte, i int) (int, scan) {
	if i = skipSpace(d, i); i >= len(d) {
		return 0, scanShort
	}
	if d[i] != ':' {
		return 0, scanOdd
	}
	if i = skipSpace(d, i+1); i >= len(d) {
		return 0, scanShort
	}
	return i, scanOK
}

// memberEnd reads what follows an object member's value at d[i]: the closing brace (done, i past
// it) or a comma (i at the next member, past any space).
func memberEnd(d []byte, i int) (int, bool, scan) {
	if i = skipSpace(d, i); i >= len(d) {
		return 0, false, scanShort
	}
	switch d[i] {
	case '}':
		return i + 1, true, scanOK
	case ',':
		if i = skipSpace(d, i+1); i >= len(d) {
			return 0, false, scanShort
		}
		return i, false, scanOK
	}
	return 0, false, scanOdd
}

// skipSpace returns the offset of the first byte at or after i that is not JSON white space.
func skipSpace(d []byte, i int) int {
	for i < len(d) && isSpace(d[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// scanString reads the JSON string starting with the quote at d[i] and returns the offset just past
// its closing quote. Strings with escapes or invalid UTF-8 (which encoding/json would replace) are
// left to encoding/json; control characters are invalid JSON.
func scanString(d []byte, i int) (int, scan) {
	j := i + 1
	// Skip eight plain bytes at a time: none a quote, a backslash, a control character or non-ASCII.
	for ; j+8 <= len(d); j += 8 {
		w := binary.LittleEndian.Uint64(d[j:])
		if (hasByteBelow(w, 0x20)|hasZeroByte(w^('"'*lowBytes))|hasZeroByte(w^('\\'*lowBytes))|w)&highBits != 0 {
			break
		}
	}
	ascii := true
	for ; j < len(d); j++ {
		switch c := d[j]; {
		case c == '"':
			if !ascii && !utf8.Valid(d[i+1:j]) {
				return 0, scanOdd
			}
			return j + 1, scanOK
		case c == '\\' || c < 0x20:
			return 0, scanOdd
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return 0, scanShort
}

const (
	lowBytes = 0x0101010101010101
	highBits = 0x8080808080808080
)

// hasZeroByte has the high bit set in some byte if a byte of w is zero (and may have it in bytes
// above that one, which is all scanString needs to know).
func hasZeroByte(w uint64) uint64 { return (w - lowBytes) &^ w & highBits }

// hasByteBelow has the high bit set in some byte if a byte of w is below n (n at most 0x80), as
// hasZeroByte does.
func hasByteBelow(w uint64, n byte) uint64 { return (w - uint64(n)*lowBytes) &^ w & highBits }

// scanNumber reads a JSON number starting at d[i] and returns the offset just past it. It needs the
// byte after the number to know it has ended.
func scanNumber(d []byte, i int) (int, scan) {
	digits := func(i int) int {
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		return i
	}
	if d[i] == '-' {
		i++
	}
	switch {
	case i >= len(d):
		return 0, scanShort
	case d[i] == '0':
		i++
	case d[i] >= '1' && d[i] <= '9':
		i = digits(i + 1)
	default:
		return 0, scanOdd
	}
	if i < len(d) && d[i] == '.' {
		if i++; i < len(d) && (d[i] < '0' || d[i] > '9') {
			return 0, scanOdd
		}
		i = digits(i)
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		if i++; i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i < len(d) && (d[i] < '0' || d[i] > '9') {
			return 0, scanOdd
		}
		i = digits(i)
	}
	if i >= len(d) {
		return 0, scanShort
	}
	return i, scanOK
}

// literal reads the literal word (null, true or false) at d[i].
func literal(d []byte, i int, word string) (int, scan) {
	if len(d)-i < len(word) {
		return 0, scanShort
	}
	if string(d[i:i+len(word)]) != word {
		return 0, scanOdd
	}
	return i + len(word), scanOK
}

// boolean reads true or false into *b.
func boolean(d []byte, i int, b *bool) (int, scan) {
	switch d[i] {
	case 't':
		*b = true
		return literal(d, i, "true")
	case 'f':
		*b = false
		return literal(d, i, "false")
	}
	return 0, scanOdd
}

// bodyReader keeps every byte read of a body, so that the encoding/json splitter can read it again.
type bodyReader struct {
	r      io.Reader
	buf    []byte
	pooled *[]byte // where buf came from in bodyBuffers
	err    error   // what ended the reading: io.EOF or a read error
}

// bodyBuffers recycles bodyReader buffers: nothing decoded refers to them, since records copy their
// strings out. Buffers that grew past maxPooledBuffer are left to the collector.
var bodyBuffers = sync.Pool{New: func() any { return new([]byte) }}

const (
	firstBuffer     = 16 << 10 // the size a buffer starts at; it doubles as needed
	maxPooledBuffer = 1 << 20  // the largest buffer bodyBuffers keeps
)

// release returns b's buffer to bodyBuffers; b must not be used after.
func (b *bodyReader) release() {
	if b.pooled != nil && cap(b.buf) <= maxPooledBuffer {
		*b.pooled = b.buf[:0]
		bodyBuffers.Put(b.pooled)
	}
	b.buf, b.pooled = nil, nil
}

// fill reads more of the body, and reports false once it has ended or failed.
func (b *bodyReader) fill() bool {
	if b.err != nil {
		return false
	}
	if b.pooled == nil {
		b.pooled = bodyBuffers.Get().(*[]byte)
		b.buf = *b.pooled
	}
	if len(b.buf) == cap(b.buf) {
		b.buf = slices.Grow(b.buf, max(firstBuffer, cap(b.buf)))
	}
	n, err := b.r.Read(b.buf[len(b.buf):cap(b.buf)])
	b.buf = b.buf[:len(b.buf)+n]
	if err != nil {
		b.err = err
		return n > 0
	}
	return true
}

// replay returns a reader of the whole body: what was read so far, then the rest or the same end.
func (b *bodyReader) replay() io.Reader {
	switch b.err {
	case nil:
		return io.MultiReader(bytes.NewReader(b.buf), b.r)
	case io.EOF:
		return bytes.NewReader(b.buf)
	}
	return io.MultiReader(bytes.NewReader(b.buf), errReader{b.err})
}

// errReader fails every read with its error.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// nonSpace returns the offset of the first byte at or after i that is not JSON white space, reading
// as needed; false means the body ended (or failed) first.
func (b *bodyReader) nonSpace(i int) (int, bool) {
	for {
		if i = skipSpace(b.buf, i); i < len(b.buf) {
			return i, true
		}
		if !b.fill() {
			return 0, false
		}
	}
}

// split decodes a body that is one object or a non-empty array of objects, well formed and followed
// by nothing but white space up to its end. false means the body is not of that shape, or reading it
// failed, and the encoding/json splitter must decide.
func (b *bodyReader) split(now time.Time) (Batch, bool) {
	var out Batch
	i, ok := b.nonSpace(0)
	if !ok {
		return Batch{}, false
	}
	switch b.buf[i] {
	case '{':
		if i, ok = b.record(&out, 0, i, now); !ok {
			return Batch{}, false
		}
	case '[':
		for n := 0; ; n++ {
			if i, ok = b.nonSpace(i + 1); !ok || b.buf[i] != '{' {
				return Batch{}, false
			}
			if i, ok = b.record(&out, n, i, now); !ok {
				return Batch{}, false
			}
			if i, ok = b.nonSpace(i); !ok {
				return Batch{}, false
			}
			if b.buf[i] == ']' {
				i++
				break
			}
			if b.buf[i] != ',' {
				return Batch{}, false
			}
		}
	default:
		return Batch{}, false
	}
	if _, ok := b.nonSpace(i); ok || b.err != io.EOF {
		return Batch{}, false
	}
	return out, true
}

// record decodes the object that starts at b.buf[i], element n of the body, into out and returns the
// offset just past it; false means the object is not well formed JSON or the body ended inside it.
func (b *bodyReader) record(out *Batch, n, i int, now time.Time) (int, bool) {
	a, size, st := decodeFast(b.buf[i:])
	if st == scanShort {
		end, ok := b.objectEnd(i)
		if !ok {
			return 0, false
		}
		a, size, st = decodeFast(b.buf[i:end])
	}
	if st == scanOK {
		a, ferr := validated(a, now)
		out.add(n, a, ferr)
		return i + size, true
	}
	end, ok := b.objectEnd(i)
	if !ok || !json.Valid(b.buf[i:end]) {
		return 0, false
	}
	a, ferr := decodeRecordJSON(b.buf[i:end], now)
	out.add(n, a, ferr)
	return end, true
}

// objectEnd returns the offset just past the bracket that closes the one opening at b.buf[i],
// reading as needed. It only counts brackets outside strings: json.Valid judges the object after
// (json.Decoder, too, limits nesting per element). false means the body ended first.
func (b *bodyReader) objectEnd(i int) (int, bool) {
	depth, inString, escaped := 0, false, false
	for {
		for ; i < len(b.buf); i++ {
			c := b.buf[i]
			switch {
			case inString:
				switch {
				case escaped:
					escaped = false
				case c == '\\':
					escaped = true
				case c == '"':
					inString = false
				}
			case c == '"':
				inString = true
			case c == '{' || c == '[':
				depth++
			case c == '}' || c == ']':
				if depth--; depth == 0 {
					return i + 1, true
				}
			}
		}
		if !b.fill() {
			return 0, false
		}
	}
}
