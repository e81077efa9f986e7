package analytics

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ledgerd/ledgerd/money"
)

// modelMinutesSQL reads the minutes of rollup_model_minute (the load rollup's, summed over org and
// service) that start in the windows [@mlos[i], @mhis[i]) of the models @models[i] (a model's
// windows do not overlap, so a row falls in one window at most), per UTC minute, provider, model,
// fallback flag and the model a fallback stood in for: the model's own attempts and the fallback
// attempts that stood in for it; attempts, first attempts (calls), failed attempts (status error),
// answers (status ok), the cost of the priced attempts that gave no answer, and the unpriced
// attempts. The rollup is scanned once over each span [@los[j], @his[j]) of the windows merged
// across models, by its own range scan of the rollup's key (OFFSET 0 keeps the planner from
// flattening the spans into one scan of every minute): the models' windows overlap where an
// outage hits several models at once, and scanning each model's windows apart read those minutes
// once per model. Each window is joined to the rows of its span (@spans[i], from 1) and model only,
// and its rows come together, in order of their minute, after its number (from 1).
const modelMinutesSQL = `SELECT m.w, r.bucket, r.provider, r.model, r.fallback, r.fallback_from,
		r.requests, r.calls, r.failed, r.answered, r.wasted_nanos, r.unpriced_attempts
	FROM unnest(@los::timestamptz[], @his::timestamptz[]) WITH ORDINALITY w(lo, hi, span)
	CROSS JOIN LATERAL (SELECT * FROM rollup_model_minute r WHERE r.project_id = @project AND r.bucket >= w.lo
		AND r.bucket < w.hi OFFSET 0) r
	JOIN unnest(@spans::int8[], @mlos::timestamptz[], @mhis::timestamptz[], @models::text[]) WITH ORDINALITY m(span, lo, hi, model, w)
		ON m.span = w.span AND m.model = CASE WHEN r.fallback THEN r.fallback_from ELSE r.model END
		AND r.bucket >= m.lo AND r.bucket < m.hi
	ORDER BY 1, 2`

// recoverySQL counts, for each ended incident i (the arrays @idx, @ends, @los, @his, @wends,
// @providers, @models), per RecoveryWindow (@window seconds) from its end e, the logical calls of
// its model that began in [lo, wend) (their first attempt) and how many of them got an answer, from
// the model or a fallback standing in for it, by an attempt that began at most RecoveryReach
// (@reach seconds) after the window's end. Attempts are read from [lo, hi), hi being wend and the
// reach (or now): a call that began before lo is another read's. Each incident's attempts are read
// by their own range scan (OFFSET 0, as in modelMinutesSQL).
const recoverySQL = `WITH c AS (
		SELECT w.i, w.e, w.wend, a.request_id, min(a.started_at) FILTER (WHERE a.attempt_no = 1 AND NOT a.fallback) AS t0,
			min(a.started_at) FILTER (WHERE a.status = 'ok') AS answered
		FROM unnest(@idx::int4[], @ends::timestamptz[], @los::timestamptz[], @his::timestamptz[], @wends::timestamptz[],
			@providers::text[], @models::text[]) w(i, e, lo, hi, wend, provider, model)
		CROSS JOIN LATERAL (SELECT * FROM attempts a WHERE a.project_id = @project AND a.started_at >= w.lo AND a.started_at < w.hi
			OFFSET 0) a
		JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id
		WHERE (s.provider = w.provider AND s.model = w.model AND NOT a.fallback) OR (a.fallback AND s.fallback_from = w.model)
		GROUP BY 1, 2, 3, 4
	), n AS (
		SELECT i, e, answered, floor(extract(epoch FROM t0 - e) / @window)::int8 AS win FROM c WHERE t0 < wend
	)
	SELECT i, win, count(*),
		count(*) FILTER (WHERE answered < e + make_interval(secs => (win + 1) * @window + @reach))
	FROM n GROUP BY 1, 2 ORDER BY 1, 2`

// modelHoursSQL reads rollup_hourly_model over the ranges [@los[i], @his[i]) (which do not
// overlap), each by its own range scan (OFFSET 0, as in modelMinutesSQL), per UTC hour, model,
// fallback flag and the model a fallback stood in for: attempts, calls (first attempts), failed
// attempts (status error), answers and the cost of the priced attempts. Only these five of its
// sums: the summary's statement reads them all.
const modelHoursSQL = `SELECT r.bucket, r.model, r.fallback, r.fallback_from, sum8(r.attempts), sum8(r.requests),
		coalesce(sum8(r.attempts) FILTER (WHERE r.status = 'error'), 0), coalesce(sum8(r.attempts) FILTER (WHERE r.status = 'ok'), 0),
		sum8(r.cost_nanos)
	FROM unnest(@los::timestamptz[], @his::timestamptz[]) w(lo, hi)
	CROSS JOIN LATERAL (SELECT * FROM rollup_hourly_model r WHERE r.project_id = @project AND r.bucket >= w.lo
		AND r.bucket < w.hi OFFSET 0) r
	GROUP BY 1, 2, 3, 4`

// modelHour is a model's counts in one hour (Unix seconds): its own, or (fallback) those of a
// fallback model standing in for fallbackFrom.
type modelHour struct {
	hour                          int64
	model, fallbackFrom           string
	fallback                      bool
	attempts, calls, failed, okay int64
	cost                          money.Nanos
}

// hoursIn is the hours of hours that start in [from, to).
func hoursIn(hours []modelHour, from, to time.Time) []modelHour {
	var out []modelHour
	for _, h := range hours {
		if at := time.Unix(h.hour, 0); !at.Before(from) && at.Before(to) {
			out = append(out, h)
		}
	}
	return out
}

// window is a span of a model's minutes worth reading.
type window struct {
	model  string
	lo, hi time.Time
}

// candidates are the windows worth reading minute by minute, per model, found from the
// hourly rollups, and each model's error rate over all the hours (its baseline). An hour is a
// candidate for a model when its error rate passes a sixth of the way from the baseline to the
// model's threshold and it holds, with the busier of the hours beside it, MinFailed failed
// attempts; when its attempts per call pass a sixth of the way from 1 to StormAttempts and it
// holds, likewise, MinExtra extra attempts; or when it holds MinFallbacks fallback answers for the
// model: what a ten-minute incident leaves in an hour of steady traffic, and what an incident needs
// to be one (an hour of a quiet model whose few calls failed by chance is not read). Each candidate
// hour is read with the hours on either side, so a period that crosses into them is read whole.
// Only the model's minutes are read: what another model does in that hour cannot make an incident
// of it.
func candidates(hours []modelHour, p IncidentParams) ([]window, map[string]float64) {
	type tally struct{ attempts, failed, extra int64 }
	type modelAt struct {
		model string
		hour  int64
	}
	byHour := map[modelAt]tally{}
	for _, g := range hours {
		if g.fallback {
			continue
		}
		k := modelAt{g.model, g.hour}
		t := byHour[k]
		t.attempts += g.attempts
		t.extra += g.attempts - g.calls
		t.failed += g.failed
		byHour[k] = t
	}
	totals := map[string]tally{}
	for k, t := range byHour {
		m := totals[k.model]
		m.attempts += t.attempts
		m.failed += t.failed
		totals[k.model] = m
	}
	baseline := map[string]float64{}
	for m, t := range totals {
		if t.attempts > 0 {
			baseline[m] = float64(t.failed) / float64(t.attempts)
		}
	}
	// near is what the hour k holds, by f, with the busier of the hours beside it.
	near := func(k modelAt, f func(tally) int64) int64 {
		return f(byHour[k]) + max(f(byHour[modelAt{k.model, k.hour - 3600}]), f(byHour[modelAt{k.model, k.hour + 3600}]))
	}
	// A fallback's answers count for the model it stood in for, whatever the fallback model.
	answers := map[modelAt]int64{}
	for _, g := range hours {
		if g.fallback && g.fallbackFrom != "" {
			answers[modelAt{g.fallbackFrom, g.hour}] += g.okay
		}
	}
	hot := map[modelAt]bool{}
	for k, n := range answers {
		if n >= p.MinFallbacks {
			hot[k] = true
		}
	}
	for k, t := range byHour {
		b := baseline[k.model]
		cut := b + (max(p.ErrorFloor, p.ErrorFactor*b)-b)/6
		calls := t.attempts - t.extra
		if t.failed > 0 && float64(t.failed) >= cut*float64(t.attempts) && near(k, func(t tally) int64 { return t.failed }) >= p.MinFailed ||
			calls > 0 && float64(t.attempts) >= (1+(p.StormAttempts-1)/6)*float64(calls) && near(k, func(t tally) int64 { return t.extra }) >= p.MinExtra {
			hot[k] = true
		}
	}
	starts := make([]modelAt, 0, len(hot))
	for k := range hot {
		starts = append(starts, k)
	}
	slices.SortFunc(starts, func(a, b modelAt) int { return cmp.Or(cmp.Compare(a.model, b.model), cmp.Compare(a.hour, b.hour)) })
	var out []window
	for _, k := range starts {
		lo, hi := time.Unix(k.hour-3600, 0).UTC(), time.Unix(k.hour+7200, 0).UTC()
		if n := len(out); n > 0 && out[n-1].model == k.model && !lo.After(out[n-1].hi) {
			out[n-1].hi = hi
			continue
		}
		out = append(out, window{k.model, lo, hi})
	}
	return out, baseline
}

// spans merges the windows [los[i], his[i]) into the fewest spans that cover them, in order, and
// gives the span of each window, counted from 1.
func spans(los, his []time.Time) (outLo, outHi []time.Time, spanOf []int64) {
	idx := make([]int, len(los))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return los[a].Compare(los[b]) })
	spanOf = make([]int64, len(los))
	for _, i := range idx {
		if n := len(outLo); n > 0 && !los[i].After(outHi[n-1]) {
			if his[i].After(outHi[n-1]) {
				outHi[n-1] = his[i]
			}
			spanOf[i] = int64(n)
			continue
		}
		outLo, outHi = append(outLo, los[i]), append(outHi, his[i])
		spanOf[i] = int64(len(outLo))
	}
	return outLo, outHi, spanOf
}

// modelKey is a model as incidents scope it.
type modelKey struct{ provider, model string }

// minuteCounts are a model's counts in one minute: its own attempts', and those of the fallback
// attempts that stood in for it.
type minuteCounts struct {
	attempts, calls, failed, ok, wasted, unpriced int64
	fbAttempts, fbOK, fbWasted, fbUnpriced        int64
}

func (c *minuteCounts) add(o minuteCounts) {
	c.attempts += o.attempts
	c.calls += o.calls
	c.failed += o.failed
	c.ok += o.ok
	c.wasted += o.wasted
	c.unpriced += o.unpriced
	c.fbAttempts += o.fbAttempts
	c.fbOK += o.fbOK
	c.fbWasted += o.fbWasted
	c.fbUnpriced += o.fbUnpriced
}

// perCall is the attempts per call, own and fallback together; 0 without calls.
func (c minuteCounts) perCall() float64 {
	if c.calls == 0 {
		return 0
	}
	return float64(c.attempts+c.fbAttempts) / float64(c.calls)
}

// modelRange is what modelIncidents reads of [from, to): from an hour before from (to find where
// they began) to RecoveryLimit after to, but never past now.
func modelRange(from, to, now time.Time, p IncidentParams) (readFrom, readTo time.Time) {
	readFrom, readTo = from.Add(-time.Hour), to.Add(p.RecoveryLimit)
	if readTo.After(now) {
		readTo = now
	}
	return readFrom, readTo
}

// modelIncidents detects the error spikes, retry storms and fallback surges that overlap
// [from, to), from the models' hours of modelRange (hours may hold more) and the minutes of
// their candidate windows; only those still open when open, whose recovery is not looked for.
// days are the versions of the local days it may read (incidentDays), read before the hours.
func (s *Service) modelIncidents(ctx context.Context, project int64, from, to, now time.Time, hours []modelHour, days map[date]int64,
	p IncidentParams, open bool) ([]Incident, error) {
	readFrom, readTo := modelRange(from, to, now, p)
	windows, baseline := candidates(hoursIn(hours, readFrom, readTo), p)
	for i := range windows {
		if windows[i].lo.Before(readFrom) {
			windows[i].lo = readFrom
		}
		if windows[i].hi.After(readTo) {
			windows[i].hi = readTo
		}
	}
	// The minutes the windows overlap.
	mlos, mhis, names := make([]time.Time, len(windows)), make([]time.Time, len(windows)), make([]string, len(windows))
	for i, w := range windows {
		mlos[i], mhis[i], names[i] = w.lo.Truncate(time.Minute), w.hi.Add(time.Minute-1).Truncate(time.Minute), w.model
	}
	rows, err := s.windowMinutes(ctx, project, mlos, mhis, names, now, days)
	if err != nil {
		return nil, err
	}
	minutes := map[modelKey]map[int64]*minuteCounts{}
	add := func(k modelKey, minute int64, c minuteCounts) {
		if minutes[k] == nil {
			minutes[k] = map[int64]*minuteCounts{}
		}
		if minutes[k][minute] == nil {
			minutes[k][minute] = &minuteCounts{}
		}
		minutes[k][minute].add(c)
	}
	providerOf := map[string]string{}
	var fbRows []minuteRow
	for _, window := range rows {
		for _, r := range window {
			if r.fallback {
				// A fallback attempt counts for the model it stood in for, found below.
				fbRows = append(fbRows, r)
				continue
			}
			providerOf[r.model] = r.provider
			add(modelKey{r.provider, r.model}, r.at, r.c)
		}
	}
	for _, r := range fbRows {
		if r.fallbackFrom == "" {
			continue
		}
		add(modelKey{providerOf[r.fallbackFrom], r.fallbackFrom}, r.at,
			minuteCounts{fbAttempts: r.c.attempts, fbOK: r.c.ok, fbWasted: r.c.wasted, fbUnpriced: r.c.unpriced})
	}
	var out []Incident
	for k, byMinute := range minutes {
		for _, in := range detectModel(k, byMinute, baseline[k.model], readTo, p) {
			if !overlaps(in.StartedAt, in.EndedAt, from, to) || (open && !in.Open()) {
				continue
			}
			out = append(out, in)
		}
	}
	if err := s.recoveries(ctx, project, out, now, days, p); err != nil {
		return nil, err
	}
	return out, nil
}

// detectModel finds a model's incidents in its minutes (Unix seconds of each minute), read up to
// end, baseline being its error rate over the whole window.
func detectModel(k modelKey, byMinute map[int64]*minuteCounts, baseline float64, end time.Time, p IncidentParams) []Incident {
	keys := make([]int64, 0, len(byMinute))
	for m := range byMinute {
		keys = append(keys, m)
	}
	slices.Sort(keys)
	threshold := max(p.ErrorFloor, p.ErrorFactor*baseline)
	troubled := func(c *minuteCounts) bool {
		return c.failed > 0 && float64(c.failed) >= threshold*float64(c.attempts) ||
			c.calls > 0 && c.perCall() >= p.StormAttempts || c.fbOK > 0
	}
	gap := int64(p.Gap / time.Second)
	var out []Incident
	var (
		start, last int64
		sum         minuteCounts
		open        bool
	)
	flush := func() {
		if !open {
			return
		}
		open = false
		kind := ""
		extra := sum.attempts + sum.fbAttempts - sum.calls
		switch {
		case sum.calls > 0 && sum.perCall() >= p.StormAttempts && extra >= p.MinExtra &&
			float64(sum.ok) >= p.StormAnswered*float64(sum.calls):
			kind = KindRetryStorm
		case sum.failed >= p.MinFailed && float64(sum.failed) >= threshold*float64(sum.attempts):
			kind = KindErrorSpike
		case sum.fbOK >= p.MinFallbacks:
			kind = KindFallbackSurge
		default:
			return
		}
		in := Incident{Kind: kind, StartedAt: time.Unix(start, 0).UTC(), Provider: k.provider, Model: k.model,
			CallsAffected: sum.calls, FallbackAnswers: sum.fbOK, ExtraAttempts: max(extra, 0),
			FailedCalls: max(sum.calls-sum.ok-sum.fbOK, 0)}
		if n := sum.attempts + sum.fbAttempts; n > 0 && sum.unpriced+sum.fbUnpriced < n {
			w := money.Nanos(sum.wasted + sum.fbWasted)
			in.WastedUSD = &w
		}
		// Open while the last troubled minute is less than Gap before the end of what was read.
		if e := time.Unix(last+60, 0).UTC(); !e.Add(p.Gap).After(end) {
			in.EndedAt = &e
		}
		out = append(out, in)
	}
	for _, m := range keys {
		c := byMinute[m]
		if !troubled(c) {
			continue
		}
		if open && m-last-60 > gap {
			flush()
		}
		if !open {
			open, start, sum = true, m, minuteCounts{}
			// The minutes between troubled ones belong to the period: add them when it goes on.
		} else {
			for q := last + 60; q < m; q += 60 {
				if b, ok := byMinute[q]; ok {
					sum.add(*b)
				}
			}
		}
		sum.add(*c)
		last = m
	}
	flush()
	return out
}

// recoveries sets the recovery time (RecoverySeconds) of each ended incident of list, looked for
// up to RecoveryLimit after its end and never past now. Most incidents recover within minutes, so
// the first read covers RecoveryFirst after each end, and only the incidents it leaves without a
// recovery are read on to RecoveryLimit: a call counts where it began, and as answered only by an
// attempt within RecoveryReach of its window, so the two reads decide each window alike.
//
// The recovery of an incident that ended more than RecoveryLimit and RecoveryReach before now is
// kept (s.recovered) as of the versions (read before) of the local days its reads covered: their
// attempts change only by a fold, which writes the days' rows of rollup_days. A month's incidents are then read
// once, where each read of the raw attempts after some hundred ends took most of their time.
func (s *Service) recoveries(ctx context.Context, project int64, list []Incident, now time.Time, versions map[date]int64, p IncidentParams) error {
	var open []int
	reach := p.RecoveryLimit + p.RecoveryReach
	for i, in := range list {
		if in.EndedAt != nil {
			open = append(open, i)
		}
	}
	if len(open) == 0 {
		return nil
	}
	// keyOf is the kept recovery of list[i] and the versions of its days; ok false when its
	// recovery may still change as time passes.
	keyOf := func(i int) (k recoveryKey, vs []int64, ok bool) {
		in := list[i]
		k = recoveryKey{project: project, provider: in.Provider, model: in.Model, end: in.EndedAt.UnixNano(), params: p.recovery()}
		d0, d1 := dateOf(*in.EndedAt, s.tz), dateOf(in.EndedAt.Add(reach), s.tz)
		vs = []int64{versions[d0], versions[d1]}
		return k, vs, !in.EndedAt.Add(reach).After(now) && !d0.addDays(1).before(d1)
	}
	var read []int
	for _, i := range open {
		if k, vs, ok := keyOf(i); ok {
			if sec, kept := s.recovered.get(k, vs); kept {
				list[i].RecoverySeconds = sec
				continue
			}
		}
		read = append(read, i)
	}
	left := read
	var err error
	// The first read ends on a window's end, so that no window is split between the two.
	first := min((p.RecoveryFirst + p.RecoveryWindow - 1).Truncate(p.RecoveryWindow), p.RecoveryLimit)
	for _, span := range [][2]time.Duration{{0, first}, {first, p.RecoveryLimit}} {
		if len(left) == 0 {
			break
		}
		if left, err = s.recoveryRead(ctx, project, list, left, span[0], span[1], now, p); err != nil {
			return err
		}
	}
	for _, i := range read {
		if k, vs, ok := keyOf(i); ok {
			s.recovered.put(k, vs, list[i].RecoverySeconds, 1)
		}
	}
	return nil
}

// recoveryKey is an ended incident's model, end (Unix nanoseconds) and the parameters its recovery
// is looked for with.
type recoveryKey struct {
	project         int64
	provider, model string
	end             int64
	params          [5]float64
}

// recovery are the parameters that decide an incident's recovery.
func (p IncidentParams) recovery() [5]float64 {
	return [5]float64{float64(p.RecoveryWindow), p.RecoveryShare, float64(p.RecoveryReach), float64(p.RecoveryLimit), float64(p.RecoveryFirst)}
}

// recoveryRead looks for the recovery of the incidents at the indices open of list among the
// calls that began from lo to hi after each one's end (and before now), with recoverySQL, and
// returns the indices of those whose recovery it did not find.
func (s *Service) recoveryRead(ctx context.Context, project int64, list []Incident, open []int, lo, hi time.Duration, now time.Time, p IncidentParams) ([]int, error) {
	var (
		idx                   []int32
		ends, los, his, wends []time.Time
		providers, names      []string
		left                  []int
	)
	for _, i := range open {
		in := list[i]
		from, wend := in.EndedAt.Add(lo), in.EndedAt.Add(hi)
		if wend.After(now) {
			wend = now
		}
		if !from.Before(wend) {
			continue
		}
		left = append(left, i)
		idx, ends, los, wends = append(idx, int32(i)), append(ends, *in.EndedAt), append(los, from), append(wends, wend)
		read := wend.Add(p.RecoveryReach)
		if read.After(now) {
			read = now
		}
		his = append(his, read)
		providers, names = append(providers, in.Provider), append(names, in.Model)
	}
	if len(idx) == 0 {
		return nil, nil
	}
	window := int64(p.RecoveryWindow / time.Second)
	var (
		i        int32
		w, calls int64
		answered int64
	)
	args := map[string]any{"project": project, "idx": idx, "ends": ends, "los": los, "his": his, "wends": wends,
		"providers": providers, "models": names, "window": window, "reach": int64(p.RecoveryReach / time.Second)}
	err := s.read(ctx, recoverySQL, args, []any{&i, &w, &calls, &answered}, func() error {
		in := &list[i]
		if in.RecoverySeconds == nil && calls > 0 && float64(answered) >= p.RecoveryShare*float64(calls) {
			sec := w * window
			in.RecoverySeconds = &sec
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("incident recovery: %w", err)
	}
	return slices.DeleteFunc(left, func(i int) bool { return list[i].RecoverySeconds != nil }), nil
}
