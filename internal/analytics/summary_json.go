package analytics

import (
	"slices"
	"strconv"
)

// The summary's answer written by hand, as the cache report's is (cache_json.go): a month by
// tenant holds 10,000 groups (8.1 MB), which encoding/json took 37–44 ms of the answer's CPU to
// write (docs/performance.md). appendJSON writes exactly what encoding/json writes from the field
// tags; TestSummaryJSON holds the two equal for every field.

// encode is s as encoding/json's Encoder writes it, in one buffer sized for its groups (some 800
// bytes a group).
func (s *Summary) encode() []byte {
	return s.appendJSON(make([]byte, 0, 2048+1024*len(s.Groups)))
}

// appendJSON appends s as encoding/json's Encoder writes it, newline included.
func (s *Summary) appendJSON(b []byte) []byte {
	b = append(b, `{"from":`...)
	b = appendTime(b, s.From)
	b = append(b, `,"to":`...)
	b = appendTime(b, s.To)
	b = append(b, `,"timezone":`...)
	b = appendString(b, s.Timezone)
	b = append(b, `,"group_by":`...)
	if s.GroupBy == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, d := range s.GroupBy {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, d)
		}
		b = append(b, ']')
	}
	b = append(b, `,"total":{`...)
	b = append(s.Total.appendFields(b), '}')
	b = append(b, `,"groups":`...)
	if s.Groups == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range s.Groups {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"key":`...)
			b = s.Groups[i].Key.appendJSON(b)
			b = append(b, ',')
			b = append(s.Groups[i].appendFields(b), '}')
		}
		b = append(b, ']')
	}
	if s.GroupsTotal != nil {
		b = append(b, `,"groups_total":`...)
		b = strconv.AppendInt(b, int64(*s.GroupsTotal), 10)
	}
	return append(b, "}\n"...)
}

// appendJSON appends k as encoding/json writes it: only the dimensions it has.
func (k *Key) appendJSON(b []byte) []byte {
	b = append(b, '{')
	first := len(b)
	if k.Day != "" {
		b = appendString(appendName(b, first, `"day":`), k.Day)
	}
	if k.Hour != nil {
		b = appendTime(appendName(b, first, `"hour":`), *k.Hour)
	}
	if k.Minute != nil {
		b = appendTime(appendName(b, first, `"minute":`), *k.Minute)
	}
	for _, f := range [...]struct {
		name string
		v    *string
	}{
		{`"service":`, k.Service}, {`"operation":`, k.Operation}, {`"tenant":`, k.Tenant}, {`"provider":`, k.Provider},
		{`"model":`, k.Model},
	} {
		if f.v != nil {
			b = appendString(appendName(b, first, f.name), *f.v)
		}
	}
	if k.Fallback != nil {
		b = strconv.AppendBool(appendName(b, first, `"fallback":`), *k.Fallback)
	}
	if k.FallbackFrom != nil {
		b = appendString(appendName(b, first, `"fallback_from":`), *k.FallbackFrom)
	}
	return append(b, '}')
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

// appendCounts appends the counts of m as a JSON object with its keys in order, as encoding/json
// writes a map. An attempt has one of a few error classes, so the keys are sorted in place on the
// stack.
func appendCounts(b []byte, m map[string]int64) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	var small [16]string
	keys := small[:0]
	for c := range m {
		keys = append(keys, c)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, c := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendString(b, c), ':')
		b = strconv.AppendInt(b, m[c], 10)
	}
	return append(b, '}')
}

// appendFields appends the fields of st as encoding/json writes them, without the braces: a
// Group's follow its key.
func (st *Stats) appendFields(b []byte) []byte {
	b = appendInts(b, intField{`"attempts":`, st.Attempts}, intField{`,"requests":`, st.Requests})
	b = append(b, `,"attempts_per_call":`...)
	b = appendOrNull(b, st.AttemptsPerCall, appendFloat)
	b = appendInts(b, intField{`,"succeeded":`, st.Succeeded})
	b = append(b, `,"cost_usd":`...)
	b = appendOrNull(b, st.CostUSD, appendNanos)
	b = appendInts(b,
		intField{`,"unpriced_attempts":`, st.UnpricedAttempts}, intField{`,"usage_unknown_attempts":`, st.UsageUnknownAttempts},
		intField{`,"input_tokens":`, st.InputTokens}, intField{`,"output_tokens":`, st.OutputTokens},
		intField{`,"cache_write_tokens":`, st.CacheWriteTokens}, intField{`,"cache_write_1h_tokens":`, st.CacheWrite1hTokens},
		intField{`,"cache_read_tokens":`, st.CacheReadTokens}, intField{`,"reasoning_tokens":`, st.ReasoningTokens})
	b = append(b, `,"cache_hit_ratio":`...)
	b = appendOrNull(b, st.CacheHitRatio, appendFloat)
	b = append(b, `,"cache_savings_usd":`...)
	b = appendOrNull(b, st.CacheSavingsUSD, appendNanos)
	b = append(b, `,"error_rate":`...)
	b = appendOrNull(b, st.ErrorRate, appendFloat)
	b = append(b, `,"errors":`...)
	b = appendCounts(b, st.Errors)
	b = appendInts(b, intField{`,"cancelled":`, st.Cancelled})
	b = append(b, `,"rate_limited_share":`...)
	b = appendOrNull(b, st.RateLimitedShare, appendFloat)
	b = append(b, `,"fallback_share":`...)
	b = appendOrNull(b, st.FallbackShare, appendFloat)
	b = append(b, `,"wasted_usd":`...)
	b = appendOrNull(b, st.WastedUSD, appendNanos)
	b = append(b, `,"latency_ms":`...)
	if l := st.LatencyMS; l == nil {
		b = append(b, "null"...)
	} else {
		for _, f := range [...]struct {
			name string
			v    float64
		}{{`{"p50":`, l.P50}, {`,"p95":`, l.P95}, {`,"p99":`, l.P99}, {`,"mean":`, l.Mean}} {
			b = append(b, f.name...)
			b = appendFloat(b, f.v)
		}
		b = append(b, '}')
	}
	b = appendInts(b, intField{`,"client_cost_mismatches":`, st.ClientCostMismatches})
	if len(st.CallsByAttempts) > 0 {
		b = append(b, `,"calls_by_attempts":[`...)
		for i, c := range st.CallsByAttempts {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"attempts":`...)
			b = strconv.AppendInt(b, int64(c.Attempts), 10)
			b = append(b, `,"calls":`...)
			b = strconv.AppendInt(b, c.Calls, 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if st.MaxAttempts != 0 {
		b = appendInts(b, intField{`,"max_attempts":`, int64(st.MaxAttempts)})
	}
	return b
}
