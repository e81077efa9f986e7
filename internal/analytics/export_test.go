package analytics

import "context"

// SummaryRaw is Summary always read from the raw attempts (rawPlan), which can answer every
// summary, so tests can check that the rollup plans answer the same.
func (s *Service) SummaryRaw(ctx context.Context, f Filter, groupBy ...string) (Summary, error) {
	return s.summary(ctx, f, func(grouping, Filter) plan { return rawPlan }, groupBy)
}
