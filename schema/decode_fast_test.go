package schema

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// realistic is a record with every common field, as the Go client sends it.
const realistic = `{"attempt_id":"01JDQ8Z6M3V7X9K2P4R5T6Y8W0","request_id":"01JDQ8Z6M3V7X9K2P4R5T6Y8VZ",` +
	`"attempt_no":2,"started_at":"2026-11-29T10:00:00.123456Z","latency_ms":812,"provider":"anthropic",` +
	`"model":"claude-haiku-5-5","service":"router","operation":"summarise","tenant":"acme",` +
	`"status":"error","error_class":"rate_limited","http_status":429,"input_tokens":1333,` +
	`"output_tokens":209,"cache_write_tokens":1024,"cache_write_1h_tokens":512,"cache_read_tokens":4096,` +
	`"reasoning_tokens":64,"cost_usd":"0.0037812","prompt_hash":"9f86d081884c7d659a2feaa0c55ad015",` +
	`"fallback":false,"metadata":{"region":"eu-west-1","team":"search"}}`

// limitedFields are the org and rate limit fields of a record from a response that reported them,
// as the Go client sends them.
const limitedFields = `"org":"acme-prod","ratelimit_limit_requests":4000,"ratelimit_remaining_requests":3998,` +
	`"ratelimit_reset_requests":"2026-11-29T10:00:01Z","ratelimit_limit_tokens":480000,` +
	`"ratelimit_remaining_tokens":476000,"ratelimit_reset_tokens":"2026-11-29T10:00:00.5Z",` +
	`"ratelimit_limit_input_tokens":400000,"ratelimit_remaining_input_tokens":398000,` +
	`"ratelimit_reset_input_tokens":"2026-11-29T10:00:00.5Z","ratelimit_limit_output_tokens":80000,` +
	`"ratelimit_remaining_output_tokens":0,"ratelimit_reset_output_tokens":"2026-11-29T10:00:03Z"`

// limited is the realistic record with an org and every rate limit.
var limited = realistic[:len(realistic)-1] + "," + limitedFields + "}"

// realisticWith is the realistic record with the text of one field's value replaced (or the whole
// field removed, for an empty value), keeping every other byte.
func realisticWith(field, value string) string {
	key := `"` + field + `":`
	start := strings.Index(realistic, key)
	if start < 0 {
		return realistic[:len(realistic)-1] + "," + key + value + "}"
	}
	end := start + len(key)
	depth := 0
	for ; end < len(realistic); end++ {
		c := realistic[end]
		if c == '{' {
			depth++
		}
		if c == '}' && depth > 0 {
			depth--
			continue
		}
		if depth == 0 && (c == ',' || c == '}') {
			break
		}
	}
	if value == "" {
		if realistic[end] == ',' {
			end++
		}
		return realistic[:start] + realistic[end:]
	}
	return realistic[:start+len(key)] + value + realistic[end:]
}

// differential is a table of records that reach every branch of the fast decoder and every reason it
// gives up; each must decode exactly as encoding/json decodes it.
var differential = []struct {
	name string
	in   string
	fast bool // the fast decoder reads it (false: it must give up)
}{
	{"realistic record", realistic, true},
	{"org and rate limits", limited, true},
	{"one rate limit", realisticWith("ratelimit_limit_requests", `50,"ratelimit_remaining_requests":0`), true},
	{"rate limit without remaining", realisticWith("ratelimit_limit_tokens", `50`), false},
	{"remaining without limit", realisticWith("ratelimit_remaining_tokens", `50`), false},
	{"rate limit of zero", realisticWith("ratelimit_limit_requests", `0,"ratelimit_remaining_requests":0`), false},
	{"rate limit out of range", realisticWith("ratelimit_limit_requests", `1000000000001,"ratelimit_remaining_requests":0`), false},
	{"remaining above the limit", realisticWith("ratelimit_limit_requests", `5,"ratelimit_remaining_requests":6`), true},
	{"negative remaining reaches validation", realisticWith("ratelimit_limit_requests", `5,"ratelimit_remaining_requests":-1`), true},
	{"null rate limit and remaining are absent", realisticWith("ratelimit_limit_requests", `null,"ratelimit_remaining_requests":null`), true},
	{"null rate limit with a remaining", realisticWith("ratelimit_limit_requests", `null,"ratelimit_remaining_requests":3`), false},
	{"reset alone", realisticWith("ratelimit_reset_output_tokens", `"2026-11-29T10:01:00Z"`), true},
	{"reset with offset", realisticWith("ratelimit_reset_tokens", `"2026-11-29T15:31:00+05:30"`), true},
	{"reset too far ahead reaches validation", realisticWith("ratelimit_reset_tokens", `"2027-11-29T10:01:00Z"`), true},
	{"reset as a duration", realisticWith("ratelimit_reset_tokens", `"6m0s"`), false},
	{"reset as a number", realisticWith("ratelimit_reset_requests", `60`), false},
	{"rate limit as a string", realisticWith("ratelimit_limit_requests", `"50","ratelimit_remaining_requests":1`), false},
	{"org escaped", realisticWith("org", `"acme\u002dprod"`), false},
	{"org too long reaches validation", realisticWith("org", `"`+strings.Repeat("o", 129)+`"`), true},
	{"minimal record", valid, true},
	{"white space everywhere", " \t\r\n{ \"attempt_id\" : \"a\" ,\n\"request_id\":\"r\",\"attempt_no\":1 ,\"started_at\":\"2026-11-29T10:00:00Z\",\"latency_ms\":0,\"provider\":\"p\",\"model\":\"m\",\"service\":\"s\",\"status\":\"ok\" } ", true},
	{"trailing data after the object is ignored", valid + "garbage", true},
	{"validation error kept", realisticWith("status", `"maybe"`), true},
	{"cancelled normalised", realisticWith("status", `"cancelled"`), true},
	{"null optional field is absent", realisticWith("tenant", "null"), true},
	{"null cost is absent", realisticWith("cost_usd", "null"), true},
	{"null metadata is absent", realisticWith("metadata", "null"), true},
	{"null bool is absent", realisticWith("fallback", "null"), true},
	{"null required field", realisticWith("model", "null"), false},
	{"missing required field", realisticWith("service", ""), false},
	{"empty metadata is an empty map", realisticWith("metadata", "{}"), true},
	{"metadata key repeated: last wins", realisticWith("metadata", `{"a":"1","a":"2"}`), true},
	{"metadata null value", realisticWith("metadata", `{"a":null}`), false},
	{"metadata number value", realisticWith("metadata", `{"a":1}`), false},
	{"metadata too many keys", realisticWith("metadata", `{"1":"","2":"","3":"","4":"","5":"","6":"","7":"","8":"","9":"","10":"","11":"","12":"","13":"","14":"","15":"","16":"","17":""}`), false},
	{"metadata of 16 keys", realisticWith("metadata", `{"1":"","2":"","3":"","4":"","5":"","6":"","7":"","8":"","9":"","10":"","11":"","12":"","13":"","14":"","15":"","16":""}`), true},
	{"metadata array", realisticWith("metadata", `[]`), false},
	{"negative zero", realisticWith("latency_ms", "-0"), true},
	{"negative tokens reach validation", realisticWith("input_tokens", "-5"), true},
	{"18 digits", realisticWith("input_tokens", "999999999999999999"), true},
	{"19 digits", realisticWith("input_tokens", "1000000000000000000"), false},
	{"huge number", realisticWith("input_tokens", "99999999999999999999999"), false},
	{"leading zero", realisticWith("input_tokens", "01"), false},
	{"fraction", realisticWith("input_tokens", "1.0"), false},
	{"exponent", realisticWith("input_tokens", "1e3"), false},
	{"number as string", realisticWith("input_tokens", `"1"`), false},
	{"attempt_no out of range", realisticWith("attempt_no", "0"), false},
	{"http_status out of range", realisticWith("http_status", "99"), false},
	{"http_status zero", realisticWith("http_status", "0"), false},
	{"cost as number", realisticWith("cost_usd", "0.0037812"), true},
	{"cost with exponent", realisticWith("cost_usd", "3.7812E-3"), true},
	{"cost negative zero", realisticWith("cost_usd", "-0"), true},
	{"cost string with spaces", realisticWith("cost_usd", `" 1.5 "`), true},
	{"cost negative", realisticWith("cost_usd", `"-1"`), false},
	{"cost words", realisticWith("cost_usd", `"cheap"`), false},
	{"cost escaped", realisticWith("cost_usd", `"1\u002e5"`), false},
	{"cost object", realisticWith("cost_usd", `{}`), false},
	{"cost bad number", realisticWith("cost_usd", `1.`), false},
	{"cost with leading zeros", realisticWith("cost_usd", `"007.5"`), true},
	{"cost of one nano", realisticWith("cost_usd", `"0.000000001"`), true},
	{"cost largest plain form", realisticWith("cost_usd", `"999999999.999999999"`), true},
	{"cost rounded", realisticWith("cost_usd", `"1.0000000005"`), true},
	{"cost of ten whole digits", realisticWith("cost_usd", `"1000000000"`), true},
	{"cost out of range", realisticWith("cost_usd", `"99999999999"`), false},
	{"cost point without fraction", realisticWith("cost_usd", `"1."`), true},
	{"cost number with leading zero", realisticWith("cost_usd", `01`), false},
	{"time with offset", realisticWith("started_at", `"2026-11-29T10:00:00+05:30"`), true},
	{"time with zero offset", realisticWith("started_at", `"2026-11-29T10:00:00+00:00"`), true},
	{"time lower case", realisticWith("started_at", `"2026-11-29t10:00:00z"`), false},
	{"time leap second", realisticWith("started_at", `"2026-06-30T23:59:60Z"`), false},
	{"time comma fraction", realisticWith("started_at", `"2026-11-29T10:00:00,5Z"`), true},
	{"time escaped", realisticWith("started_at", `"2026-11-29T10:00:00\u005a"`), false},
	{"time number", realisticWith("started_at", `1`), false},
	{"escaped string", realisticWith("model", `"claude\u002dhaiku"`), false},
	{"escaped key", strings.Replace(realistic, `"model"`, `"mod\u0065l"`, 1), false},
	{"case variant key", strings.Replace(realistic, `"model"`, `"Model"`, 1), false},
	{"duplicate key", realisticWith("tenant", `"a","tenant":"b"`), false},
	{"duplicate key via case", realisticWith("tenant", `"a","TENANT":"b"`), false},
	{"unknown field", realisticWith("colour", `"red"`), false},
	{"content field", realisticWith("prompt", `"hi"`), false},
	{"valid UTF-8", realisticWith("tenant", `"Zürich ☃"`), true},
	{"invalid UTF-8 replaced", realisticWith("tenant", "\"a\xffb\""), false},
	{"surrogate in UTF-8", realisticWith("tenant", "\"\xed\xa0\x80\""), false},
	{"control character", realisticWith("tenant", "\"a\x01b\""), false},
	{"DEL reaches validation", realisticWith("tenant", "\"a\x7fb\""), true},
	{"bool as string", realisticWith("fallback", `"true"`), false},
	{"bool misspelt", realisticWith("fallback", `tru`), false},
	{"true with fallback_from", realisticWith("fallback", `true,"fallback_from":"claude-sonnet-5-5"`), true},
	{"batch", realisticWith("batch", `true`), true},
	{"missing comma", strings.Replace(realistic, `,"model"`, ` "model"`, 1), false},
	{"trailing comma", realistic[:len(realistic)-1] + ",}", false},
	{"cut off", realistic[:len(realistic)/2], false},
	{"empty object", `{}`, false},
	{"array", `[` + realistic + `]`, false},
	{"null", `null`, false},
	{"empty", ``, false},
}

// TestDecodeRecordMatchesJSON guards the fast decoder: for every case it takes or leaves the record
// as the table says, and DecodeRecord gives exactly encoding/json's Attempt or error.
func TestDecodeRecordMatchesJSON(t *testing.T) {
	t.Parallel()
	for _, c := range differential {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if _, _, st := decodeFast([]byte(c.in)); (st == scanOK) != c.fast {
				t.Errorf("fast decoder status %d, want fast=%v", st, c.fast)
			}
			sameRecord(t, []byte(c.in))
		})
	}
}

// TestDecodeBodyMatchesJSON guards the body splitter on bodies of every shape, read whole, a byte at
// a time and cut off by a read error: DecodeBody must give encoding/json's batch or error.
func TestDecodeBodyMatchesJSON(t *testing.T) {
	t.Parallel()
	bad := realisticWith("prompt", `"x"`)
	bodies := []struct {
		name, body string
	}{
		{"object", realistic},
		{"object and white space", "\n " + realistic + " \r\n\t"},
		{"array", "[" + realistic + "," + bad + "," + valid + "]"},
		{"array with white space", " [ \n" + realistic + " ,\n " + valid + "\n] \n"},
		{"array with a broken element", "[" + realistic + `,{"attempt_id":]`},
		{"array with unbalanced brackets", "[" + realistic + `,{"a":[1}]}]`},
		{"array of non-objects", `[1, "x", null]`},
		{"array mixing objects and others", "[" + realistic + ",1]"},
		{"array with a trailing comma", "[" + realistic + ",]"},
		{"array not closed", "[" + realistic},
		{"array of odd valid records", "[" + realisticWith("Model", `"x"`) + "," + realisticWith("tenant", `"\u00e9"`) + "]"},
		{"empty array", "[ ]"},
		{"object then data", realistic + realistic},
		{"object then garbage", realistic + " x"},
		{"array then data", "[" + realistic + "] {"},
		{"empty", ""},
		{"white space", " \n"},
		{"string", `"hello"`},
		{"deep nesting", "[" + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + "]"},
		{"element nested 10,000 deep", "[" + strings.Repeat(`{"a":`, 10000) + `""` + strings.Repeat("}", 10000) + "]"},
		{"element nested 9,999 deep", "[" + strings.Repeat(`{"a":`, 9999) + `""` + strings.Repeat("}", 9999) + "]"},
		{"object nested 10,000 deep", strings.Repeat(`{"a":`, 10000) + `""` + strings.Repeat("}", 10000)},
	}
	for _, c := range bodies {
		for _, rd := range readerKinds {
			t.Run(c.name+"/"+rd.name, func(t *testing.T) {
				t.Parallel()
				sameBody(t, []byte(c.body), false, rd.chunk, rd.cut)
				sameBody(t, []byte(c.body), true, rd.chunk, rd.cut)
			})
		}
	}
}

// TestDecodeBodyOwnsItsRecords guards the recycling of body buffers: records decoded from one body
// must not change when the next body is read into the same buffer.
func TestDecodeBodyOwnsItsRecords(t *testing.T) {
	first, err := DecodeBody(strings.NewReader("["+realistic+"]"), false, now)
	if err != nil {
		t.Fatal(err)
	}
	want, err := decodeBodyJSON(strings.NewReader("["+realistic+"]"), false, now, decodeRecordJSON)
	if err != nil {
		t.Fatal(err)
	}
	other := strings.NewReplacer("anthropic", "xxxxxxxxx", "router", "xxxxxx", "eu-west-1", "xxxxxxxxx").Replace(realistic)
	if _, err := DecodeBody(strings.NewReader("["+other+"]"), false, now); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, want) {
		t.Fatalf("first batch changed to\n%+v", first)
	}
}

// TestReleasedRecords guards the recycling of record arrays: a body decoded after another batch's
// Release must come out as the encoding/json decoder reads it, whatever the released array held;
// and where the second body's records fit in it, the released array must be the one they go into
// (sync.Pool may drop an array, so that is tried up to 100 times).
func TestReleasedRecords(t *testing.T) {
	other := strings.NewReplacer("anthropic", "openai", "router", "search").Replace(realistic)
	for _, c := range []struct {
		name, before, after string
		reused              bool // the after body's records fit in the released array
	}{
		{"fewer records after more", "[" + realistic + "," + realistic + "," + other + "]", "[" + other + "]", true},
		{"more records after fewer", "[" + other + "]", "[" + realistic + "," + other + "," + realistic + "]", false},
		{"only refused records after", "[" + realistic + "]", `[{"attempt_id": ""}]`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, err := decodeBodyJSON(strings.NewReader(c.after), false, now, decodeRecordJSON)
			if err != nil {
				t.Fatal(err)
			}
			reused := false
			for try := 0; try < 100 && !reused; try++ {
				before, err := DecodeBody(strings.NewReader(c.before), false, now)
				if err != nil {
					t.Fatal(err)
				}
				released := &before.Records[0]
				before.Release()
				if before.Records != nil {
					t.Fatalf("released batch still holds %d records", len(before.Records))
				}
				got, err := DecodeBody(strings.NewReader(c.after), false, now)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("after a release, DecodeBody gave\n%+v\nencoding/json\n%+v", got, want)
				}
				reused = !c.reused || &got.Records[0] == released
			}
			if !reused {
				t.Fatal("the released array never held the next body's records in 100 tries")
			}
		})
	}
}

// readerKinds are the ways a test reads a body: whole, in small pieces, and failing part-way.
var readerKinds = []struct {
	name       string
	chunk, cut int
}{
	{"whole", 0, 0},
	{"byte by byte", 1, 0},
	{"7-byte reads", 7, 0},
	{"read error at 100", 0, 101},
	{"read error at 1 in 3-byte reads", 3, 2},
}

// errInjected is the read error the tests inject.
var errInjected = errors.New("injected read error")

// testReader serves body in reads of at most chunk bytes (all at once when chunk is 0) and, when cut
// is not 0, fails with errInjected after cut-1 bytes instead of ending.
type testReader struct {
	body  []byte
	chunk int
	cut   int
}

func (r *testReader) Read(p []byte) (int, error) {
	if r.cut > 0 && r.cut-1 < len(r.body) {
		r.body = r.body[:r.cut-1]
		r.cut = -1
	}
	if len(r.body) == 0 {
		if r.cut < 0 {
			return 0, errInjected
		}
		return 0, io.EOF
	}
	if r.chunk > 0 && len(p) > r.chunk {
		p = p[:r.chunk]
	}
	n := copy(p, r.body)
	r.body = r.body[n:]
	return n, nil
}

// sameRecord fails t unless DecodeRecord and decodeRecordJSON agree on raw exactly.
func sameRecord(t *testing.T, raw []byte) {
	t.Helper()
	a, ferr := DecodeRecord(raw, now)
	wa, wferr := decodeRecordJSON(raw, now)
	if !reflect.DeepEqual(ferr, wferr) {
		t.Fatalf("DecodeRecord error %v, encoding/json %v\n%q", ferr, wferr, raw)
	}
	if !reflect.DeepEqual(a, wa) {
		t.Fatalf("DecodeRecord\n%+v\nencoding/json\n%+v\n%q", a, wa, raw)
	}
}

// sameBody fails t unless DecodeBody and decodeBodyJSON agree on body exactly, read the same way.
func sameBody(t *testing.T, body []byte, ndjson bool, chunk, cut int) {
	t.Helper()
	b, err := DecodeBody(&testReader{body: body, chunk: chunk, cut: cut}, ndjson, now)
	wb, werr := decodeBodyJSON(&testReader{body: body, chunk: chunk, cut: cut}, ndjson, now, decodeRecordJSON)
	if (err == nil) != (werr == nil) || err != nil && (err.Error() != werr.Error() ||
		errors.Is(err, ErrBody) != errors.Is(werr, ErrBody) || errors.Is(err, errInjected) != errors.Is(werr, errInjected)) {
		t.Fatalf("DecodeBody error %v, encoding/json %v\nndjson %v chunk %d cut %d\n%q", err, werr, ndjson, chunk, cut, body)
	}
	if !reflect.DeepEqual(b, wb) {
		t.Fatalf("DecodeBody\n%+v\nencoding/json\n%+v\nndjson %v chunk %d cut %d\n%q", b, wb, ndjson, chunk, cut, body)
	}
}

// FuzzDecodeFast is the differential fuzz test of the fast decoders: whatever the body and however
// it is read, DecodeBody and DecodeRecord must give exactly what the encoding/json decoders give. It
// is seeded with FuzzDecodeBody's corpus and the differential table.
func FuzzDecodeFast(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzDecodeBody", "*"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		body, ndjson, err := readCorpusEntry(name)
		if err != nil {
			f.Fatalf("%s: %v", name, err)
		}
		f.Add(body, ndjson, uint8(0), uint16(0))
	}
	for i, c := range differential {
		f.Add([]byte(c.in), false, uint8(i%8), uint16(0))
		f.Add([]byte("["+c.in+","+realistic+"]"), false, uint8(0), uint16(0))
		f.Add([]byte(c.in+"\n"+realistic), true, uint8(0), uint16(0))
	}
	f.Add([]byte("["+realistic+","+realistic+"]"), false, uint8(3), uint16(200))
	f.Fuzz(func(t *testing.T, body []byte, ndjson bool, chunk uint8, cut uint16) {
		sameBody(t, body, ndjson, int(chunk), int(cut))
		sameRecord(t, body)
	})
}

// readCorpusEntry reads a FuzzDecodeBody corpus file: a []byte and a bool, in Go syntax.
func readCorpusEntry(name string) ([]byte, bool, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, false, err
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "[]byte(") || !strings.HasPrefix(lines[2], "bool(") {
		return nil, false, fmt.Errorf("not a ([]byte, bool) corpus entry")
	}
	body, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	if err != nil {
		return nil, false, fmt.Errorf("body: %w", err)
	}
	ndjson, err := strconv.ParseBool(strings.TrimSuffix(strings.TrimPrefix(lines[2], "bool("), ")"))
	if err != nil {
		return nil, false, fmt.Errorf("ndjson: %w", err)
	}
	return []byte(body), ndjson, nil
}

// TestFieldIDsCoverFields guards the fast decoder's field table against the contract: every accepted
// field has its own number, and no other name has one.
func TestFieldIDsCoverFields(t *testing.T) {
	t.Parallel()
	seen := map[int]string{}
	for _, name := range Fields() {
		id := fieldID([]byte(name))
		if id < 0 || id >= nFields {
			t.Fatalf("%s has no field number", name)
		}
		if other, ok := seen[id]; ok {
			t.Fatalf("%s and %s share field number %d", name, other, id)
		}
		seen[id] = name
	}
	if len(seen) != nFields {
		t.Fatalf("%d fields numbered, %d accepted", nFields, len(seen))
	}
	if nFields > 64 {
		t.Fatalf("%d fields do not fit the uint64 masks", nFields)
	}
}

// BenchmarkDecodeBody compares the encoding/json decoder (old) with DecodeBody (new) on realistic
// bodies: one record, an array of 1,000 (also with an org and every rate limit) and NDJSON of
// 1,000.
func BenchmarkDecodeBody(b *testing.B) {
	records := make([]string, 1000)
	for i := range records {
		records[i] = strings.Replace(realistic, `Y8W0"`, fmt.Sprintf(`%04d"`, i), 1)
	}
	limitedRecords := make([]string, 1000)
	for i := range limitedRecords {
		limitedRecords[i] = strings.Replace(limited, `Y8W0"`, fmt.Sprintf(`%04d"`, i), 1)
	}
	shapes := []struct {
		name    string
		body    []byte
		ndjson  bool
		records int
	}{
		{"object", []byte(realistic), false, 1},
		{"array-1000", []byte("[" + strings.Join(records, ",") + "]"), false, len(records)},
		{"array-1000-ratelimits", []byte("[" + strings.Join(limitedRecords, ",") + "]"), false, len(limitedRecords)},
		{"ndjson-1000", []byte(strings.Join(records, "\n") + "\n"), true, len(records)},
	}
	decoders := []struct {
		name   string
		decode func(io.Reader, bool) (Batch, error)
	}{
		{"old", func(r io.Reader, ndjson bool) (Batch, error) {
			return decodeBodyJSON(r, ndjson, now, decodeRecordJSON)
		}},
		{"new", func(r io.Reader, ndjson bool) (Batch, error) { return DecodeBody(r, ndjson, now) }},
	}
	for _, s := range shapes {
		for _, d := range decoders {
			b.Run(s.name+"/"+d.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(s.body)))
				for b.Loop() {
					batch, err := d.decode(bytes.NewReader(s.body), s.ndjson)
					if err != nil || len(batch.Records) != s.records {
						b.Fatalf("%d records, %v", len(batch.Records), err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*s.records), "ns/record")
			})
		}
	}
}
