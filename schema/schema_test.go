package schema

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const valid = `{"attempt_id":"a1","request_id":"r1","attempt_no":1,"started_at":"2026-11-29T10:00:00Z","latency_ms":812,"provider":"anthropic","model":"claude-haiku-5-5","service":"router","status":"ok","input_tokens":333,"output_tokens":9}`

// with returns the valid record with one field set (or removed, for a nil value).
func with(field string, value any) string {
	var m map[string]any
	_ = json.Unmarshal([]byte(valid), &m)
	if value == nil {
		delete(m, field)
	} else {
		m[field] = value
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// TestJSONSchemaMatchesDecoder guards the published contract: the JSON Schema names exactly the
// fields the decoder accepts, and the same required ones.
func TestJSONSchemaMatchesDecoder(t *testing.T) {
	t.Parallel()
	var doc struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(JSONSchema, &doc); err != nil {
		t.Fatal(err)
	}
	var props []string
	for k := range doc.Properties {
		props = append(props, k)
	}
	sort.Strings(props)
	if !reflect.DeepEqual(props, Fields()) {
		t.Errorf("schema properties %v\ndecoder fields %v", props, Fields())
	}
	for _, f := range doc.Required {
		if _, ferr := DecodeRecord([]byte(with(f, nil)), now); ferr == nil || ferr.Field != f || ferr.Reason != "required" {
			t.Errorf("dropping required %s: got %v", f, ferr)
		}
	}
}

func TestDecodeRecord(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, field, reason string
	}{
		{"valid record", valid, "", ""},
		{"prompt refused as content", with("prompt", "hello"), "prompt", "stores no prompts"},
		{"messages refused as content", with("messages", []any{}), "messages", "stores no prompts"},
		{"content refused whatever its case", with("Text", "x"), "Text", "stores no prompts"},
		{"unknown field named", with("colour", "red"), "colour", "unknown field"},
		{"wrong type named", with("input_tokens", "many"), "input_tokens", "must be a whole number"},
		{"fractional tokens", with("input_tokens", 1.5), "input_tokens", "must be a whole number"},
		{"negative tokens", with("output_tokens", -1), "output_tokens", "between 0"},
		{"bad timestamp", with("started_at", "yesterday"), "started_at", "RFC 3339"},
		{"far future", with("started_at", "2027-01-01T00:00:00Z"), "started_at", "future"},
		{"attempt_no zero", with("attempt_no", 0), "attempt_no", "between 1"},
		{"unknown status", with("status", "maybe"), "status", "not one of"},
		{"error without class", with("status", "error"), "error_class", "required"},
		{"ok with class", with("error_class", "timeout"), "error_class", "absent"},
		{"long attempt id", with("attempt_id", strings.Repeat("x", 129)), "attempt_id", "longer than 128"},
		{"empty model", with("model", ""), "model", "must not be empty"},
		{"control character", with("service", "a\nb"), "service", "control character"},
		{"1h write above write", with("cache_write_1h_tokens", 5), "cache_write_1h_tokens", "cannot exceed"},
		{"reasoning above output", with("reasoning_tokens", 10), "reasoning_tokens", "cannot exceed"},
		{"fallback_from without fallback", with("fallback_from", "claude-sonnet-5-5"), "fallback_from", "fallback is not true"},
		{"negative client cost", with("cost_usd", "-1"), "cost_usd", "negative"},
		{"cost as words", with("cost_usd", "cheap"), "cost_usd", "decimal"},
		{"metadata not strings", with("metadata", map[string]any{"a": 1}), "metadata", "object of string"},
		{"metadata too many keys", with("metadata", map[string]string{"1": "", "2": "", "3": "", "4": "", "5": "", "6": "", "7": "", "8": "", "9": "", "10": "", "11": "", "12": "", "13": "", "14": "", "15": "", "16": "", "17": ""}), "metadata", "at most 16"},
		{"not an object", `[1]`, "", "JSON object"},
		{"http status out of range", with("http_status", 700), "http_status", "between 100 and 599"},
		{"rate limit without remaining", with("ratelimit_limit_requests", 50), "ratelimit_remaining_requests", "required with ratelimit_limit_requests"},
		{"remaining without rate limit", with("ratelimit_remaining_tokens", 5), "ratelimit_limit_tokens", "required with ratelimit_remaining_tokens"},
		{"rate limit of zero", withAll(map[string]any{"ratelimit_limit_input_tokens": 0, "ratelimit_remaining_input_tokens": 0}), "ratelimit_limit_input_tokens", "between 1 and"},
		{"negative remaining", withAll(map[string]any{"ratelimit_limit_output_tokens": 10, "ratelimit_remaining_output_tokens": -1}), "ratelimit_remaining_output_tokens", "between 0 and"},
		{"rate limit not a number", with("ratelimit_limit_requests", "many"), "ratelimit_limit_requests", "whole number"},
		{"reset as a duration", with("ratelimit_reset_requests", "6m0s"), "ratelimit_reset_requests", "RFC 3339"},
		{"reset a year ahead", with("ratelimit_reset_tokens", "2027-11-29T10:00:00Z"), "ratelimit_reset_tokens", "32 days after started_at"},
		{"org with a control character", with("org", "a\tb"), "org", "control character"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, ferr := DecodeRecord([]byte(c.in), now)
			if c.reason == "" {
				if ferr != nil {
					t.Fatalf("unexpected error %v", ferr)
				}
				return
			}
			if ferr == nil {
				t.Fatalf("accepted, want error on %s", c.field)
			}
			if ferr.Field != c.field || !strings.Contains(ferr.Error(), c.reason) {
				t.Fatalf("got %q (field %q), want field %q containing %q", ferr.Error(), ferr.Field, c.field, c.reason)
			}
		})
	}
}

// withAll returns the valid record with several fields set.
func withAll(fields map[string]any) string {
	var m map[string]any
	_ = json.Unmarshal([]byte(valid), &m)
	for k, v := range fields {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// TestRateLimitsRoundTrip guards the JSON shape of rate limits: DecodeRecord reads the flat
// ratelimit_* fields into RateLimits (a remaining of 0 kept), and MarshalJSON writes them back so
// that decoding again and json.Unmarshal give the same record.
func TestRateLimitsRoundTrip(t *testing.T) {
	t.Parallel()
	in := withAll(map[string]any{"org": "acme-prod", "ratelimit_limit_requests": 50, "ratelimit_remaining_requests": 0,
		"ratelimit_reset_requests": "2026-11-29T10:00:30Z", "ratelimit_reset_tokens": "2026-11-29T10:00:01Z"})
	a, ferr := DecodeRecord([]byte(in), now)
	if ferr != nil {
		t.Fatal(ferr)
	}
	want := &RateLimits{
		Requests: RateLimit{Limit: 50, Remaining: 0, Reset: time.Date(2026, 11, 29, 10, 0, 30, 0, time.UTC)},
		Tokens:   RateLimit{Reset: time.Date(2026, 11, 29, 10, 0, 1, 0, time.UTC)},
	}
	if a.Org != "acme-prod" || !reflect.DeepEqual(a.RateLimits, want) {
		t.Fatalf("decoded org %q, rate limits %+v", a.Org, a.RateLimits)
	}
	raw, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"ratelimit_remaining_requests":0`) || strings.Contains(string(raw), "ratelimit_limit_tokens") {
		t.Fatalf("marshalled %s", raw)
	}
	back, ferr := DecodeRecord(raw, now)
	if ferr != nil || !reflect.DeepEqual(back, a) {
		t.Fatalf("decoded again: %+v, %v", back, ferr)
	}
	var plain Attempt
	if err := json.Unmarshal(raw, &plain); err != nil || !reflect.DeepEqual(plain, a) {
		t.Fatalf("json.Unmarshal: %+v, %v", plain, err)
	}
	none, err := json.Marshal(Attempt{AttemptID: "x"})
	if err != nil || strings.Contains(string(none), "ratelimit") || strings.Contains(string(none), "org") {
		t.Fatalf("a record without limits marshalled as %s (%v)", none, err)
	}
}

// TestDecodeRecordNormalises checks defaults: operation, and the class of a cancelled attempt.
func TestDecodeRecordNormalises(t *testing.T) {
	t.Parallel()
	a, ferr := DecodeRecord([]byte(with("status", "cancelled")), now)
	if ferr != nil {
		t.Fatal(ferr)
	}
	if a.Operation != DefaultOperation || a.ErrorClass != ErrorCancelled {
		t.Fatalf("operation %q class %q", a.Operation, a.ErrorClass)
	}
	b, ferr := DecodeRecord([]byte(with("cost_usd", "0.0000378")), now)
	if ferr != nil || b.CostUSD == nil || *b.CostUSD != 37800 {
		t.Fatalf("cost %v, %v", b.CostUSD, ferr)
	}
}

func TestDecodeBody(t *testing.T) {
	t.Parallel()
	bad := with("prompt", "x")
	cases := []struct {
		name     string
		body     string
		ndjson   bool
		ok       int
		rejected []int
		err      bool
	}{
		{"one object", valid, false, 1, nil, false},
		{"array with a bad record", "[" + valid + "," + bad + "," + with("attempt_id", "a2") + "]", false, 2, []int{1}, false},
		{"ndjson with a broken line", valid + "\n{not json\n" + with("attempt_id", "a2") + "\n\n", true, 2, []int{1}, false},
		{"broken json", `{"attempt_id":`, false, 0, nil, true},
		{"empty body", ``, false, 0, nil, true},
		{"empty array", `[]`, false, 0, nil, true},
		{"a string", `"hello"`, false, 0, nil, true},
		{"two objects without ndjson", valid + valid, false, 0, nil, true},
		{"array of non-objects", `[1, 2]`, false, 0, []int{0, 1}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b, err := DecodeBody(strings.NewReader(c.body), c.ndjson, now)
			if (err != nil) != c.err {
				t.Fatalf("err = %v, want error %v", err, c.err)
			}
			if len(b.Records) != c.ok {
				t.Fatalf("%d records, want %d", len(b.Records), c.ok)
			}
			var idx []int
			for _, r := range b.Rejected {
				idx = append(idx, r.Index)
			}
			if !reflect.DeepEqual(idx, c.rejected) {
				t.Fatalf("rejected %v, want %v (%+v)", idx, c.rejected, b.Rejected)
			}
		})
	}
}

// FuzzDecodeBody feeds arbitrary bodies to the decoder: it must never panic, every record must be
// either accepted (and then valid) or rejected with a reason, and accepted records round-trip.
func FuzzDecodeBody(f *testing.F) {
	f.Add([]byte(valid), false)
	f.Add([]byte("["+valid+","+with("prompt", "x")+"]"), false)
	f.Add([]byte(valid+"\n"+with("status", "error")), true)
	f.Add([]byte(with("metadata", map[string]string{"k": "v"})), false)
	f.Fuzz(func(t *testing.T, body []byte, ndjson bool) {
		b, err := DecodeBody(strings.NewReader(string(body)), ndjson, now)
		if err != nil {
			return
		}
		for _, r := range b.Rejected {
			if r.Error == "" {
				t.Fatalf("rejection without reason: %+v", r)
			}
		}
		for _, a := range b.Records {
			if ferr := a.Validate(now); ferr != nil {
				t.Fatalf("accepted record fails validation: %v", ferr)
			}
			raw, err := json.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			back, ferr := DecodeRecord(raw, now)
			if ferr != nil {
				t.Fatalf("accepted record does not round-trip: %v\n%s", ferr, raw)
			}
			if !back.StartedAt.Equal(a.StartedAt) || back.AttemptID != a.AttemptID {
				t.Fatalf("round trip changed the record")
			}
		}
	})
}

// TestValidateReportsEveryField checks that a record with several invalid fields is refused with
// a rejection for each, not only the first.
func TestValidateReportsEveryField(t *testing.T) {
	t.Parallel()
	body := `[{"attempt_id":"a1","request_id":"","attempt_no":1,"started_at":"2026-11-01T00:00:00Z","latency_ms":-5,` +
		`"provider":"openai","model":"gpt-4o","service":"s","status":"ok","error_class":"timeout","input_tokens":5,` +
		`"reasoning_tokens":9},` +
		`{"attempt_id":"a2","request_id":"r","attempt_no":1,"started_at":"2026-11-01T00:00:00Z","latency_ms":1,` +
		`"provider":"openai","model":"gpt-4o","service":"s","status":"ok"}]`
	b, err := DecodeBody(strings.NewReader(body), false, time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, r := range b.Rejected {
		if r.Index != 0 {
			t.Errorf("rejection of record %d: %+v", r.Index, r)
		}
		fields = append(fields, r.Field)
	}
	want := []string{"request_id", "latency_ms", "error_class", "reasoning_tokens"}
	if !slices.Equal(fields, want) || len(b.Records) != 1 {
		t.Errorf("rejected fields %v (records kept %d), want %v and 1", fields, len(b.Records), want)
	}
}
