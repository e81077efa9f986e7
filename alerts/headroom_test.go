package alerts_test

import (
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/schema"
)

// orgCalls returns n calls of service on org from t, a tenth of a second apart (so n up to 600 fit
// in a minute), each reporting limits.
func orgCalls(n int, t time.Time, service, org string, limits *schema.RateLimits) []call {
	var out []call
	for i := range n {
		out = append(out, call{at: t.Add(time.Duration(i) * 100 * time.Millisecond), service: service, org: org,
			input: 100, output: 10, limits: limits})
	}
	return out
}

func requestsLimit(limit, remaining int64) *schema.RateLimits {
	return &schema.RateLimits{Requests: schema.RateLimit{Limit: limit, Remaining: remaining}}
}

func TestHeadroom(t *testing.T) {
	t.Parallel()
	rule := "    - {name: headroom, kind: headroom}\n"
	minute := t0.Add(-2 * time.Minute) // 10:28
	runRuleCases(t, []ruleCase{
		{
			// Guards the reported headroom: 5 of 100 requests left is under 10%. The alert names the
			// org, the minute and the limit, fires at once and resolves when the minute leaves the
			// 15-minute window.
			name: "reported headroom low", start: t0, rules: rule,
			calls: func(time.Time) []call {
				return append(orgCalls(10, minute, "router", "acme-prod", requestsLimit(100, 60)),
					orgCalls(1, minute.Add(30*time.Second), "router", "acme-prod", requestsLimit(100, 5))...)
			},
			steps: []step{
				{at: 0, want: []string{"headroom:firing"}},
				{at: 12*time.Minute + 59*time.Second, want: []string{"headroom:firing"}},
				{at: 13*time.Minute + time.Second, want: []string{"headroom:firing", "headroom:resolved"}},
			},
			figures: map[string]string{"minute": "2026-10-14T10:28:00Z", "limit": "requests", "limit_per_minute": "100",
				"remaining": "5", "headroom": "5%", "load": "11", "load_share": "11%", "requests": "11", "tokens": "1210",
				"services": "1", "window": "15m", "min_headroom": "10%", "max_load": "90%"},
			labels:        map[string]string{"org": "acme-prod", "provider": "anthropic", "model": "claude-haiku-5-5", "kind": "headroom"},
			summary:       "model claude-haiku-5-5 via anthropic for org acme-prod had 5% of its requests limit left at 10:28 (100 a minute)",
			inDescription: []string{"reported 5 of 100 requests a minute left", "under the 10% this rule allows"},
		},
		{
			// Guards the shared bucket: two services of one org send 46 and 46 requests in a minute
			// against a limit of 100 (each reporting half of it left): their sum, 92%, reaches the
			// 90% load, though neither alone comes near it.
			name: "two services on one limit", start: t0, rules: rule,
			calls: func(time.Time) []call {
				return append(orgCalls(46, minute, "router", "acme-prod", requestsLimit(100, 50)),
					orgCalls(46, minute.Add(time.Second), "search", "acme-prod", requestsLimit(100, 50))...)
			},
			steps:         []step{{at: 0, want: []string{"headroom:firing"}}},
			summary:       "model claude-haiku-5-5 via anthropic for org acme-prod sent 92 requests in the minute 10:28, 92% of its limit of 100 a minute",
			inDescription: []string{"2 services drew on this limit", "adds no capacity"},
		},
		{
			// Guards against paging on a healthy org: 60 of 100 left, 11 requests sent.
			name: "healthy", start: t0, rules: rule,
			calls: func(time.Time) []call {
				return orgCalls(11, minute, "router", "acme-prod", requestsLimit(100, 60))
			},
			steps: []step{{at: 0, want: nil}},
		},
		{
			// Guards the thresholds as options: 40% left is under a min_headroom of 0.5; the token
			// limit is judged too.
			name: "thresholds from the rule, token limit", start: t0,
			rules: "    - {name: headroom, kind: headroom, min_headroom: 0.5, max_load: 1, group_by: [org]}\n",
			calls: func(time.Time) []call {
				return orgCalls(3, minute, "router", "acme-prod", &schema.RateLimits{
					Requests: schema.RateLimit{Limit: 100, Remaining: 90},
					Tokens:   schema.RateLimit{Limit: 10_000, Remaining: 4_000}})
			},
			steps:   []step{{at: 0, want: []string{"headroom:firing"}}},
			labels:  map[string]string{"org": "acme-prod"},
			summary: "org acme-prod had 40% of its tokens limit left at 10:28 (10,000 a minute)",
		},
	})
}
