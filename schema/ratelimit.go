package schema

import (
	"encoding/json"
	"fmt"
	"time"
)

// rateLimitsJSON is the JSON shape of RateLimits: the record's flat ratelimit_* fields, whose
// pointers tell a missing field from a zero one (a remaining of 0 is the figure that matters most).
type rateLimitsJSON struct {
	LimitRequests         *int64     `json:"ratelimit_limit_requests,omitempty"`
	RemainingRequests     *int64     `json:"ratelimit_remaining_requests,omitempty"`
	ResetRequests         *time.Time `json:"ratelimit_reset_requests,omitempty"`
	LimitTokens           *int64     `json:"ratelimit_limit_tokens,omitempty"`
	RemainingTokens       *int64     `json:"ratelimit_remaining_tokens,omitempty"`
	ResetTokens           *time.Time `json:"ratelimit_reset_tokens,omitempty"`
	LimitInputTokens      *int64     `json:"ratelimit_limit_input_tokens,omitempty"`
	RemainingInputTokens  *int64     `json:"ratelimit_remaining_input_tokens,omitempty"`
	ResetInputTokens      *time.Time `json:"ratelimit_reset_input_tokens,omitempty"`
	LimitOutputTokens     *int64     `json:"ratelimit_limit_output_tokens,omitempty"`
	RemainingOutputTokens *int64     `json:"ratelimit_remaining_output_tokens,omitempty"`
	ResetOutputTokens     *time.Time `json:"ratelimit_reset_output_tokens,omitempty"`
}

// fields lists w's fields per limit, in RateLimits.limits order.
func (w *rateLimitsJSON) fields() [4]limitJSON {
	return [4]limitJSON{
		{"requests", &w.LimitRequests, &w.RemainingRequests, &w.ResetRequests},
		{"tokens", &w.LimitTokens, &w.RemainingTokens, &w.ResetTokens},
		{"input_tokens", &w.LimitInputTokens, &w.RemainingInputTokens, &w.ResetInputTokens},
		{"output_tokens", &w.LimitOutputTokens, &w.RemainingOutputTokens, &w.ResetOutputTokens},
	}
}

type limitJSON struct {
	name             string
	limit, remaining **int64
	reset            **time.Time
}

// rateLimitFields are the record's ratelimit_* field names with the JSON kind each takes.
var rateLimitFields = func() map[string]string {
	out := map[string]string{}
	var w rateLimitsJSON
	for _, f := range w.fields() {
		out["ratelimit_limit_"+f.name] = "a whole number"
		out["ratelimit_remaining_"+f.name] = "a whole number"
		out["ratelimit_reset_"+f.name] = "an RFC 3339 timestamp string"
	}
	return out
}()

// rateLimits turns the decoded fields into RateLimits (nil when none was sent), or names the first
// field that cannot stand: a limit and what remains of it come together, and a limit is at least 1.
func (w *rateLimitsJSON) rateLimits() (*RateLimits, *FieldError) {
	var r *RateLimits
	var out RateLimits
	for i, f := range w.fields() {
		limit, remaining, reset := *f.limit, *f.remaining, *f.reset
		switch {
		case limit != nil && remaining == nil:
			return nil, &FieldError{Field: "ratelimit_remaining_" + f.name, Reason: "required with ratelimit_limit_" + f.name}
		case limit == nil && remaining != nil:
			return nil, &FieldError{Field: "ratelimit_limit_" + f.name, Reason: "required with ratelimit_remaining_" + f.name}
		case limit != nil && (*limit < 1 || *limit > MaxRateLimit):
			return nil, &FieldError{Field: "ratelimit_limit_" + f.name, Reason: fmt.Sprintf("must be between 1 and %d", int64(MaxRateLimit))}
		}
		if limit == nil && reset == nil {
			continue
		}
		r = &out
		l := out.limits()[i].l
		if limit != nil {
			l.Limit, l.Remaining = *limit, *remaining
		}
		if reset != nil {
			l.Reset = *reset
		}
	}
	return r, nil
}

// rateLimitsOf is the JSON shape of r.
func rateLimitsOf(r *RateLimits) rateLimitsJSON {
	var w rateLimitsJSON
	if r == nil {
		return w
	}
	for i, f := range w.fields() {
		l := r.limits()[i].l
		if l.Reported() {
			limit, remaining := l.Limit, l.Remaining
			*f.limit, *f.remaining = &limit, &remaining
		}
		if !l.Reset.IsZero() {
			reset := l.Reset
			*f.reset = &reset
		}
	}
	return w
}

// MarshalJSON writes the record as the contract has it, the rate limits as flat ratelimit_*
// fields, so that what the Go client sends is what ingest reads.
func (a Attempt) MarshalJSON() ([]byte, error) {
	type plain Attempt
	return json.Marshal(struct {
		plain
		rateLimitsJSON
	}{plain(a), rateLimitsOf(a.RateLimits)})
}

// UnmarshalJSON reads a record written by MarshalJSON, without the contract's checks (DecodeRecord
// makes those).
func (a *Attempt) UnmarshalJSON(data []byte) error {
	type plain Attempt
	var w struct {
		*plain
		rateLimitsJSON
	}
	w.plain = (*plain)(a)
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	r, ferr := w.rateLimitsJSON.rateLimits()
	if ferr != nil {
		return ferr
	}
	a.RateLimits = r
	return nil
}

// validateRateLimits checks the reported limits against the contract's ranges.
func (a *Attempt) validateRateLimits() *FieldError {
	if a.RateLimits == nil {
		return nil
	}
	for _, f := range a.RateLimits.limits() {
		l := f.l
		switch {
		case l.Limit < 0 || l.Limit > MaxRateLimit:
			return &FieldError{Field: "ratelimit_limit_" + f.name, Reason: fmt.Sprintf("must be between 1 and %d", int64(MaxRateLimit))}
		case l.Remaining < 0 || l.Remaining > MaxRateLimit:
			return &FieldError{Field: "ratelimit_remaining_" + f.name, Reason: fmt.Sprintf("must be between 0 and %d", int64(MaxRateLimit))}
		case l.Limit == 0 && l.Remaining != 0:
			return &FieldError{Field: "ratelimit_limit_" + f.name, Reason: "required with ratelimit_remaining_" + f.name}
		}
		if !l.Reset.IsZero() && (l.Reset.Before(Earliest) || l.Reset.After(a.StartedAt.Add(MaxResetAhead))) {
			return &FieldError{Field: "ratelimit_reset_" + f.name, Reason: "must lie between 2000-01-01 and 32 days after started_at"}
		}
	}
	return nil
}
