package analytics

import (
	"context"
	"fmt"
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
