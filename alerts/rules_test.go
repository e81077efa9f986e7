package alerts_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/alerts/notify"
	"github.com/ledgerd/ledgerd/schema"
)

// step moves the clock to an offset from the test's start, evaluates, and checks which
// notifications have arrived so far ("rule:status" in order).
type step struct {
	at   time.Duration
	want []string
}

// ruleCase is a hand-built ledger, a rule and the moments its alert must fire and resolve.
type ruleCase struct {
	name  string
	tz    string
	start time.Time
	rules string
	calls func(t0 time.Time) []call
	// setup, when set, changes the ledger before the first evaluation.
	setup func(t *testing.T, l *ledger)
	steps []step
	// figures, labels and summary the first firing notification must carry (nil: unchecked).
	figures map[string]string
	labels  map[string]string
	summary string
	// inDescription are phrases the first firing description must contain.
	inDescription []string
}

// runRuleCases runs the cases one after another on one database, emptied between cases: a database
// per case would cost more than the cases themselves, and evaluators sharing a database take turns
// leading, so the cases cannot run in parallel on it. The test functions run in parallel.
func runRuleCases(t *testing.T, cases []ruleCase) {
	t.Helper()
	l := newLedger(t, time.UTC)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tz := time.UTC
			if c.tz != "" {
				var err error
				if tz, err = time.LoadLocation(c.tz); err != nil {
					t.Fatal(err)
				}
			}
			l.reset(t, tz)
			h := newHook(t)
			clk := newClock(c.start)
			l.add(t, l.project, c.calls(c.start)...)
			if c.setup != nil {
				c.setup(t, l)
			}
			ev := l.evaluator(t, cfgWith("alerts:\n  interval: 1h\n  repeat_interval: 24h\n  rules:\n"+c.rules+
				"receivers:\n  - {name: ops, webhook: {url: \"%s\"}}\n", h.srv.URL), clk)
			for _, s := range c.steps {
				clk.Set(c.start.Add(s.at))
				run(t, ev)
				if got := h.statuses(); !slices.Equal(got, s.want) {
					t.Fatalf("at +%s: notifications %q, want %q", s.at, got, s.want)
				}
			}
			got := h.alerts()
			if len(got) == 0 {
				return
			}
			first := got[0]
			if c.figures != nil && !maps.Equal(first.Figures, c.figures) {
				t.Errorf("figures\n got %v\nwant %v", first.Figures, c.figures)
			}
			for k, v := range c.labels {
				if first.Labels[k] != v {
					t.Errorf("label %s = %q, want %q (labels %v)", k, first.Labels[k], v, first.Labels)
				}
			}
			if c.summary != "" && first.Summary != c.summary {
				t.Errorf("summary\n got %q\nwant %q", first.Summary, c.summary)
			}
			for _, p := range c.inDescription {
				if !strings.Contains(first.Description, p) {
					t.Errorf("description lacks %q:\n%s", p, first.Description)
				}
			}
			if first.Status != notify.StatusFiring || first.Project != "acme" || first.Fingerprint == "" {
				t.Errorf("first notification %+v", first)
			}
			if last := got[len(got)-1]; last.Status == notify.StatusResolved {
				if last.EndsAt.IsZero() || last.Fingerprint != first.Fingerprint || !last.StartsAt.Equal(first.StartsAt) {
					t.Errorf("resolved notification %+v does not close the firing one %+v", last, first)
				}
			}
		})
	}
}

var t0 = time.Date(2026, 10, 14, 10, 30, 0, 0, time.UTC)

// twelveWrites are 12 calls a second apart from t0, each writing 1,000 tokens to the cache with
// a prompt hash that changes every call (a timestamp before the cached part).
func cacheWrites(n int, sameHash bool) func(time.Time) []call {
	return func(t0 time.Time) []call {
		var out []call
		for i := range n {
			h := "h" + string(rune('a'+i))
			if sameHash {
				h = "stable"
			}
			out = append(out, call{at: t0.Add(time.Duration(i) * time.Second), input: 100, output: 10,
				cacheWrite: 1000, promptHash: h})
		}
		return out
	}
}

func TestCacheBroken(t *testing.T) {
	t.Parallel()
	rule := "    - {name: cache-broken, kind: cache_broken, window: 1h, min_calls: 10}\n"
	runRuleCases(t, []ruleCase{
		{
			// Guards the main signal: every call writes, none reads. Calls at t0..t0+11s; the alert
			// holds while 10 of them are inside the hour and resolves the second only 9 are.
			name: "prefix changes every call", start: t0, rules: rule, calls: cacheWrites(12, false),
			steps: []step{
				{at: time.Minute, want: []string{"cache-broken:firing"}},
				{at: time.Hour + 2*time.Second, want: []string{"cache-broken:firing"}},
				{at: time.Hour + 3*time.Second, want: []string{"cache-broken:firing", "cache-broken:resolved"}},
			},
			// Each call: cost 100×1000 + 1000×1250 + 10×5000 = 1,400,000 nano-dollars; without
			// caching 1,100×1000 + 50,000 = 1,150,000.
			figures: map[string]string{"calls": "12", "cache_write_calls": "12", "cache_read_calls": "0",
				"cache_write_tokens": "12000", "cost_usd": "0.016800000", "nocache_cost_usd": "0.013800000",
				"extra_cost_usd": "0.003000000", "distinct_prompt_hashes": "12", "unpriced_calls": "0", "window": "1h"},
			labels:  map[string]string{"alertname": "cache-broken", "service": "router", "operation": "classify", "model": "claude-haiku-5-5", "kind": "cache_broken", "severity": "warning", "project": "acme"},
			summary: "Prompt cache written 12 times and never read on router/classify on claude-haiku-5-5",
			inDescription: []string{"12 calls wrote 12,000 tokens to the prompt cache and none read it back",
				"$0.003 more than no caching at all ($0.0168 paid, $0.0138 without caching)",
				"12 different prompt hashes", "a timestamp, a request id"},
		},
		{
			// Guards the advice when the hash is stable: the cache expires between calls.
			name: "stable prefix", start: t0, rules: rule, calls: cacheWrites(10, true),
			steps:         []step{{at: time.Minute, want: []string{"cache-broken:firing"}}},
			inDescription: []string{"same on every call", "cache lifetime"},
		},
		{
			// Guards against paging on a healthy cache: one write, then reads.
			name: "cache that reads", start: t0, rules: rule,
			calls: func(t0 time.Time) []call {
				out := []call{{at: t0, input: 100, cacheWrite: 1000, promptHash: "p"}}
				for i := 1; i < 20; i++ {
					out = append(out, call{at: t0.Add(time.Duration(i) * time.Second), input: 100, cacheRead: 1000, promptHash: "p"})
				}
				return out
			},
			steps: []step{{at: time.Minute, want: nil}},
		},
		{
			// Guards min_calls: nine writes are too few to judge.
			name: "too few calls", start: t0, rules: rule, calls: cacheWrites(9, false),
			steps: []step{{at: time.Minute, want: nil}},
		},
		{
			// Guards detection at (service, operation, model) although each call has its own
			// prompt hash: grouping by prompt_hash would see 12 scopes of one call each.
			name: "grouped by prompt hash sees single calls", start: t0,
			rules: "    - {name: cache-broken, kind: cache_broken, window: 1h, min_calls: 2, group_by: [service, prompt_hash]}\n",
			calls: cacheWrites(12, false),
			steps: []step{{at: time.Minute, want: nil}},
		},
	})
}

// retries returns n logical calls at t, each making attempts attempts.
func retries(n, attempts int, at time.Time, class schema.ErrorClass) []call {
	var out []call
	for i := range n {
		out = append(out, call{at: at.Add(time.Duration(i) * 3 * time.Second), attempts: attempts, input: 10, class: class})
	}
	return out
}

func TestAttemptsPerCall(t *testing.T) {
	t.Parallel()
	rule := "    - {name: retry-storm, kind: attempts_per_call, window: 15m, threshold: 1.5, min_requests: 20, for: 5m}\n"
	runRuleCases(t, []ruleCase{
		{
			// Guards `for` and the window's edge: 20 calls of 3 attempts at t0-5m (the last call's
			// first attempt at t0-5m+57s). Pending at once, firing 5 minutes later, resolved the
			// moment the first call's first attempt leaves the window and calls drop below 20.
			name: "retry storm", start: t0, rules: rule,
			calls: func(t0 time.Time) []call { return retries(20, 3, t0.Add(-5*time.Minute), schema.ErrorOverloaded) },
			steps: []step{
				{at: 0, want: nil},
				{at: 4*time.Minute + 59*time.Second, want: nil},
				{at: 5 * time.Minute, want: []string{"retry-storm:firing"}},
				{at: 10 * time.Minute, want: []string{"retry-storm:firing"}},
				{at: 10*time.Minute + time.Second, want: []string{"retry-storm:firing", "retry-storm:resolved"}},
			},
			figures: map[string]string{"attempts": "60", "requests": "20", "attempts_per_call": "3.00", "threshold": "1.5",
				"failed_attempts": "40", "failed_overloaded": "40", "window": "15m"},
			labels:        map[string]string{"alertname": "retry-storm", "service": "router", "operation": "classify", "model": "claude-haiku-5-5"},
			summary:       "3.00 attempts per call on router/classify on claude-haiku-5-5 (threshold 1.5)",
			inDescription: []string{"20 logical calls made 60 attempts", "overloaded 40", "4 attempts into 12"},
		},
		{
			// Guards the threshold: 25 attempts for 20 calls (1.25) is within 1.5.
			name: "retries within threshold", start: t0, rules: rule,
			calls: func(t0 time.Time) []call {
				return append(retries(15, 1, t0.Add(-time.Minute), ""), retries(5, 2, t0.Add(-2*time.Minute), "")...)
			},
			steps: []step{{at: 0, want: nil}, {at: 6 * time.Minute, want: nil}},
		},
		{
			// Guards min_requests: ten calls of three attempts are too few to page anyone.
			name: "below min_requests", start: t0, rules: rule,
			calls: func(t0 time.Time) []call { return retries(10, 3, t0.Add(-time.Minute), "") },
			steps: []step{{at: 0, want: nil}, {at: 6 * time.Minute, want: nil}},
		},
		{
			// Guards an honest 15m window: a storm 16 minutes ago is outside it, though it is in
			// the same hour bucket.
			name: "storm before the window", start: t0, rules: rule,
			calls: func(t0 time.Time) []call {
				return append(retries(20, 3, t0.Add(-25*time.Minute), ""), retries(20, 1, t0.Add(-5*time.Minute), "")...)
			},
			steps: []step{{at: 0, want: nil}, {at: 6 * time.Minute, want: nil}},
		},
	})
}

// dollars is one call whose input costs exactly d dollars (1,000 nano-dollars a token).
func dollars(at time.Time, d int64, model string) call {
	return call{at: at, input: d * 1_000_000, model: model}
}

func TestDailySpend(t *testing.T) {
	t.Parallel()
	rule := "    - {name: daily-spend, kind: daily_spend, threshold_usd: \"50\"}\n"
	paris := func(h, m int) time.Time {
		tz, _ := time.LoadLocation("Europe/Paris")
		return time.Date(2026, 10, 14, h, m, 0, 0, tz)
	}
	runRuleCases(t, []ruleCase{
		{
			// Guards the plain threshold and the local day: $60 by 09:00 Paris fires; the alert
			// resolves at local midnight, not UTC midnight (22:00 UTC).
			name: "over the threshold", tz: "Europe/Paris", start: paris(9, 0), rules: rule,
			calls: func(t0 time.Time) []call {
				return []call{dollars(t0.Add(-2*time.Hour), 30, ""), dollars(t0.Add(-time.Hour), 30, "claude-sonnet-5-5")}
			},
			steps: []step{
				{at: 0, want: []string{"daily-spend:firing"}},
				{at: 14*time.Hour + 59*time.Minute, want: []string{"daily-spend:firing"}},
				{at: 15 * time.Hour, want: []string{"daily-spend:firing", "daily-spend:resolved"}},
			},
			figures: map[string]string{"spend_usd": "60.000000000", "threshold_usd": "50.000000000", "basis": "actual",
				"day": "2026-10-14", "timezone": "Europe/Paris", "day_elapsed": "37%", "projected_usd": "160.000000000"},
			summary: "Daily spend $60.00 is over $50.00 for project acme",
			inDescription: []string{"Spend since midnight (Europe/Paris) is $60.00 at 09:00",
				"router/classify on claude-haiku-5-5 $30.00", "router/classify on claude-sonnet-5-5 $30.00"},
		},
		{
			// Guards early firing: $15 by 06:00 is a quarter of the day, so the day heads for $60.
			name: "projected over the threshold", tz: "Europe/Paris", start: paris(6, 0), rules: rule,
			calls: func(t0 time.Time) []call { return []call{dollars(t0.Add(-time.Hour), 15, "")} },
			steps: []step{{at: 0, want: []string{"daily-spend:firing"}}},
			figures: map[string]string{"spend_usd": "15.000000000", "threshold_usd": "50.000000000", "basis": "projected",
				"day": "2026-10-14", "timezone": "Europe/Paris", "day_elapsed": "25%", "projected_usd": "60.000000000"},
			summary: "Daily spend heading for $60.00, over $50.00, for project acme ($15.00 so far)",
		},
		{
			// Guards projection_after: at 02:00 the same $15 would project to $180, but two hours
			// are too few to extrapolate; at 03:00 (3h) it projects to $120 and fires.
			name: "too early to project", tz: "Europe/Paris", start: paris(2, 0), rules: rule,
			calls: func(t0 time.Time) []call { return []call{dollars(t0.Add(-time.Hour), 15, "")} },
			steps: []step{{at: 0, want: nil}, {at: 59 * time.Minute, want: nil}, {at: time.Hour, want: []string{"daily-spend:firing"}}},
		},
		{
			// Guards projection: false.
			name: "projection off", tz: "Europe/Paris", start: paris(6, 0),
			rules: "    - {name: daily-spend, kind: daily_spend, threshold_usd: \"50\", projection: false}\n",
			calls: func(t0 time.Time) []call { return []call{dollars(t0.Add(-time.Hour), 15, "")} },
			steps: []step{{at: 0, want: nil}},
		},
		{
			// Guards a DST day: 29 March 2026 has 23 hours in Paris, and 06:00 is 5 hours in, so
			// $15 projects to $15 × 23 / 5 = $69.
			name: "short day", tz: "Europe/Paris", start: time.Date(2026, 3, 29, 4, 0, 0, 0, time.UTC), rules: rule,
			calls: func(t0 time.Time) []call { return []call{dollars(t0.Add(-time.Hour), 15, "")} },
			steps: []step{{at: 0, want: []string{"daily-spend:firing"}}},
			figures: map[string]string{"spend_usd": "15.000000000", "threshold_usd": "50.000000000", "basis": "projected",
				"day": "2026-03-29", "timezone": "Europe/Paris", "day_elapsed": "21%", "projected_usd": "69.000000000"},
		},
		{
			// Guards group_by: one alert per model, only for the model over the threshold.
			name: "per model", start: time.Date(2026, 10, 14, 12, 0, 0, 0, time.UTC),
			rules: "    - {name: daily-spend, kind: daily_spend, threshold_usd: \"50\", group_by: [model], projection: false}\n",
			calls: func(t0 time.Time) []call {
				return []call{dollars(t0.Add(-time.Hour), 51, "claude-sonnet-5-5"), dollars(t0.Add(-time.Hour), 40, "")}
			},
			steps:   []step{{at: 0, want: []string{"daily-spend:firing"}}},
			labels:  map[string]string{"model": "claude-sonnet-5-5"},
			summary: "Daily spend $51.00 is over $50.00 for model claude-sonnet-5-5 (project acme)",
		},
	})
}

func TestMonthlyBudget(t *testing.T) {
	t.Parallel()
	noon := time.Date(2026, 10, 14, 12, 0, 0, 0, time.UTC)
	// A week of $50 days (7 to 13 October) and $20 this morning: $370 so far, a run rate of $50 a
	// day over the 17.5 days left projects $1,245.
	week := func(t0 time.Time) []call {
		var out []call
		for d := 7; d >= 1; d-- {
			out = append(out, dollars(t0.AddDate(0, 0, -d), 50, ""))
		}
		return append(out, dollars(t0.Add(-4*time.Hour), 20, ""))
	}
	setBudget := func(usd int64) func(t *testing.T, l *ledger) {
		return func(t *testing.T, l *ledger) {
			if _, err := l.st.Pool.Exec(context.Background(), `UPDATE projects SET monthly_budget_nanos = $1 WHERE id = $2`,
				usd*1_000_000_000, l.project.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	rule := func(extra string) string {
		return "    - {name: budget, kind: monthly_budget" + extra + "}\n"
	}
	runRuleCases(t, []ruleCase{
		{
			// Guards the projection and the projected date: $630 to go at $50 a day, $25 of it
			// today, runs out 13 days later, on 27 October. A week without spending brings the
			// run rate down and the alert resolves.
			name: "projected over budget", start: noon, rules: rule(`, budget_usd: "1000"`), calls: week,
			steps: []step{
				{at: 0, want: []string{"budget:firing"}},
				{at: 7 * 24 * time.Hour, want: []string{"budget:firing", "budget:resolved"}},
			},
			figures: map[string]string{"month": "2026-10", "timezone": "UTC", "budget_usd": "1000.000000000",
				"month_to_date_usd": "370.000000000", "projected_usd": "1245.000000000", "run_rate_usd": "50.000000000",
				"basis_days": "7", "budget_crossed_on": "2026-10-27"},
			summary:       "Month spend heading for $1,245.00, over the $1,000.00 budget, for project acme; budget reached 2026-10-27",
			inDescription: []string{"October 2026 spend so far is $370.00", "the mean of the last 7 complete days", "runs out on 2026-10-27"},
		},
		{
			// Guards the date a budget already spent was used up: the sixth $50 day, 12 October.
			name: "budget already spent", start: noon, rules: rule(`, budget_usd: "300"`), calls: week,
			steps:         []step{{at: 0, want: []string{"budget:firing"}}},
			inDescription: []string{"was used up on 2026-10-12"},
		},
		{
			// Guards the fallback to the budget stored on the project.
			name: "stored budget", start: noon, rules: rule(""), calls: week, setup: setBudget(1000),
			steps: []step{{at: 0, want: []string{"budget:firing"}}},
		},
		{
			// Guards silence for a project without any budget.
			name: "no budget", start: noon, rules: rule(""), calls: week,
			steps: []step{{at: 0, want: nil}},
		},
		{
			// Guards silence under budget: $1,245 projected against $1,300.
			name: "under budget", start: noon, rules: rule(`, budget_usd: "1300"`), calls: week,
			steps: []step{{at: 0, want: nil}},
		},
	})
}

// TestWindowEdges checks that a window ending now counts exactly the attempts inside it although
// whole hours come from the hourly rollups and only the edges from raw attempts: a 2h window at
// 10:20 reads 09:00-10:00 from rollups and 08:20-09:00 and 10:00-10:20 raw.
func TestWindowEdges(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 14, 10, 20, 0, 0, time.UTC)
	at := func(h, m, s int) time.Time { return time.Date(2026, 10, 14, h, m, s, 0, time.UTC) }
	// Three attempts a second apart from each moment; the last call's third attempt falls on
	// 10:20:00, the window's open end.
	storm := func(time.Time) []call {
		var out []call
		for _, t := range []time.Time{at(8, 19, 0), at(8, 20, 0), at(9, 30, 0), at(10, 10, 0), at(10, 19, 58)} {
			out = append(out, call{at: t, attempts: 3, input: 10})
		}
		return out
	}
	writes := func(time.Time) []call {
		var out []call
		for i, t := range []time.Time{at(8, 19, 59), at(8, 20, 0), at(9, 30, 0), at(10, 10, 0), at(10, 19, 59), at(10, 20, 0)} {
			out = append(out, call{at: t, input: 100, output: 10, cacheWrite: 1000, promptHash: fmt.Sprint("h", i)})
		}
		return out
	}
	runRuleCases(t, []ruleCase{
		{
			// Guards attempts and logical calls at every edge: 4 calls, 11 attempts.
			name: "attempts", start: now, calls: storm,
			rules: "    - {name: retry-storm, kind: attempts_per_call, window: 2h, min_requests: 1}\n",
			steps: []step{{at: 0, want: []string{"retry-storm:firing"}}},
			figures: map[string]string{"attempts": "11", "requests": "4", "attempts_per_call": "2.75", "threshold": "1.5",
				"failed_attempts": "8", "failed_rate_limited": "8", "window": "2h"},
		},
		{
			// Guards cache activity at every edge: 4 writing calls inside, 2 outside.
			name: "cache", start: now, calls: writes,
			rules: "    - {name: cache-broken, kind: cache_broken, window: 2h, min_calls: 4}\n",
			steps: []step{{at: 0, want: []string{"cache-broken:firing"}}},
			figures: map[string]string{"calls": "4", "cache_write_calls": "4", "cache_read_calls": "0",
				"cache_write_tokens": "4000", "cost_usd": "0.005600000", "nocache_cost_usd": "0.004600000",
				"extra_cost_usd": "0.001000000", "distinct_prompt_hashes": "4", "unpriced_calls": "0", "window": "2h"},
		},
		{
			// Guards the same with one call too few for min_calls.
			name: "cache below min_calls", start: now, calls: writes,
			rules: "    - {name: cache-broken, kind: cache_broken, window: 2h, min_calls: 5}\n",
			steps: []step{{at: 0, want: nil}},
		},
	})
}

// withTenant sets the tenant of calls.
func withTenant(tenant string, calls []call) []call {
	for i := range calls {
		calls[i].tenant = tenant
	}
	return calls
}

// TestRulesByTenant checks rules grouped by tenant over hours the rollups hold: the rollups keep
// series shapes without tenants (migration 00011), so these rules read the raw attempts, and a
// tenant's alert counts that tenant's calls only.
func TestRulesByTenant(t *testing.T) {
	t.Parallel()
	runRuleCases(t, []ruleCase{
		{
			// initech spends $60 today, globex $10: only initech is over $50.
			name: "daily spend", start: t0,
			rules: "    - {name: tenant-spend, kind: daily_spend, threshold_usd: \"50\", projection: false, group_by: [tenant]}\n",
			calls: func(t0 time.Time) []call {
				return append(withTenant("initech", []call{dollars(t0.Add(-3*time.Hour), 60, "")}),
					withTenant("globex", []call{dollars(t0.Add(-3*time.Hour), 10, "")})...)
			},
			steps: []step{{at: 0, want: []string{"tenant-spend:firing"}}},
			figures: map[string]string{"spend_usd": "60.000000000", "threshold_usd": "50.000000000", "basis": "actual",
				"day": "2026-10-14", "timezone": "UTC", "day_elapsed": "43%"},
			labels: map[string]string{"tenant": "initech"},
		},
		{
			// Over a 2-hour window whose whole hour 09:00-10:00 the rollups hold: initech's calls
			// take 3 attempts, globex's 1; together 2.0, but only initech is over 1.5.
			name: "attempts per call", start: t0,
			rules: "    - {name: tenant-retries, kind: attempts_per_call, window: 2h, threshold: 1.5, min_requests: 20, group_by: [tenant]}\n",
			calls: func(t0 time.Time) []call {
				at := t0.Add(-80 * time.Minute)
				return append(withTenant("initech", retries(20, 3, at, "")), withTenant("globex", retries(20, 1, at, ""))...)
			},
			steps: []step{{at: 0, want: []string{"tenant-retries:firing"}}},
			figures: map[string]string{"attempts": "60", "requests": "20", "attempts_per_call": "3.00", "threshold": "1.5",
				"failed_attempts": "40", "failed_rate_limited": "40", "window": "2h"},
			labels: map[string]string{"tenant": "initech"},
		},
	})
}
