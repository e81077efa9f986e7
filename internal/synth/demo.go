package synth

import "time"

// DemoDays is the length of the demo history.
const DemoDays = 30

// Demo returns the options of the demo ledger: DemoDays of history ending at end, counted in loc,
// with one incident of each kind so that every page and alert has something to show:
//   - an outage of claude-sonnet-5-5, five days before end, 09:30 to 11:30, served by gpt-4o for
//     support-bot (fallback: true, fallback_from: claude-sonnet-5-5);
//   - support-bot's cache broken by a deploy three days before end at 16:00 and still broken at
//     end: every call writes the prefix, none reads it;
//   - a retry storm on claude-haiku-5-5 in the last 45 minutes before end, set off by a traffic
//     surge (five times the usual rate), so the alerts that judge the last minutes see it;
//   - a Monday-morning rush on the org acme-prod, the last Monday before end from 09:00 to 09:40:
//     its services send three times their calls, over its rate limits, and get 429s.
//
// The services bill to three orgs (DemoOrgs), which report rate limits (DemoLimits) once the caller
// sets Rate (CallsPerMinute of the records it draws).
func Demo(seed int64, end time.Time, loc *time.Location) Options {
	if loc == nil {
		loc = time.UTC
	}
	end = end.In(loc)
	day := func(back int, hour, minute int) time.Time {
		d := end.AddDate(0, 0, -back)
		return time.Date(d.Year(), d.Month(), d.Day(), hour, minute, 0, 0, loc)
	}
	monday := 0 // days back to the last Monday whose rush has ended by end
	for end.AddDate(0, 0, -monday).Weekday() != time.Monday || day(monday, 9, 40).After(end) {
		monday++
	}
	services := DefaultServices()
	for i := range services {
		services[i].Orgs = DemoOrgs[services[i].Name]
	}
	return Options{
		Seed:     seed,
		Start:    end.AddDate(0, 0, -DemoDays),
		End:      end,
		Location: loc,
		Services: services,
		Limits:   DemoLimits,
		Incidents: []Incident{
			{Kind: Outage, Model: Sonnet55.Name, From: day(5, 9, 30), To: day(5, 11, 30)},
			{Kind: BrokenCache, Service: "support-bot", From: day(3, 16, 0), To: end.Add(time.Hour)},
			{Kind: RetryStorm, Model: Haiku55.Name, From: end.Add(-45 * time.Minute), To: end.Add(time.Hour), Traffic: 5},
			{Kind: Rush, Org: "acme-prod", From: day(monday, 9, 0), To: day(monday, 9, 40), Traffic: 3},
		},
	}
}

// DemoOrgs are the orgs the demo's services bill to, per service and provider: most Anthropic
// traffic shares acme-prod's limits, code review has an org of its own, and every OpenAI call
// (extraction, and support-bot's fallback) bills to acme-openai.
var DemoOrgs = map[string]map[string]string{
	"support-bot":       {"anthropic": "acme-prod", "openai": "acme-openai"},
	"search-summarizer": {"anthropic": "acme-prod"},
	"digest-mailer":     {"anthropic": "acme-prod"},
	"nightly-eval":      {"anthropic": "acme-prod"},
	"code-review":       {"anthropic": "acme-eng"},
	"extractor":         {"openai": "acme-openai", "anthropic": "acme-prod"},
}

// DemoLimits are the demo orgs' rate limits: acme-prod's leave little room at the busiest hour.
var DemoLimits = []Limit{
	{Org: "acme-prod", Model: Sonnet55.Name, Headroom: 1.6},
	{Org: "acme-prod", Model: Haiku55.Name, Headroom: 1.6},
	{Org: "acme-eng", Model: Sonnet4.Name, Headroom: 2.5},
	{Org: "acme-openai", Model: GPT4o.Name, Headroom: 2},
}
