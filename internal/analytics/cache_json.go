package analytics

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/ledgerd/ledgerd/money"
)

// The cache report's answer written by hand. At 10,000 tenants it holds some 9,500 rows (6.6 MB),
// and encoding/json, which finds each field by reflection and formats each amount and time through
// its marshaler, took a sixth of the report's CPU; by hand it takes a third of the time
// (BenchmarkCacheAnswerJSON, docs/performance.md). appendJSON writes exactly what encoding/json
// writes from the field tags, HTML-safe as echo's encoder is; TestCacheAnswerJSON holds the two
// equal for every field.

// encode is a as encoding/json's Encoder writes it, in one buffer sized for its rows (some 700
// bytes a row with its explanation).
func (a *CacheAnswer) encode() []byte {
	return a.appendJSON(make([]byte, 0, 1024+768*len(a.Rows)))
}

// appendJSON appends a as encoding/json's Encoder writes it, newline included.
func (a *CacheAnswer) appendJSON(b []byte) []byte {
	b = append(b, `{"from":`...)
	b = appendTime(b, a.From)
	b = append(b, `,"to":`...)
	b = appendTime(b, a.To)
	b = append(b, `,"min_calls":`...)
	b = strconv.AppendInt(b, int64(a.MinCalls), 10)
	b = append(b, `,"broken_caches":`...)
	b = strconv.AppendInt(b, int64(a.BrokenCaches), 10)
	b = append(b, `,"rows":`...)
	if a.Rows == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range a.Rows {
			if i > 0 {
				b = append(b, ',')
			}
			b = a.Rows[i].appendJSON(b)
		}
		b = append(b, ']')
	}
	return append(b, "}\n"...)
}

// appendJSON appends r as encoding/json writes it.
func (r *CacheRow) appendJSON(b []byte) []byte {
	for _, f := range [...]struct{ name, v string }{
		{`{"service":`, r.Service}, {`,"operation":`, r.Operation}, {`,"provider":`, r.Provider}, {`,"model":`, r.Model},
	} {
		b = append(b, f.name...)
		b = appendString(b, f.v)
	}
	b = append(b, `,"fallback":`...)
	b = strconv.AppendBool(b, r.Fallback)
	b = append(b, `,"prompt_hash":`...)
	b = appendOrNull(b, r.PromptHash, appendString)
	for _, f := range [...]struct {
		name string
		v    int64
	}{
		{`,"prompt_hashes":`, r.PromptHashes}, {`,"single_use_hashes":`, r.SingleUseHashes}, {`,"calls":`, r.Calls},
		{`,"cache_write_calls":`, r.CacheWriteCalls}, {`,"cache_read_calls":`, r.CacheReadCalls},
		{`,"input_tokens":`, r.InputTokens}, {`,"cache_write_tokens":`, r.CacheWriteTokens},
		{`,"cache_read_tokens":`, r.CacheReadTokens},
	} {
		b = append(b, f.name...)
		b = strconv.AppendInt(b, f.v, 10)
	}
	b = append(b, `,"hit_ratio":`...)
	b = appendOrNull(b, r.HitRatio, appendFloat)
	b = append(b, `,"cost_usd":`...)
	b = appendOrNull(b, r.CostUSD, appendNanos)
	b = append(b, `,"nocache_cost_usd":`...)
	b = appendOrNull(b, r.NoCacheCostUSD, appendNanos)
	b = append(b, `,"savings_usd":`...)
	b = appendOrNull(b, r.SavingsUSD, appendNanos)
	b = append(b, `,"unpriced_calls":`...)
	b = strconv.AppendInt(b, r.UnpricedCalls, 10)
	b = append(b, `,"broken":`...)
	b = strconv.AppendBool(b, r.Broken)
	b = append(b, `,"broken_since":`...)
	b = appendOrNull(b, r.BrokenSince, appendTime)
	b = append(b, `,"extra_cost_usd":`...)
	b = appendOrNull(b, r.ExtraCostUSD, appendNanos)
	if r.Explanation != "" {
		b = append(b, `,"explanation":`...)
		b = appendString(b, r.Explanation)
	}
	return append(b, '}')
}

// appendOrNull appends null for a nil v, else *v as put writes it.
func appendOrNull[T any](b []byte, v *T, put func([]byte, T) []byte) []byte {
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
