package analytics

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
)

// SummaryRaw is Summary always read from the raw attempts (rawPlan), which can answer every
// summary, so tests can check that the rollup plans answer the same.
func (s *Service) SummaryRaw(ctx context.Context, f Filter, groupBy ...string) (Summary, error) {
	return s.summary(ctx, f, func(grouping, Filter) plan { return rawPlan }, groupBy)
}

// RankCosts is the cost of each group that SummaryTop ranks by (the plan's cost statement), so
// tests can check it against the groups' costs Summary gives.
func (s *Service) RankCosts(ctx context.Context, f Filter, dim string) (map[string]int64, error) {
	g, err := parseGrouping([]string{dim})
	if err != nil {
		return nil, err
	}
	p, from, to, err := s.rangeOf(g, f, planFor(g, f))
	if err != nil {
		return nil, err
	}
	var (
		k        string
		fallback bool
		cost     int64
	)
	out := map[string]int64{}
	q := `SELECT x.` + dimSQL[dim] + `::text, x.fallback, x.cost_nanos FROM (` + fmt.Sprintf(p.cost, g.columns(p.seriesAlias())) + `) x`
	err = s.read(ctx, q, s.planArgs(f, g, p, from, to), []any{&k, &fallback, &cost}, func() error {
		out[k] += cost
		return nil
	})
	return out, err
}

// TodayChanged is how many groups of a summary grouped by groupBy over today (as a month's range
// reads it, today.go) the next such summary reads again: those with rows written by transactions
// the kept snapshot did not see, or all when the day's row of rollup_days was made again. It reads them into a
// copy of what is kept.
func (s *Service) TodayChanged(ctx context.Context, f Filter, groupBy ...string) (int, error) {
	g, err := parseGrouping(groupBy)
	if err != nil {
		return 0, err
	}
	p, _, _, err := s.rangeOf(g, f, planFor(g, f))
	if err != nil {
		return 0, err
	}
	today := dateOf(s.now(), s.tz)
	key := summaryKey(g, p, f, p.sums)
	key.from, key.to = today, today.addDays(1)
	d, ok := s.todays.get(key, nil)
	if !ok {
		return 0, errors.New("today is not kept")
	}
	d.mu.Lock()
	c := &dayRows{state: d.state, rows: map[gkey][]idRow{}}
	for k, rows := range d.rows {
		c.rows[k] = slices.Clone(rows)
	}
	d.mu.Unlock()
	end := today.addDays(1).civil()
	args := s.args(f, source{dayFrom: today.civil(), dayTo: end, edges: [2][2]time.Time{{end, end}, {end, end}}})
	var changed map[gkey]bool
	err = s.readSnapshot(ctx, func(q queryFunc) (err error) {
		_, changed, err = c.changes(q, g, p, args)
		return err
	})
	return len(changed), err
}

// CacheModelsTodayChanged is how many series shapes (with a fallback flag) of the project's
// today the cache report's next read of its models reads again (cache_models.go): those with rows
// written by transactions the kept snapshot did not see, or all when the day's row of rollup_days
// was made again. It reads them into a copy of what is kept.
func (s *Service) CacheModelsTodayChanged(ctx context.Context, project int64) (int, error) {
	k := dayKey{project, dateOf(s.now(), s.tz)}
	m, ok := s.modelDays.get(k, nil)
	if !ok {
		return 0, errors.New("today's models are not kept")
	}
	m.mu.Lock()
	c := &dayModels{state: m.state, rows: map[shapeKey]map[[2]string][]int64{}}
	for k, rows := range m.rows {
		c.rows[k] = maps.Clone(rows)
	}
	m.mu.Unlock()
	var changed map[shapeKey]bool
	err := s.readSnapshot(ctx, func(q queryFunc) (err error) {
		_, changed, err = c.changes(q, k)
		return err
	})
	return len(changed), err
}
