package analytics

import "strconv"

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
	b = appendList(b, a.Rows, (*CacheRow).appendJSON)
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
	b = appendOrNull(b, `,"prompt_hash":`, r.PromptHash, appendString)
	b = appendInts(b, intField{`,"prompt_hashes":`, r.PromptHashes}, intField{`,"single_use_hashes":`, r.SingleUseHashes},
		intField{`,"calls":`, r.Calls}, intField{`,"cache_write_calls":`, r.CacheWriteCalls},
		intField{`,"cache_read_calls":`, r.CacheReadCalls}, intField{`,"input_tokens":`, r.InputTokens},
		intField{`,"cache_write_tokens":`, r.CacheWriteTokens}, intField{`,"cache_read_tokens":`, r.CacheReadTokens})
	b = appendOrNull(b, `,"hit_ratio":`, r.HitRatio, appendFloat)
	b = appendOrNull(b, `,"cost_usd":`, r.CostUSD, appendNanos)
	b = appendOrNull(b, `,"nocache_cost_usd":`, r.NoCacheCostUSD, appendNanos)
	b = appendOrNull(b, `,"savings_usd":`, r.SavingsUSD, appendNanos)
	b = appendInts(b, intField{`,"unpriced_calls":`, r.UnpricedCalls})
	b = append(b, `,"broken":`...)
	b = strconv.AppendBool(b, r.Broken)
	b = appendOrNull(b, `,"broken_since":`, r.BrokenSince, appendTime)
	b = appendOrNull(b, `,"extra_cost_usd":`, r.ExtraCostUSD, appendNanos)
	if r.Explanation != "" {
		b = append(b, `,"explanation":`...)
		b = appendString(b, r.Explanation)
	}
	return append(b, '}')
}
