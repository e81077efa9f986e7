package ingest

import (
	"time"

	"github.com/ledgerd/ledgerd/schema"
)

// limitCols are the attempts columns of a record's org and rate limits (migration 00030), after the
// others in attemptCols: the org, then each limit's limit, remaining and reset in
// schema.RateLimits order. NULL where the record does not say.
var limitCols = func() []column {
	cols := []column{{"org", "text"}}
	for _, k := range []string{"requests", "tokens", "input_tokens", "output_tokens"} {
		cols = append(cols, column{"ratelimit_limit_" + k, "int8"}, column{"ratelimit_remaining_" + k, "int8"},
			column{"ratelimit_reset_" + k, "timestamptz"})
	}
	return cols
}()

// limitsOf lists a record's four limits in limitCols order.
func limitsOf(r *schema.RateLimits) [4]*schema.RateLimit {
	return [4]*schema.RateLimit{&r.Requests, &r.Tokens, &r.InputTokens, &r.OutputTokens}
}

// appendLimits writes row i's limitCols fields to a COPY.
func (b *batch) appendLimits(c *copyBuf, i int) {
	if v := b.org[i]; v != nil {
		c.text(*v)
	} else {
		c.null()
	}
	r := b.limits[i]
	if r == nil {
		for range len(limitCols) - 1 {
			c.null()
		}
		return
	}
	for _, l := range limitsOf(r) {
		if l.Reported() {
			c.i8(l.Limit)
			c.i8(l.Remaining)
		} else {
			c.null()
			c.null()
		}
		if !l.Reset.IsZero() {
			c.timestamp(l.Reset.UnixMicro())
		} else {
			c.null()
		}
	}
}

// limitArrays are the limitCols columns as the arrays insertSQL unnests.
func (b *batch) limitArrays() []any {
	out := []any{b.org}
	for k := range 4 {
		limit, remaining, reset := make([]*int64, b.n), make([]*int64, b.n), make([]*time.Time, b.n)
		for i, r := range b.limits {
			if r == nil {
				continue
			}
			l := limitsOf(r)[k]
			if l.Reported() {
				limit[i], remaining[i] = &l.Limit, &l.Remaining
			}
			if !l.Reset.IsZero() {
				reset[i] = &l.Reset
			}
		}
		out = append(out, limit, remaining, reset)
	}
	return out
}

// limitTypes are limitCols' types, as appendLimits writes them.
func limitTypes() []string {
	out := []string{"text"}
	for range 4 {
		out = append(out, "int8", "int8", "timestamptz")
	}
	return out
}
