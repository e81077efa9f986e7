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
	b = appendList(b, s.GroupBy, func(d *string, b []byte) []byte { return appendString(b, *d) })
	b = append(b, `,"total":{`...)
	b = append(s.Total.appendFields(b), '}')
	b = append(b, `,"groups":`...)
	b = appendList(b, s.Groups, (*Group).appendJSON)
	if s.GroupsTotal != nil {
		b = append(b, `,"groups_total":`...)
		b = strconv.AppendInt(b, int64(*s.GroupsTotal), 10)
	}
	return append(b, "}\n"...)
}

// appendJSON appends g as encoding/json writes it: its key, then its figures.
func (g *Group) appendJSON(b []byte) []byte {
	b = append(b, `{"key":`...)
	b = append(g.Key.appendJSON(b), ',')
	return append(g.appendFields(b), '}')
}

// appendLatency appends l as encoding/json writes it.
func appendLatency(b []byte, l Latency) []byte {
	for _, f := range [...]struct {
		name string
		v    float64
	}{{`{"p50":`, l.P50}, {`,"p95":`, l.P95}, {`,"p99":`, l.P99}, {`,"mean":`, l.Mean}} {
		b = append(b, f.name...)
		b = appendFloat(b, f.v)
	}
	return append(b, '}')
}

// appendJSON appends c as encoding/json writes it.
func (c *AttemptCount) appendJSON(b []byte) []byte {
	return append(appendInts(b, intField{`{"attempts":`, int64(c.Attempts)}, intField{`,"calls":`, c.Calls}), '}')
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
	b = appendOrNull(b, `,"attempts_per_call":`, st.AttemptsPerCall, appendFloat)
	b = appendInts(b, intField{`,"succeeded":`, st.Succeeded})
	b = appendOrNull(b, `,"cost_usd":`, st.CostUSD, appendNanos)
	b = appendInts(b,
		intField{`,"unpriced_attempts":`, st.UnpricedAttempts}, intField{`,"usage_unknown_attempts":`, st.UsageUnknownAttempts},
		intField{`,"input_tokens":`, st.InputTokens}, intField{`,"output_tokens":`, st.OutputTokens},
		intField{`,"cache_write_tokens":`, st.CacheWriteTokens}, intField{`,"cache_write_1h_tokens":`, st.CacheWrite1hTokens},
		intField{`,"cache_read_tokens":`, st.CacheReadTokens}, intField{`,"reasoning_tokens":`, st.ReasoningTokens})
	b = appendOrNull(b, `,"cache_hit_ratio":`, st.CacheHitRatio, appendFloat)
	b = appendOrNull(b, `,"cache_savings_usd":`, st.CacheSavingsUSD, appendNanos)
	b = appendOrNull(b, `,"error_rate":`, st.ErrorRate, appendFloat)
	b = append(b, `,"errors":`...)
	b = appendCounts(b, st.Errors)
	b = appendInts(b, intField{`,"cancelled":`, st.Cancelled})
	b = appendOrNull(b, `,"rate_limited_share":`, st.RateLimitedShare, appendFloat)
	b = appendOrNull(b, `,"fallback_share":`, st.FallbackShare, appendFloat)
	b = appendOrNull(b, `,"wasted_usd":`, st.WastedUSD, appendNanos)
	b = appendOrNull(b, `,"latency_ms":`, st.LatencyMS, appendLatency)
	b = appendInts(b, intField{`,"client_cost_mismatches":`, st.ClientCostMismatches})
	if len(st.CallsByAttempts) > 0 {
		b = append(b, `,"calls_by_attempts":`...)
		b = appendList(b, st.CallsByAttempts, (*AttemptCount).appendJSON)
	}
	if st.MaxAttempts != 0 {
		b = appendInts(b, intField{`,"max_attempts":`, int64(st.MaxAttempts)})
	}
	return b
}
