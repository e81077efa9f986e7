package analytics

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// The incidents' hours and minutes of the days before today, kept between reads. A month of
// incidents reads every model's hours of some five weeks (the spend's usual level looks a week
// back) and the minutes of each hour worth a look, on every read, where only today's change while
// calls come in. rollup_hourly_model changes only in a fold's first statement, a reprice or a
// rebuild, and rollup_model_minute only in a fold's load statement, a reprice or a rebuild: each
// writes the rows of rollup_days of the local days it changes (internal/rollup/days.go). So the
// Service keeps the hours of each local day before today (s.hours), and the minutes of each
// candidate window that ends before today (s.minutes), with the xmins of the rows of the days they
// fall in, read before the hours and minutes were.

// windowKey is the minutes of a model's window [lo, hi) (Unix seconds) of a project.
type windowKey struct {
	project int64
	model   string
	lo, hi  int64
}

// minuteRow is a row of modelMinutesSQL: the counts of a model (or of a fallback standing in for
// fallbackFrom) in the minute at (Unix seconds).
type minuteRow struct {
	at                            int64
	provider, model, fallbackFrom string
	fallback                      bool
	c                             minuteCounts
}

// incidentDays are the versions of the project's local days the incidents read may cover: from the
// day before from's to today's.
func (s *Service) incidentDays(ctx context.Context, project int64, from, now time.Time) (map[date]int64, error) {
	days, err := s.dayVersions(ctx, project, dateOf(from, s.tz).addDays(-1), dateOf(now, s.tz).addDays(1))
	if err != nil {
		return nil, fmt.Errorf("incidents: %w", err)
	}
	return days, nil
}

// spanVersions are the versions (days) of the local days the instants [lo, hi) fall in, and
// whether all of them are before today (now's): only then may what they hold be kept.
func (s *Service) spanVersions(lo, hi, now time.Time, days map[date]int64) ([]int64, bool) {
	last, today := dateOf(hi.Add(-time.Nanosecond), s.tz), dateOf(now, s.tz)
	if !last.before(today) {
		return nil, false
	}
	return versionsOf(days, dateOf(lo, s.tz), last.addDays(1)), true
}

// hourDay is a local day's hours, as the incidents keep them: from the UTC hour its first instant
// falls in to the one the next day's does. Each UTC hour is of one day, though in a timezone whose
// offset is not whole hours an hour holds the end of one day and the start of the next.
func (s *Service) hourDay(d date) (lo, hi time.Time) {
	return d.start(s.tz).Truncate(time.Hour), d.addDays(1).start(s.tz).Truncate(time.Hour)
}

// modelHours reads the hours of [from, to) by model (modelHoursSQL): once for the incidents, whose
// model and spend detection each take the hours of their own range (hoursIn). The hours of each
// local day before today's (now's) that [from, to) holds whole are kept in s.hours as of the
// versions of its days (days, read before); only the hours not kept are read, in one statement.
func (s *Service) modelHours(ctx context.Context, project int64, from, to, now time.Time, days map[date]int64) ([]modelHour, error) {
	type dayPart struct {
		key      keptDay
		lo, hi   time.Time
		versions []int64
		hours    []modelHour
		kept     bool
	}
	var parts []dayPart
	for d := dateOf(from, s.tz); ; d = d.addDays(1) {
		lo, hi := s.hourDay(d)
		vs, ok := s.spanVersions(lo, hi, now, days)
		if !ok || hi.After(to) {
			break
		}
		if lo.Before(from) {
			continue
		}
		part := dayPart{key: keptDay{project, d}, lo: lo, hi: hi, versions: vs}
		part.hours, part.kept = s.hours.get(part.key, vs)
		parts = append(parts, part)
	}
	// The ranges to read: before and after the days kept, and each day not kept.
	var los, his []time.Time
	add := func(lo, hi time.Time) {
		if !lo.Before(hi) {
			return
		}
		if n := len(his); n > 0 && his[n-1].Equal(lo) {
			his[n-1] = hi
			return
		}
		los, his = append(los, lo), append(his, hi)
	}
	rest := [2]time.Time{to, to}
	if len(parts) > 0 {
		rest = [2]time.Time{parts[0].lo, parts[len(parts)-1].hi}
	}
	add(from, rest[0])
	for _, p := range parts {
		if !p.kept {
			add(p.lo, p.hi)
		}
	}
	add(rest[1], to)

	var (
		out []modelHour
		h   modelHour
		at  time.Time
	)
	if len(los) > 0 {
		err := s.read(ctx, modelHoursSQL, map[string]any{"project": project, "los": los, "his": his},
			[]any{&at, &h.model, &h.fallback, &h.fallbackFrom, &h.attempts, &h.calls, &h.failed, &h.okay, &h.cost}, func() error {
				h.hour = at.Unix()
				// The day of parts the hour is of, if any.
				if i := sort.Search(len(parts), func(i int) bool { return parts[i].hi.After(at) }); i < len(parts) && !at.Before(parts[i].lo) {
					parts[i].hours = append(parts[i].hours, h)
					return nil
				}
				out = append(out, h)
				return nil
			})
		if err != nil {
			return nil, fmt.Errorf("incidents: model hours: %w", err)
		}
	}
	for _, p := range parts {
		if !p.kept {
			s.hours.put(p.key, p.versions, p.hours, len(p.hours))
		}
		out = append(out, p.hours...)
	}
	return out, nil
}

// windowMinutes reads the minutes of the models' windows [mlos[i], mhis[i]) of models names[i]
// (modelMinutesSQL), each window's rows in order of their minute. Those of a window that ends
// before today (now's) are kept in s.minutes as of the versions of its days (days, read before);
// only the windows not kept are read, in one statement.
func (s *Service) windowMinutes(ctx context.Context, project int64, mlos, mhis []time.Time, names []string, now time.Time,
	days map[date]int64) ([][]minuteRow, error) {
	out := make([][]minuteRow, len(names))
	var missing []int
	keys := make([]windowKey, len(names))
	versions := make([][]int64, len(names)) // nil: not to be kept
	for i := range names {
		keys[i] = windowKey{project, names[i], mlos[i].Unix(), mhis[i].Unix()}
		if vs, ok := s.spanVersions(mlos[i], mhis[i], now, days); ok {
			versions[i] = vs
			if rows, kept := s.minutes.get(keys[i], vs); kept {
				out[i] = rows
				continue
			}
		}
		missing = append(missing, i)
	}
	if len(missing) == 0 {
		return out, nil
	}
	rlos, rhis, rnames := make([]time.Time, len(missing)), make([]time.Time, len(missing)), make([]string, len(missing))
	for j, i := range missing {
		rlos[j], rhis[j], rnames[j] = mlos[i], mhis[i], names[i]
	}
	los, his, spanOf := spans(rlos, rhis)
	var (
		r  minuteRow
		at time.Time
		w  int64
	)
	args := map[string]any{"project": project, "los": los, "his": his, "spans": spanOf, "mlos": rlos, "mhis": rhis, "models": rnames}
	err := s.read(ctx, modelMinutesSQL, args, []any{&w, &at, &r.provider, &r.model, &r.fallback, &r.fallbackFrom,
		&r.c.attempts, &r.c.calls, &r.c.failed, &r.c.ok, &r.c.wasted, &r.c.unpriced}, func() error {
		r.at = at.Unix()
		i := missing[w-1]
		out[i] = append(out[i], r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("incidents: %w", err)
	}
	for _, i := range missing {
		if versions[i] != nil {
			s.minutes.put(keys[i], versions[i], out[i], len(out[i]))
		}
	}
	return out, nil
}
