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
//     surge (five times the usual rate), so the alerts that judge the last minutes see it.
func Demo(seed int64, end time.Time, loc *time.Location) Options {
	if loc == nil {
		loc = time.UTC
	}
	end = end.In(loc)
	day := func(back int, hour, minute int) time.Time {
		d := end.AddDate(0, 0, -back)
		return time.Date(d.Year(), d.Month(), d.Day(), hour, minute, 0, 0, loc)
	}
	return Options{
		Seed:     seed,
		Start:    end.AddDate(0, 0, -DemoDays),
		End:      end,
		Location: loc,
		Incidents: []Incident{
			{Kind: Outage, Model: Sonnet55.Name, From: day(5, 9, 30), To: day(5, 11, 30)},
			{Kind: BrokenCache, Service: "support-bot", From: day(3, 16, 0), To: end.Add(time.Hour)},
			{Kind: RetryStorm, Model: Haiku55.Name, From: end.Add(-45 * time.Minute), To: end.Add(time.Hour), Traffic: 5},
		},
	}
}
