package reprice

import (
	"regexp"
	"slices"
	"testing"

	"github.com/ledgerd/ledgerd/internal/rollup"
)

// TestDeltaColumns guards against a rollup sum the writer derives from an attempt's cost (or cost
// without caching) that a reprice would leave uncorrected.
func TestDeltaColumns(t *testing.T) {
	t.Parallel()
	costly := regexp.MustCompile(`\b(cost_nanos|nocache_cost_nanos)\b`)
	for _, c := range []struct {
		table string
		sums  []rollup.Sum
		cols  []string
	}{
		{"rollup_hourly and rollup_daily", rollup.Sums, rollupDeltaCols},
		{"rollup_cache_hourly", rollup.CacheSums, cacheDeltaCols},
	} {
		for _, s := range c.sums {
			if depends, corrected := costly.MatchString(s.Expr), slices.Contains(c.cols, s.Col); depends != corrected {
				t.Errorf("%s.%s (%s): depends on the cost %v, corrected by a reprice %v", c.table, s.Col, s.Expr, depends, corrected)
			}
		}
	}
}
