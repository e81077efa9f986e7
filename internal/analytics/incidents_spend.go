package analytics

import (
	"slices"
	"time"

	"github.com/ledgerd/ledgerd/money"
)

// spendRange is what spendIncidents reads of [from, to): from SpendDays before from, for the usual
// spend, to the end of the current hour, but never past to.
func spendRange(from, to, now time.Time, p IncidentParams) (readFrom, readTo time.Time) {
	readFrom, readTo = from.AddDate(0, 0, -p.SpendDays), to
	if end := now.Truncate(time.Hour).Add(time.Hour); end.Before(readTo) {
		readTo = end
	}
	return readFrom, readTo
}

// spendIncidents finds the spend spikes that overlap [from, to): runs of hours whose spend passed
// SpendFactor times the usual spend of that local hour of the day (the median over the SpendDays
// days before; days without spend count as nothing spent) by at least MinExtraSpend. The hourly
// spend and calls are the models' hours of spendRange (hours may hold more) added up.
func (s *Service) spendIncidents(from, to, now time.Time, hours []modelHour, p IncidentParams) []Incident {
	readFrom, readTo := spendRange(from, to, now, p)
	hours = hoursIn(hours, readFrom, readTo)
	spend := map[int64]money.Nanos{}
	calls := map[int64]int64{}
	for _, h := range hours {
		spend[h.hour] += h.cost
		calls[h.hour] += h.calls
	}
	var out []Incident
	var cur *Incident
	end := func(at time.Time) {
		if cur != nil {
			e := at
			cur.EndedAt = &e
			out = append(out, *cur)
			cur = nil
		}
	}
	for h := from.Truncate(time.Hour); h.Before(readTo); h = h.Add(time.Hour) {
		usual := s.usualSpend(spend, h, p.SpendDays)
		got := spend[h.Unix()]
		if got > usual*money.Nanos(p.SpendFactor) && got-usual >= p.MinExtraSpend {
			if cur == nil {
				cur = &Incident{Kind: KindSpendSpike, StartedAt: h}
				var zero money.Nanos
				cur.ExtraUSD = &zero
			}
			*cur.ExtraUSD += got - usual
			cur.CallsAffected += calls[h.Unix()]
			continue
		}
		end(h)
	}
	if cur != nil {
		if last := readTo.Add(-time.Hour); now.Before(readTo) && !now.Before(last) {
			out = append(out, *cur) // the current hour still spikes: open
		} else {
			end(readTo)
		}
	}
	return out
}

// usualSpend is the median spend of the same local hour of the day as h over the days days
// before it (the lower middle of an even count).
func (s *Service) usualSpend(spend map[int64]money.Nanos, h time.Time, days int) money.Nanos {
	v := make([]money.Nanos, 0, days)
	for d := 1; d <= days; d++ {
		v = append(v, spend[h.In(s.tz).AddDate(0, 0, -d).Unix()])
	}
	slices.Sort(v)
	return v[(len(v)-1)/2]
}
