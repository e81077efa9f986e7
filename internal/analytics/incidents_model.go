package analytics

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ledgerd/ledgerd/money"
)

// modelMinutesSQL counts the raw attempts of [@from, @to) per UTC minute, provider, model,
// fallback flag and the model a fallback stood in for: attempts, first attempts (calls), failed
// attempts (status error), answers (status ok), the cost of the priced attempts, that of the
// priced attempts that gave no answer, and the unpriced attempts.
const modelMinutesSQL = `SELECT date_trunc('minute', a.started_at, 'UTC'), s.provider, s.model, a.fallback, s.fallback_from,
		count(*), count(*) FILTER (WHERE a.attempt_no = 1), count(*) FILTER (WHERE a.status = 'error'),
		count(*) FILTER (WHERE a.status = 'ok'), coalesce(sum(a.cost_nanos), 0)::int8,
		coalesce(sum(a.cost_nanos) FILTER (WHERE a.status <> 'ok'), 0)::int8, count(*) FILTER (WHERE a.cost_nanos IS NULL)
	FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id
	WHERE a.project_id = @project AND a.started_at >= @from AND a.started_at < @to
	GROUP BY 1, 2, 3, 4, 5 ORDER BY 1`

// recoverySQL counts, per RecoveryWindow (@window seconds) from @end up to @until, the logical
// calls of model @model (@provider) that began in it (their first attempt) and how many of them got
// an answer, from the model or a fallback standing in for it.
const recoverySQL = `WITH c AS (
		SELECT a.request_id, min(a.started_at) FILTER (WHERE a.attempt_no = 1 AND NOT a.fallback) AS t0,
			bool_or(a.status = 'ok') AS ok
		FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id
		WHERE a.project_id = @project AND a.started_at >= @end AND a.started_at < @until
			AND ((s.provider = @provider AND s.model = @model AND NOT a.fallback) OR (a.fallback AND s.fallback_from = @model))
		GROUP BY 1
	)
	SELECT floor(extract(epoch FROM t0 - @end) / @window)::int8, count(*), count(*) FILTER (WHERE ok)
	FROM c WHERE t0 IS NOT NULL GROUP BY 1 ORDER BY 1`

// modelKey is a model as incidents scope it.
type modelKey struct{ provider, model string }

// minuteCounts are a model's counts in one minute: its own attempts', and those of the fallback
// attempts that stood in for it.
type minuteCounts struct {
	attempts, calls, failed, ok, cost, wasted, unpriced int64
	fbAttempts, fbOK, fbCost, fbWasted, fbUnpriced      int64
}

func (c *minuteCounts) add(o minuteCounts) {
	c.attempts += o.attempts
	c.calls += o.calls
	c.failed += o.failed
	c.ok += o.ok
	c.cost += o.cost
	c.wasted += o.wasted
	c.unpriced += o.unpriced
	c.fbAttempts += o.fbAttempts
	c.fbOK += o.fbOK
	c.fbCost += o.fbCost
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

// modelIncidents detects the error spikes, retry storms and fallback surges that overlap
// [from, to), reading an hour before from (to find where they began) and up to RecoveryLimit after
// to, but never past now.
func (s *Service) modelIncidents(ctx context.Context, project int64, from, to, now time.Time, p IncidentParams) ([]Incident, error) {
	readFrom, readTo := from.Add(-time.Hour), to.Add(p.RecoveryLimit)
	if readTo.After(now) {
		readTo = now
	}
	minutes := map[modelKey]map[int64]*minuteCounts{}
	providerOf := map[string]string{}
	var (
		at                   time.Time
		provider, model, fbf string
		fallback             bool
		c                    minuteCounts
	)
	type fbRow struct {
		minute int64
		model  string
		c      minuteCounts
	}
	var fbRows []fbRow
	args := map[string]any{"project": project, "from": readFrom, "to": readTo}
	err := s.read(ctx, modelMinutesSQL, args, []any{&at, &provider, &model, &fallback, &fbf,
		&c.attempts, &c.calls, &c.failed, &c.ok, &c.cost, &c.wasted, &c.unpriced}, func() error {
		m := at.Unix()
		if fallback {
			// A fallback attempt counts for the model it stood in for, found below.
			fbRows = append(fbRows, fbRow{m, fbf, minuteCounts{fbAttempts: c.attempts, fbOK: c.ok, fbCost: c.cost,
				fbWasted: c.wasted, fbUnpriced: c.unpriced}})
			return nil
		}
		providerOf[model] = provider
		k := modelKey{provider, model}
		if minutes[k] == nil {
			minutes[k] = map[int64]*minuteCounts{}
		}
		if minutes[k][m] == nil {
			minutes[k][m] = &minuteCounts{}
		}
		minutes[k][m].add(c)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("incidents: %w", err)
	}
	for _, r := range fbRows {
		if r.model == "" {
			continue
		}
		k := modelKey{providerOf[r.model], r.model}
		if minutes[k] == nil {
			minutes[k] = map[int64]*minuteCounts{}
		}
		if minutes[k][r.minute] == nil {
			minutes[k][r.minute] = &minuteCounts{}
		}
		minutes[k][r.minute].add(r.c)
	}
	var out []Incident
	for k, byMinute := range minutes {
		for _, in := range detectModel(k, byMinute, readTo, p) {
			if !overlaps(in.StartedAt, in.EndedAt, from, to) {
				continue
			}
			if in.EndedAt != nil {
				if in.RecoverySeconds, err = s.recovery(ctx, project, k, *in.EndedAt, now, p); err != nil {
					return nil, err
				}
			}
			out = append(out, in)
		}
	}
	return out, nil
}

// detectModel finds a model's incidents in its minutes (Unix seconds of each minute), read up to
// end.
func detectModel(k modelKey, byMinute map[int64]*minuteCounts, end time.Time, p IncidentParams) []Incident {
	var total minuteCounts
	keys := make([]int64, 0, len(byMinute))
	for m, c := range byMinute {
		keys = append(keys, m)
		total.add(*c)
	}
	slices.Sort(keys)
	threshold := p.ErrorFloor
	if total.attempts > 0 {
		threshold = max(threshold, p.ErrorFactor*float64(total.failed)/float64(total.attempts))
	}
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

// recovery is the recovery time of a model's incident that ended at end (RecoverySeconds), looked
// for up to RecoveryLimit after it and never past now.
func (s *Service) recovery(ctx context.Context, project int64, k modelKey, end, now time.Time, p IncidentParams) (*int64, error) {
	until := end.Add(p.RecoveryLimit)
	if until.After(now) {
		until = now
	}
	window := int64(p.RecoveryWindow / time.Second)
	var (
		w, calls, ok int64
		found        *int64
	)
	args := map[string]any{"project": project, "end": end, "until": until, "provider": k.provider, "model": k.model, "window": window}
	err := s.read(ctx, recoverySQL, args, []any{&w, &calls, &ok}, func() error {
		if found == nil && calls > 0 && float64(ok) >= p.RecoveryShare*float64(calls) {
			sec := w * window
			found = &sec
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("incident recovery: %w", err)
	}
	return found, nil
}
