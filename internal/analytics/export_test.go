package analytics

import "context"

// SummaryBySeries is Summary always read by the bySeries plan, which can answer every summary, so
// tests can check that the narrow plans answer the same.
func (s *Service) SummaryBySeries(ctx context.Context, f Filter, groupBy ...string) (Summary, error) {
	return s.summary(ctx, f, func(grouping, Filter) plan { return bySeries }, groupBy)
}
