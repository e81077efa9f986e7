// The load rollup: how many requests and tokens each organization, provider, model and service
// sent per minute, how many were refused with a 429, and the lowest rate-limit headroom the
// provider reported; and, from it, each day's peak minute per grouping. The peak-load questions
// read it (GET /v1/peaks, the Load page, the headroom alert); the writer, the fold and a rebuild
// build their statements from the definitions here.
//
// # Tables (migration 00031)
//
// rollup_load_minute is keyed by project, UTC minute (bucket), org (empty for none), provider,
// model, service, fallback flag and the model a fallback stood in for (migration 00036): requests
// (attempts: every HTTP attempt counts against a provider's request limit, retries and 429s
// included), rate_limited (attempts answered 429 or classed rate_limited), input_tokens (all
// input: uncached, cache writes and cache reads), output_tokens, the calls, failed attempts,
// answers, wasted cost (of the priced attempts that gave no answer) and unpriced attempts the
// incidents read minute by minute, and for each limit (LoadLimits) the lowest headroom reported
// in the minute as the pair X_remaining, X_limit (NULL when no attempt reported it). The lowest headroom is the smallest
// remaining ÷ limit; of equal shares, the larger limit's (SQL headroom_below).
//
// rollup_load_peaks holds, per project, local day and group of every grouping of org, provider,
// model and service (keep: a bit each, org 8, provider 4, model 2, service 1; the columns a group
// does not keep are empty), the day's busiest minute by requests (with its rate_limited count), by
// input, output and total tokens (the earliest such minute where several tie), and the lowest
// headroom of the day. The peak of a sum is not the sum of peaks: each grouping's peak is found
// from the minute sums of that grouping.
//
// rollup_model_minute (migration 00040) sums rollup_load_minute's minutes over org and service, for
// the incidents' counts (modelMinuteSums): with many services a minute of the load rollup is some
// hundreds of rows, of a couple of dozen models.
//
// An ingest commit adds its deltas to pending_load_minute (with the local day of each minute);
// each chunk of a fold (LoadFoldSQL) adds them to rollup_load_minute and notes the minutes it
// touched, and the fold, once its chunks are done (RaisePeaks, raise.go), sums every grouping at
// those minutes and raises the days' peaks where they are passed. Sums only grow and the
// lowest headroom only falls as records arrive, so the peaks a fold keeps are those a recount from
// scratch finds (LoadRebuildSQL, in RebuildSteps).

package rollup

import (
	"fmt"
	"slices"
	"strings"
)

// LoadKey is rollup_load_minute's primary key, in order. fallback and fallback_from (migration
// 00036) keep a fallback model's attempts apart from its own, and say which model they stood in
// for: the incidents count them for that model.
var LoadKey = []string{"project_id", "bucket", "org", "provider", "model", "service", "fallback", "fallback_from"}

// LoadSums are rollup_load_minute's summed columns, in column order.
var LoadSums = []Sum{
	{"requests", "count(*)", one},
	{"rate_limited", "count(*) FILTER (WHERE " + RateLimitedWhere + ")", func(a *Attempt) int64 {
		return flag(a.HTTPStatus == 429 || a.ErrorClass == "rate_limited")
	}},
	{"input_tokens", "sum8(input_tokens + cache_write_tokens + cache_read_tokens)", func(a *Attempt) int64 {
		return a.Input + a.CacheWrite + a.CacheRead
	}},
	{"output_tokens", "sum8(output_tokens)", func(a *Attempt) int64 { return a.Output }},
	// The counts the incidents find troubled minutes by (migration 00036): logical calls (first
	// attempts), failed attempts (status error) and answers (status ok).
	{"calls", "count(*) FILTER (WHERE attempt_no = 1)", func(a *Attempt) int64 { return flag(a.AttemptNo == 1) }},
	{"failed", "count(*) FILTER (WHERE status = 'error')", func(a *Attempt) int64 { return flag(a.Status == "error") }},
	{"answered", "count(*) FILTER (WHERE status = 'ok')", func(a *Attempt) int64 { return flag(a.Status == "ok") }},
	// And what the incidents' wasted spend sums: the cost of the priced attempts that gave no
	// answer, and the unpriced attempts (a reprice adjusts both).
	{"wasted_nanos", "coalesce(sum(cost_nanos) FILTER (WHERE status <> 'ok'), 0)", func(a *Attempt) int64 {
		if a.Status == "ok" {
			return 0
		}
		return orZero(a.Cost)
	}},
	{"unpriced_attempts", "count(*) FILTER (WHERE cost_nanos IS NULL)", unpriced},
}

// RateLimitedWhere selects the attempts the provider refused for its rate limit.
const RateLimitedWhere = "http_status = 429 OR error_class = 'rate_limited'"

// LoadLimits are the rate limits whose lowest headroom the load rollup keeps, in
// schema.RateLimits order; X's attempts columns are ratelimit_limit_X and ratelimit_remaining_X,
// its rollup columns X_remaining and X_limit.
var LoadLimits = []string{"requests", "tokens", "input_tokens", "output_tokens"}

// MinuteBucketExpr is the UTC minute of an attempt.
const MinuteBucketExpr = "date_trunc('minute', started_at, 'UTC')"

// LoadPairCols are rollup_load_minute's headroom columns: each limit's remaining and limit, in
// LoadLimits order.
var LoadPairCols = pairCols("")

// LoadCols are rollup_load_minute's columns after the key: the sums, then each limit's pair.
var LoadCols = slices.Concat(Cols(LoadSums), LoadPairCols)

// pairCols are the headroom pair columns, each prefixed.
func pairCols(prefix string) []string {
	var out []string
	for _, l := range LoadLimits {
		out = append(out, prefix+l+"_remaining", prefix+l+"_limit")
	}
	return out
}

// lowest is the aggregate whose result holds the lowest headroom among pairs (remaining, limit)
// of the SQL expressions rem and lim: an array {remaining ÷ limit, −limit, remaining}, the smallest
// by array order, NULL when no row has a limit. The share is divided at scale 28, finer than any
// two shares of limits up to 10^12 differ.
func lowest(rem, lim string) string {
	return fmt.Sprintf("min(ARRAY[%[1]s::numeric(40,28) / %[2]s, -%[2]s, %[1]s]) FILTER (WHERE %[2]s IS NOT NULL)", rem, lim)
}

// pairOf selects the remaining and the limit out of lowest's array arr, named as limit l's
// rollup columns.
func pairOf(arr, l string) string {
	return fmt.Sprintf("(%[1]s)[3]::int8 AS %[2]s_remaining, (-(%[1]s)[2])::int8 AS %[2]s_limit", arr, l)
}

// lowestPairs are the select-list items of every limit's lowest pair over the rows of a group, read
// from the columns the function col names.
func lowestPairs(col func(limit string) (rem, lim string)) []string {
	var out []string
	for _, l := range LoadLimits {
		out = append(out, pairOf(lowest(col(l)), l))
	}
	return out
}

// fromAttempts names an attempts row's headroom columns.
func fromAttempts(l string) (string, string) {
	return "ratelimit_remaining_" + l, "ratelimit_limit_" + l
}

// fromRollup names a load rollup row's headroom columns.
func fromRollup(l string) (string, string) { return l + "_remaining", l + "_limit" }

// loadSelect is the select list that counts attempts rows a (joined to series s) into load rows:
// the key, the extra items, then LoadCols.
func loadSelect(extra ...string) string {
	items := []string{"a.project_id", MinuteBucketExpr, "coalesce(a.org, '')", "s.provider", "s.model", "s.service",
		"a.fallback", "s.fallback_from"}
	items = append(items, extra...)
	for _, s := range LoadSums {
		items = append(items, s.Expr)
	}
	items = append(items, lowestPairs(fromAttempts)...)
	return strings.Join(items, ", ")
}

// loadPendingFrom is the WITH item (named pl) of PendingFrom that adds the load deltas of the
// attempts rows src (a FROM item) to pending_load_minute, with local days in the timezone given by
// the SQL expression tz.
func loadPendingFrom(src, tz string) string {
	return fmt.Sprintf(`pl AS (
		INSERT INTO pending_load_minute (%[1]s, day, %[2]s)
		SELECT %[3]s FROM %[4]s a %[5]s GROUP BY %[6]s
	)`, strings.Join(LoadKey, ", "), strings.Join(LoadCols, ", "),
		loadSelect(DayBucketExpr(tz)), src, seriesOfA, Ordinals(len(LoadKey)+1))
}

// keepExpr is a grouping's keep mask under GROUP BY CUBE (org, provider, model, service).
const keepExpr = "(15 - GROUPING(org, provider, model, service))::int2"

// peakCols are rollup_load_peaks' columns after its key.
var peakCols = append([]string{"requests", "requests_at", "rate_limited", "input_tokens", "input_tokens_at",
	"output_tokens", "output_tokens_at", "tokens", "tokens_at"}, pairCols("")...)

// peakKey is rollup_load_peaks' primary key.
var peakKey = []string{"project_id", "keep", "day", "org", "provider", "model", "service"}

// peaksOf is the SELECT of rollup_load_peaks rows from the minute sums m (bucket, day, org,
// provider, model, service and LoadCols' sums) and the headroom rows h (day, org, provider,
// model, service and the pairs), each summed per grouping: per day and group, the busiest minute
// of each count (the largest, then the earliest, by array order), and the lowest headroom.
func peaksOf(m, h string) string {
	best := func(v string, with ...string) string {
		return "max(ARRAY[" + strings.Join(append([]string{v, "-extract(epoch FROM bucket)::int8"}, with...), ", ") + "])"
	}
	at := func(arr string) string { return fmt.Sprintf("to_timestamp(-(%s)[2])", arr) }
	return fmt.Sprintf(`WITH g AS (
		SELECT project_id, bucket, day, %[1]s AS keep, coalesce(org, '') AS org, coalesce(provider, '') AS provider,
			coalesce(model, '') AS model, coalesce(service, '') AS service, sum8(requests) AS requests,
			sum8(rate_limited) AS rate_limited, sum8(input_tokens) AS input_tokens, sum8(output_tokens) AS output_tokens
		FROM %[2]s GROUP BY project_id, bucket, day, CUBE (org, provider, model, service)
	), p AS (
		SELECT project_id, keep, day, org, provider, model, service, %[3]s AS r, %[4]s AS i, %[5]s AS o, %[6]s AS t
		FROM g GROUP BY 1, 2, 3, 4, 5, 6, 7
	), hl AS (
		SELECT project_id, %[1]s AS keep, day, coalesce(org, '') AS org, coalesce(provider, '') AS provider,
			coalesce(model, '') AS model, coalesce(service, '') AS service, %[7]s
		FROM %[8]s GROUP BY project_id, day, CUBE (org, provider, model, service)
	)
	SELECT %[9]s, p.r[1], %[10]s, p.r[3], p.i[1], %[11]s, p.o[1], %[12]s, p.t[1], %[13]s, %[14]s
	FROM p LEFT JOIN hl USING (project_id, keep, day, org, provider, model, service)`,
		keepExpr, m, best("requests", "rate_limited"), best("input_tokens"), best("output_tokens"),
		best("input_tokens + output_tokens"), strings.Join(lowestPairs(fromRollup), ", "), h,
		strings.Join(prefixed("p.", peakKey), ", "), at("p.r"), at("p.i"), at("p.o"), at("p.t"),
		strings.Join(prefixed("hl.", pairCols("")), ", "))
}

// chooseSet is the SET items that take cols from the incoming row (excluded) when cond holds and
// keep the stored row's (r) otherwise. Every SET item reads the row as stored, so the items agree.
func chooseSet(cond string, cols ...string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = fmt.Sprintf("%[1]s = CASE WHEN %[2]s THEN excluded.%[1]s ELSE r.%[1]s END", c, cond)
	}
	return out
}

// headroomMerge is the SET items that keep, of the stored row r and the incoming one, the lower
// headroom of limit l.
func headroomMerge(l string) []string {
	return chooseSet(headroomLower(l), l+"_remaining", l+"_limit")
}

// headroomLower is the condition under which the incoming row's headroom of limit l is lower than
// the stored row r's.
func headroomLower(l string) string {
	return fmt.Sprintf("headroom_below(excluded.%[1]s_remaining, excluded.%[1]s_limit, r.%[1]s_remaining, r.%[1]s_limit)", l)
}

// LoadFoldSQL moves one chunk of the pending load deltas (see chunk) into rollup_load_minute and
// rollup_model_minute, in one statement, under the fold lock; records the minutes it touched in
// pending_load_touched (migration 00034) for RaisePeaks; and writes the rows of rollup_days of
// their local days (days.go). It returns how many rows it wrote, then the chunk's size and last
// ctid. As the other folds, it reads the pending rows and deletes them in separate WITH items, so
// both see the same rows. The day of each minute comes from the pending rows, counted when the
// commit was.
var LoadFoldSQL = func() string {
	sums, set := SummedAs(Cols(LoadSums)), addedSet(Cols(LoadSums))
	for _, l := range LoadLimits {
		set = append(set, headroomMerge(l)...)
	}
	key := strings.Join(LoadKey, ", ")
	pl := chunkOf("pending_load_minute")
	return fmt.Sprintf(`WITH `+pl.with+`
	pd AS (
		SELECT %[1]s, max(day) AS day, %[2]s, %[3]s FROM `+pl.from+` GROUP BY %[4]s
	), u AS (
		INSERT INTO rollup_load_minute AS r (%[1]s, %[5]s)
		SELECT %[1]s, %[5]s FROM pd ORDER BY %[4]s
		ON CONFLICT (%[1]s) DO UPDATE SET %[6]s
		RETURNING 1
	), mm AS (
		INSERT INTO rollup_model_minute AS r (%[7]s, %[8]s)
		SELECT %[7]s, %[9]s FROM pd GROUP BY %[10]s ORDER BY %[10]s
		ON CONFLICT (%[7]s) DO UPDATE SET %[11]s
	), t AS (
		INSERT INTO pending_load_touched (project_id, bucket, day)
		SELECT project_id, bucket, max(day) FROM pd GROUP BY 1, 2 ORDER BY 1, 2
		ON CONFLICT DO NOTHING
	), ud AS (`+touchDaysSQL("(SELECT project_id, day AS bucket FROM pd) d")+`)
	SELECT (SELECT count(*) FROM u), `+pl.taken,
		key, strings.Join(sums, ", "), strings.Join(lowestPairs(fromRollup), ", "), Ordinals(len(LoadKey)),
		strings.Join(LoadCols, ", "), strings.Join(set, ", "), strings.Join(ModelMinuteKey, ", "),
		strings.Join(modelMinuteSums, ", "), strings.Join(SummedAs(modelMinuteSums), ", "), Ordinals(len(ModelMinuteKey)),
		strings.Join(addedSet(modelMinuteSums), ", "))
}()

// ModelMinuteKey is rollup_model_minute's key (migration 00040): the load rollup's minutes per
// provider, model, fallback flag and the model a fallback stood in for, without org and service.
// modelMinuteSums are the load sums it keeps: the incidents' minute counts.
var (
	ModelMinuteKey  = []string{"project_id", "bucket", "provider", "model", "fallback", "fallback_from"}
	modelMinuteSums = []string{"requests", "calls", "failed", "answered", "wasted_nanos", "unpriced_attempts"}
)

// modelMinutesFromLoadSQL counts rollup_model_minute from rollup_load_minute, whose minutes a
// rebuild recounted and which keeps those of dropped months.
var modelMinutesFromLoadSQL = fmt.Sprintf(`INSERT INTO rollup_model_minute (%[1]s, %[2]s)
	SELECT %[1]s, %[3]s FROM rollup_load_minute GROUP BY %[4]s ORDER BY %[4]s`,
	strings.Join(ModelMinuteKey, ", "), strings.Join(modelMinuteSums, ", "), strings.Join(SummedAs(modelMinuteSums), ", "),
	Ordinals(len(ModelMinuteKey)))

// LoadRebuildSQL are the statements that recount the load rollup from the raw attempts, in order:
// clear the minutes whose raw attempts exist ($1, $2: the starts and ends of those ranges; the
// minutes of dropped months are kept), count them again, clear the peaks, and count every day's
// peaks from the minutes, with local days in the timezone $1 (the last statement's only parameter).
var LoadRebuildSQL = func() [4]string {
	days := "(SELECT r.*, (r.bucket AT TIME ZONE $1)::date AS day FROM rollup_load_minute r) %s"
	return [4]string{
		`DELETE FROM rollup_load_minute m WHERE EXISTS (` + fmt.Sprintf(coveredSQL, "m.bucket") + `)`,
		fmt.Sprintf(`INSERT INTO rollup_load_minute (%s, %s) SELECT %s FROM attempts a %s GROUP BY %s ORDER BY 1, 2`,
			strings.Join(LoadKey, ", "), strings.Join(LoadCols, ", "), loadSelect(), seriesOfA, Ordinals(len(LoadKey))),
		`DELETE FROM rollup_load_peaks`,
		fmt.Sprintf(`INSERT INTO rollup_load_peaks (%s, %s) %s ORDER BY %s`,
			strings.Join(peakKey, ", "), strings.Join(peakCols, ", "), peaksOf(fmt.Sprintf(days, "m"), fmt.Sprintf(days, "h")),
			Ordinals(len(peakKey))),
	}
}()
