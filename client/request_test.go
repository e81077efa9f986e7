package client

import (
	"encoding/json"
	"strings"
	"testing"
)

// referenceFields reads model and stream the slow, sure way, for comparison with scanRequest: exact
// keys, the last of a repeated key winning, wrong types giving zero values.
func referenceFields(b []byte) (requestFields, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return requestFields{}, false
	}
	var f requestFields
	var s string
	if json.Unmarshal(m["model"], &s) == nil {
		f.Model = clean(s, 128)
	}
	_ = json.Unmarshal(m["stream"], &f.Stream)
	return f, true
}

func TestScanRequest(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		body string
		want requestFields
	}{
		{"plain", `{"model":"gpt-4o","stream":true}`, requestFields{"gpt-4o", true}},                                   // both fields
		{"after the prompt", `{"messages":[{"content":"say \"model\": x"}],"model":"m1"}`, requestFields{"m1", false}}, // keys inside strings and nested objects ignored
		{"nested model", `{"metadata":{"model":"no"},"stream":false}`, requestFields{}},                                // only top-level members count
		{"spaces", " {\n \"model\" : \"m2\" ,\n \"stream\" : true \n} ", requestFields{"m2", true}},                    // whitespace anywhere
		{"escaped", `{"model":"a\u002fb","stream":true}`, requestFields{"a/b", true}},                                  // escapes decoded
		{"escaped key", `{"mod\u0065l":"m3"}`, requestFields{"m3", false}},                                             // escaped key
		{"backslashes", `{"x":"\\\\","model":"m4"}`, requestFields{"m4", false}},                                       // an even run of backslashes ends the string
		{"wrong types", `{"model":5,"stream":"yes"}`, requestFields{}},                                                 // wrong types give nothing
		{"repeated", `{"model":"a","model":"b"}`, requestFields{"b", false}},                                           // the last one wins
		{"not an object", `["model","x"]`, requestFields{}},                                                            // arrays have no members
		{"control character", "{\"model\":\"a\\nb\"}", requestFields{}},                                                // not a name the ledger takes
		{"truncated", `{"stream":true,"model":"gp`, requestFields{"", true}},                                           // broken JSON: what was read before
		{"too long", `{"model":"` + strings.Repeat("m", 129) + `"}`, requestFields{}},                                  // over 128 bytes
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := scanRequest([]byte(tc.body)); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if ref, ok := referenceFields([]byte(tc.body)); ok && ref != tc.want {
				t.Errorf("the reference decoder says %+v", ref)
			}
		})
	}
}

// FuzzScanRequest checks scanRequest against a full JSON decode on every valid body, and that it never
// fails on an invalid one.
func FuzzScanRequest(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		got := scanRequest(body)
		if ref, ok := referenceFields(body); ok && got != ref {
			t.Fatalf("scan %+v, decode %+v", got, ref)
		}
	})
}
