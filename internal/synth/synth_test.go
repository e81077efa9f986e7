package synth_test

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/synth"
	"github.com/ledgerd/ledgerd/schema"
)

// monday is a Monday at midnight UTC, the reference of the time-dependent tests.
var monday = time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)

// TestDeterministic guards reproducibility: drills and benchmarks compare runs made from a seed.
func TestDeterministic(t *testing.T) {
	t.Parallel()
	opt := synth.Options{Seed: 7, Start: monday, End: monday.AddDate(0, 0, 7)}
	a, b, c := synth.New(opt), synth.New(opt), synth.New(synth.Options{Seed: 8, Start: opt.Start, End: opt.End})
	var sameSeed, otherSeed int
	for range 2000 {
		x, y, z := a.Next(), b.Next(), c.Next()
		if !reflect.DeepEqual(x, y) {
			t.Fatalf("same seed gave different calls:\n%+v\n%+v", x, y)
		}
		sameSeed++
		if !reflect.DeepEqual(x, z) {
			otherSeed++
		}
	}
	if otherSeed != sameSeed {
		t.Errorf("seeds 7 and 8 gave %d identical calls of %d, want none", sameSeed-otherSeed, sameSeed)
	}
}

// TestCallsAreValidRecords checks every generated attempt against the ingest contract, and the shape
// of each call: one request_id, attempts numbered 1..n in time order, fallback attempts only after
// the primary's and naming it.
func TestCallsAreValidRecords(t *testing.T) {
	t.Parallel()
	end := monday.AddDate(0, 0, 30)
	g := synth.New(synth.Demo(3, end, time.UTC))
	ids := map[string]bool{}
	for range 20_000 {
		call := g.Next()
		if len(call) == 0 {
			t.Fatal("a call with no attempts")
		}
		for i := range call {
			a := call[i]
			if ferr := a.Validate(end); ferr != nil {
				t.Fatalf("attempt %+v: %v", a, ferr)
			}
			if ids[a.AttemptID] {
				t.Fatalf("attempt id %s generated twice", a.AttemptID)
			}
			ids[a.AttemptID] = true
			if a.RequestID != call[0].RequestID || a.AttemptNo != i+1 {
				t.Fatalf("attempt %d of a call: request %s no %d, want request %s no %d", i, a.RequestID, a.AttemptNo, call[0].RequestID, i+1)
			}
			if i > 0 && a.StartedAt.Before(call[i-1].StartedAt.Add(time.Duration(call[i-1].LatencyMS)*time.Millisecond)) {
				t.Fatalf("attempt %d starts before attempt %d ended", i+1, i)
			}
			if i < len(call)-1 && a.Status != schema.StatusError {
				t.Fatalf("attempt %d of %d is %s but was retried", i+1, len(call), a.Status)
			}
			if a.Fallback != (a.FallbackFrom != "") {
				t.Fatalf("attempt %+v: fallback %v with fallback_from %q", a, a.Fallback, a.FallbackFrom)
			}
			if i > 0 && call[i-1].Fallback && !a.Fallback {
				t.Fatalf("a primary attempt after a fallback one: %+v", call)
			}
			if a.Fallback && a.FallbackFrom == a.Model {
				t.Fatalf("fallback to the same model: %+v", a)
			}
		}
	}
}

// tally counts attempts and calls matching a predicate over n calls at times drawn by at.
type tally struct {
	calls, attempts, ok, errors, answered, reads, writes, fallbacks, primaryOK int
}

func count(g *synth.Generator, n int, at func(i int) time.Time, service string) tally {
	var t tally
	for i := 0; i < n; {
		call := g.Call(at(i))
		if call[0].Service != service {
			continue
		}
		i++
		t.calls++
		for _, a := range call {
			t.attempts++
			switch a.Status {
			case schema.StatusOK:
				t.ok++
				if !a.Fallback {
					t.primaryOK++
				}
			case schema.StatusError:
				t.errors++
			}
			if a.Status != schema.StatusError {
				t.answered++
			}
			if a.CacheReadTokens > 0 {
				t.reads++
			}
			if a.CacheWriteTokens > 0 {
				t.writes++
			}
			if a.Fallback {
				t.fallbacks++
			}
		}
	}
	return t
}

// TestIncidents checks what each incident does to the calls it covers, and that it leaves the
// calls outside its window alone.
func TestIncidents(t *testing.T) {
	t.Parallel()
	from := monday.Add(10 * time.Hour)
	to := from.Add(2 * time.Hour)
	inside := func(int) time.Time { return from.Add(time.Hour) }
	outside := func(int) time.Time { return to.Add(time.Hour) }
	cases := []struct {
		name     string
		incident synth.Incident
		service  string
		check    func(t *testing.T, in, out tally)
	}{
		{
			// A broken cache writes on every answered call and never reads; before it broke, reads dominate.
			name: "broken cache", service: "support-bot",
			incident: synth.Incident{Kind: synth.BrokenCache, Service: "support-bot", From: from, To: to},
			check: func(t *testing.T, in, out tally) {
				if in.reads != 0 || in.writes != in.answered {
					t.Errorf("inside: %d reads, %d writes of %d answered; want 0 reads and a write on every answer", in.reads, in.writes, in.answered)
				}
				if out.reads*10 < out.ok*9 {
					t.Errorf("outside: %d reads of %d answered; want at least 90%%", out.reads, out.ok)
				}
			},
		},
		{
			// In an outage the primary model answers nothing; every answer comes from the fallback model.
			name: "outage served by fallback", service: "support-bot",
			incident: synth.Incident{Kind: synth.Outage, Model: synth.Sonnet55.Name, From: from, To: to},
			check: func(t *testing.T, in, out tally) {
				if in.primaryOK != 0 || in.ok == 0 || in.fallbacks < in.calls {
					t.Errorf("inside: %d primary answers, %d answers, %d fallback attempts for %d calls; want 0 primary answers and a fallback for every call",
						in.primaryOK, in.ok, in.fallbacks, in.calls)
				}
				if out.fallbacks*20 > out.calls {
					t.Errorf("outside: %d fallback attempts for %d calls; want under 5%%", out.fallbacks, out.calls)
				}
			},
		},
		{
			// A retry storm multiplies attempts per call; outside it, calls rarely retry.
			name: "retry storm", service: "search-summarizer",
			incident: synth.Incident{Kind: synth.RetryStorm, Model: synth.Haiku55.Name, From: from, To: to},
			check: func(t *testing.T, in, out tally) {
				if in.attempts < 2*in.calls {
					t.Errorf("inside: %d attempts for %d calls; want at least 2 per call", in.attempts, in.calls)
				}
				if out.attempts*10 > out.calls*11 {
					t.Errorf("outside: %d attempts for %d calls; want under 1.1 per call", out.attempts, out.calls)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			opt := synth.Options{Seed: 5, Incidents: []synth.Incident{c.incident}, BurstChance: -1}
			in := count(synth.New(opt), 2000, inside, c.service)
			out := count(synth.New(opt), 2000, outside, c.service)
			c.check(t, in, out)
		})
	}
}

// TestCycle pins the daily and weekly traffic shape.
func TestCycle(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		at   time.Time
		want float64
	}{
		{"weekday peak at 10:00", monday.Add(10 * time.Hour), 1.00},
		{"weekday night at 03:00", monday.Add(3 * time.Hour), 0.08},
		{"half past ten interpolates 10:00 and 11:00", monday.Add(10*time.Hour + 30*time.Minute), 0.98},
		{"Saturday peak is a weekend third", monday.AddDate(0, 0, 5).Add(10 * time.Hour), 0.35},
		{"hours are local: 10:00 in Berlin is 09:00 UTC", time.Date(2026, 11, 23, 10, 0, 0, 0, mustZone(t, "Europe/Berlin")), 1.00},
	}
	for _, c := range cases {
		if got := synth.Cycle(c.at, c.at.Location()); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: Cycle = %v, want %v", c.name, got, c.want)
		}
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestNextTimeStaysInWindow guards backdated histories: no call starts outside [Start, End), and
// weekdays carry more traffic than weekends.
func TestNextTimeStaysInWindow(t *testing.T) {
	t.Parallel()
	start, end := monday, monday.AddDate(0, 0, 7)
	g := synth.New(synth.Options{Seed: 9, Start: start, End: end})
	var weekday, weekend int
	for range 10_000 {
		at := g.NextTime()
		if at.Before(start) || !at.Before(end) {
			t.Fatalf("NextTime %s outside [%s, %s)", at, start, end)
		}
		if d := at.Weekday(); d == time.Saturday || d == time.Sunday {
			weekend++
		} else {
			weekday++
		}
	}
	// Five weekdays at full weight against two days at 0.35: about 7 to 1 per day, 5*1/(2*0.35) overall.
	if weekday < 5*weekend {
		t.Errorf("%d weekday calls against %d weekend ones; want at least 5 to 1", weekday, weekend)
	}
}

// TestTrafficSurge checks an incident's Traffic multiplies the calls NextTime draws in its window:
// a day split in two halves of equal weight, the second surging 4x, gets 4 calls there for each
// call in the first.
func TestTrafficSurge(t *testing.T) {
	t.Parallel()
	start := monday.Add(10 * time.Hour)
	mid, end := start.Add(time.Minute), start.Add(2*time.Minute)
	g := synth.New(synth.Options{Seed: 3, Start: start, End: end,
		Incidents: []synth.Incident{{Kind: synth.RetryStorm, Model: "none", From: mid, To: end, Traffic: 4}}})
	var first, second int
	for range 50_000 {
		if g.NextTime().Before(mid) {
			first++
		} else {
			second++
		}
	}
	if r := float64(second) / float64(first); r < 3.8 || r > 4.2 {
		t.Errorf("%d calls in the surge against %d before it: ratio %.2f, want 4", second, first, r)
	}
}

// TestDemo pins the demo history: 30 days ending at end, and its three incidents.
func TestDemo(t *testing.T) {
	t.Parallel()
	end := time.Date(2026, 11, 29, 13, 45, 0, 0, time.UTC)
	o := synth.Demo(1, end, time.UTC)
	if !o.Start.Equal(end.AddDate(0, 0, -30)) || !o.End.Equal(end) {
		t.Errorf("window %s to %s, want %s to %s", o.Start, o.End, end.AddDate(0, 0, -30), end)
	}
	want := []synth.Incident{
		{Kind: synth.Outage, Model: "claude-sonnet-5-5", From: time.Date(2026, 11, 24, 9, 30, 0, 0, time.UTC), To: time.Date(2026, 11, 24, 11, 30, 0, 0, time.UTC)},
		{Kind: synth.BrokenCache, Service: "support-bot", From: time.Date(2026, 11, 26, 16, 0, 0, 0, time.UTC), To: end.Add(time.Hour)},
		{Kind: synth.RetryStorm, Model: "claude-haiku-5-5", From: end.Add(-45 * time.Minute), To: end.Add(time.Hour), Traffic: 5},
		// 2026-11-29 is a Sunday: the rush is the Monday before.
		{Kind: synth.Rush, Org: "acme-prod", From: time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC), To: time.Date(2026, 11, 23, 9, 40, 0, 0, time.UTC), Traffic: 3},
	}
	if !reflect.DeepEqual(o.Incidents, want) {
		t.Errorf("incidents\n%+v\nwant\n%+v", o.Incidents, want)
	}
}

// TestRush checks the Monday-morning rush of the demo: during it acme-prod's services send about
// three times their calls and get 429s reported with none of the limit left, other orgs' calls stay
// as they were, and every attempt with an answer reports its org's limits as its provider does.
func TestRush(t *testing.T) {
	t.Parallel()
	end := time.Date(2026, 11, 29, 13, 45, 0, 0, time.UTC)
	opt := synth.Demo(1, end, time.UTC)
	opt.BurstChance = -1
	opt.Rate = 100
	rush := opt.Incidents[3]
	type tally struct{ prod, other, limited429 int }
	countAt := func(at time.Time) tally {
		var c tally
		g := synth.New(opt)
		for range 4000 {
			for _, a := range g.Call(at) {
				if a.AttemptNo > 1 {
					continue
				}
				if a.Org == "acme-prod" {
					c.prod++
				} else {
					c.other++
				}
				if a.HTTPStatus == 429 && a.RateLimits != nil && a.RateLimits.Requests.Remaining == 0 {
					c.limited429++
				}
				switch {
				case a.RateLimits == nil:
				case a.Provider == "anthropic" && !a.RateLimits.InputTokens.Reported():
					t.Fatalf("an Anthropic attempt without its input token limit: %+v", a.RateLimits)
				case a.Provider == "openai" && a.RateLimits.InputTokens.Reported():
					t.Fatalf("an OpenAI attempt with an input token limit: %+v", a.RateLimits)
				}
			}
		}
		return c
	}
	in, before := countAt(rush.From.Add(10*time.Minute)), countAt(rush.From.Add(-10*time.Minute))
	// acme-prod's services carry 72% of the calls: in the rush 3 × 72 against 28.
	if r := float64(in.prod) / float64(in.other); r < 6.8 || r > 8.8 {
		t.Errorf("in the rush %d acme-prod calls to %d others: ratio %.1f, want about 7.7", in.prod, in.other, r)
	}
	if r := float64(before.prod) / float64(before.other); r < 2.2 || r > 3 {
		t.Errorf("before the rush %d acme-prod calls to %d others: ratio %.1f, want about 2.6", before.prod, before.other, r)
	}
	if in.limited429 < in.prod/10 || before.limited429 != 0 {
		t.Errorf("429s over the limit: %d of %d in the rush, %d before it; want a good share in it and none before",
			in.limited429, in.prod, before.limited429)
	}
}
