package alerts_test

import (
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/schema"
)

// failures returns n calls from t, a second apart, of one attempt each failing with class on org.
func failures(n int, t time.Time, class schema.ErrorClass, org string) []call {
	var out []call
	for i := range n {
		out = append(out, call{at: t.Add(time.Duration(i) * time.Second), class: class, fail: true, org: org})
	}
	return out
}

func TestErrors(t *testing.T) {
	t.Parallel()
	rule := "    - {name: act-now, kind: errors}\n"
	runRuleCases(t, []ruleCase{
		{
			// Guards the main signal: a spent quota fires at the first evaluation, naming the count,
			// the first and last time and the scope, and resolves once the last failure leaves the
			// 15-minute window.
			name: "quota exhausted", start: t0, rules: rule,
			calls: func(t0 time.Time) []call {
				return failures(3, t0.Add(-2*time.Minute), schema.ErrorQuotaExhausted, "acme-prod")
			},
			steps: []step{
				{at: 0, want: []string{"act-now:firing"}},
				{at: 13*time.Minute + 2*time.Second, want: []string{"act-now:firing"}},
				{at: 13*time.Minute + 3*time.Second, want: []string{"act-now:firing", "act-now:resolved"}},
			},
			figures: map[string]string{"count": "3", "count_quota_exhausted": "3", "first": "2026-10-14T10:28:00Z",
				"last": "2026-10-14T10:28:02Z", "window": "15m"},
			labels:  map[string]string{"service": "router", "provider": "anthropic", "org": "acme-prod", "kind": "errors"},
			summary: "3 quota_exhausted on router via anthropic for org acme-prod since 10:28 UTC",
			inDescription: []string{"the first at 10:28:00 and the last at 10:28:02 UTC", "quota or credit is spent",
				"Stop retrying"},
		},
		{
			// Guards the classes: rate limits are for retrying, not for paging.
			name: "rate limited does not fire", start: t0, rules: rule,
			calls: func(t0 time.Time) []call {
				return failures(50, t0.Add(-time.Minute), schema.ErrorRateLimited, "acme-prod")
			},
			steps: []step{{at: 0, want: nil}},
		},
		{
			// Guards min_count, the classes option and grouping by class: two refused keys are
			// too few, three fire.
			name: "auth errors, counted", start: t0,
			rules: "    - {name: keys, kind: errors, classes: [auth_error], min_count: 3, group_by: [error_class]}\n",
			calls: func(t0 time.Time) []call {
				return append(failures(2, t0.Add(-time.Minute), schema.ErrorAuth, ""),
					failures(1, t0.Add(5*time.Minute), schema.ErrorAuth, "other")...)
			},
			steps: []step{
				{at: 0, want: nil},
				{at: 6 * time.Minute, want: []string{"keys:firing"}},
			},
			labels:        map[string]string{"error_class": "auth_error"},
			inDescription: []string{"3 attempts on", "rotate the key"},
		},
	})
}
