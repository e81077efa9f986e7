package analytics

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/ledgerd/ledgerd/money"
)

// The pieces the answers written by hand (cache_json.go, summary_json.go) are made of: each writes
// a value exactly as encoding/json does, HTML-safe as echo's encoder is.

// appendList appends items as a JSON array, each as put writes it; null for a nil slice, as
// encoding/json writes one.
func appendList[T any](b []byte, items []T, put func(*T, []byte) []byte) []byte {
	if items == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = put(&items[i], b)
	}
	return append(b, ']')
}

// appendName appends the name of a field of an object whose fields begin at first: after a
// comma unless it is the first.
func appendName(b []byte, first int, name string) []byte {
	if len(b) > first {
		b = append(b, ',')
	}
	return append(b, name...)
}

// intField is a whole-number field: its name, with the comma before it, and its value.
type intField struct {
	name string
	v    int64
}

// appendInts appends whole-number fields.
func appendInts(b []byte, fields ...intField) []byte {
	for _, f := range fields {
		b = append(b, f.name...)
		b = strconv.AppendInt(b, f.v, 10)
	}
	return b
}

// appendOrNull appends a field's name (with what comes before it), then null for a nil v, else
// *v as put writes it.
func appendOrNull[T any](b []byte, name string, v *T, put func([]byte, T) []byte) []byte {
	b = append(b, name...)
	if v == nil {
		return append(b, "null"...)
	}
	return put(b, *v)
}

// appendNanos appends an amount as a JSON string (money.Nanos.MarshalText).
func appendNanos(b []byte, n money.Nanos) []byte {
	b = append(b, '"')
	b, _ = n.AppendText(b)
	return append(b, '"')
}

// appendTime appends t as time.Time.MarshalJSON does, for the years it accepts (0 to 9999).
func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendFloat appends f as encoding/json does: the shortest decimal, in exponent form below 1e-6
// and from 1e21 on, with a one-digit exponent unpadded.
func appendFloat(b []byte, f float64) []byte {
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1]
		b = b[:n-1]
	}
	return b
}

// appendString appends s as a JSON string. Names and explanations are printable ASCII nearly
// always, copied as they are; any other string goes through encoding/json, whose escaping
// (HTML characters, control characters, U+2028 and U+2029, invalid UTF-8) it keeps.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always marshals
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
