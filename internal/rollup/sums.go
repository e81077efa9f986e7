package rollup

// Sum is one summed rollup column: Expr is the aggregate over attempts rows that feeds it (what a
// rebuild, a reprice and the writer's exact path count in SQL), Add the same count for one
// attempt (what the writer's fast path sums in Go). A twin test checks both paths write identical
// rollups.
type Sum struct {
	Col  string
	Expr string
	Add  func(a *Attempt) int64
}

// Attempt is what the sums read of one attempt, as the writer holds it before it is stored. Cost,
// NoCache and ClientCost are nil when absent (unpriced; no client cost).
type Attempt struct {
	AttemptNo, LatencyMS                                          int32
	Input, Output, CacheWrite, CacheWrite1h, CacheRead, Reasoning int64
	Cost, NoCache, ClientCost                                     *int64
	// UsageUnknown is the record's usage_unknown: its answer carried no usage.
	UsageUnknown bool
	// HTTPStatus (0 when none), ErrorClass ("none" when ok) and Status are what LoadSums read.
	HTTPStatus int16
	ErrorClass string
	Status     string
}

// MismatchWhere is the condition under which an attempt's client cost disagrees with ledgerd's:
// by more than 1% of ledgerd's cost.
const MismatchWhere = `client_cost_nanos IS NOT NULL AND cost_nanos IS NOT NULL AND abs(client_cost_nanos - cost_nanos) * 100 > cost_nanos`

// Sums lists each summed column of the main rollups (rollup_hourly, rollup_daily and the narrow
// daily rollups) and of pending_rollup_hourly, in column order.
var Sums = []Sum{
	{"attempts", "count(*)", one},
	{"requests", "count(*) FILTER (WHERE attempt_no = 1)", func(a *Attempt) int64 { return flag(a.AttemptNo == 1) }},
	{"input_tokens", "sum(input_tokens)", func(a *Attempt) int64 { return a.Input }},
	{"output_tokens", "sum(output_tokens)", func(a *Attempt) int64 { return a.Output }},
	{"cache_write_tokens", "sum(cache_write_tokens)", cacheWriteTokens},
	{"cache_write_1h_tokens", "sum(cache_write_1h_tokens)", func(a *Attempt) int64 { return a.CacheWrite1h }},
	{"cache_read_tokens", "sum(cache_read_tokens)", cacheReadTokens},
	{"reasoning_tokens", "sum(reasoning_tokens)", func(a *Attempt) int64 { return a.Reasoning }},
	{"cache_write_calls", "count(*) FILTER (WHERE cache_write_tokens > 0)", cacheWriteCalls},
	{"cache_read_calls", "count(*) FILTER (WHERE cache_read_tokens > 0)", cacheReadCalls},
	{"cost_nanos", "coalesce(sum(cost_nanos), 0)", cost},
	{"nocache_cost_nanos", "coalesce(sum(nocache_cost_nanos), 0)", noCacheCost},
	{"unpriced_attempts", "count(*) FILTER (WHERE cost_nanos IS NULL)", unpriced},
	{"client_cost_nanos", "coalesce(sum(client_cost_nanos), 0)", func(a *Attempt) int64 { return orZero(a.ClientCost) }},
	{"cost_mismatch_attempts", "count(*) FILTER (WHERE " + MismatchWhere + ")", func(a *Attempt) int64 {
		return flag(a.ClientCost != nil && a.Cost != nil && abs(*a.ClientCost-*a.Cost)*100 > *a.Cost)
	}},
	{"latency_sum_ms", "sum(latency_ms)", func(a *Attempt) int64 { return int64(a.LatencyMS) }},
	// usage_unknown_attempts (migration 00020) counts the attempts whose answer carried no usage.
	// They are unpriced too (cost_nanos NULL), so unpriced_attempts includes them.
	{"usage_unknown_attempts", "count(*) FILTER (WHERE usage_unknown)", func(a *Attempt) int64 { return flag(a.UsageUnknown) }},
}

// CacheSums does the same for rollup_cache_hourly and pending_cache. It begins with calls (the
// cache fold relies on it).
var CacheSums = []Sum{
	{"calls", "count(*)", one},
	{"cache_write_calls", "count(*) FILTER (WHERE cache_write_tokens > 0)", cacheWriteCalls},
	{"cache_read_calls", "count(*) FILTER (WHERE cache_read_tokens > 0)", cacheReadCalls},
	{"input_tokens", "sum(input_tokens)", func(a *Attempt) int64 { return a.Input }},
	{"cache_write_tokens", "sum(cache_write_tokens)", cacheWriteTokens},
	{"cache_read_tokens", "sum(cache_read_tokens)", cacheReadTokens},
	{"cost_nanos", "coalesce(sum(cost_nanos), 0)", cost},
	{"nocache_cost_nanos", "coalesce(sum(nocache_cost_nanos), 0)", noCacheCost},
	{"unpriced_attempts", "count(*) FILTER (WHERE cost_nanos IS NULL)", unpriced},
}

func one(*Attempt) int64                { return 1 }
func cacheWriteTokens(a *Attempt) int64 { return a.CacheWrite }
func cacheReadTokens(a *Attempt) int64  { return a.CacheRead }
func cacheWriteCalls(a *Attempt) int64  { return flag(a.CacheWrite > 0) }
func cacheReadCalls(a *Attempt) int64   { return flag(a.CacheRead > 0) }
func cost(a *Attempt) int64             { return orZero(a.Cost) }
func noCacheCost(a *Attempt) int64      { return orZero(a.NoCache) }
func unpriced(a *Attempt) int64         { return flag(a.Cost == nil) }

func flag(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func orZero(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// Cols are the columns of sums, in order.
func Cols(sums []Sum) []string {
	out := make([]string, len(sums))
	for i, s := range sums {
		out[i] = s.Col
	}
	return out
}

// Exprs are the SQL aggregates over attempts of sums, in order.
func Exprs(sums []Sum) []string {
	out := make([]string, len(sums))
	for i, s := range sums {
		out[i] = s.Expr
	}
	return out
}

// Index is the position of column col in sums. It panics when there is none: callers resolve
// the columns they read once, at start-up.
func Index(sums []Sum, col string) int {
	for i, s := range sums {
		if s.Col == col {
			return i
		}
	}
	panic("rollup: no summed column " + col)
}

// Find is the sum of column col. It panics when there is none, as Index does.
func Find(sums []Sum, col string) Sum { return sums[Index(sums, col)] }
