package rollup

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The tenant spend rollup (rollup_tenant_spend, migration 00035): each tenant's cost in blocks of
// SpendSpans local days, for ranking the tenants by spend over a range in a few rows a tenant
// (SpendBlocks) rather than one per tenant, day, status and error class. The fold adds the same
// daily sums to it as to rollup_daily_tenant, reprice the same deltas, and a rebuild counts it from
// rollup_daily_tenant once that is recounted.

// SpendSpans are the block sizes of rollup_tenant_spend, in days, smallest first: each a multiple
// of the one before, so a range's blocks nest.
var SpendSpans = []int{1, 8, 64}

// spendEpoch is the day blocks are aligned from: a block of span n starts on a day whose number
// since it is a multiple of n.
var spendEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// spansSQL is spans as an SQL array literal.
func spansSQL(spans []int) string {
	var s []string
	for _, n := range spans {
		s = append(s, fmt.Sprint(n))
	}
	return "'{" + strings.Join(s, ",") + "}'::int2[]"
}

// spendBlockOf is the SQL for the first day of the block of span span holding the date day.
func spendBlockOf(day, span string) string {
	return fmt.Sprintf("%[1]s - (((%[1]s - date '2000-01-01') %% %[2]s + %[2]s) %% %[2]s)", day, span)
}

// SpendKeep are the series columns rollup_tenant_spend keeps: the narrow daily rollup keeping
// just these has its cost in spend blocks too. SpendKey is the table's primary key.
var (
	SpendKeep = []string{"tenant"}
	SpendKey  = slices.Concat([]string{"project_id", "span", "bucket"}, SpendKeep)
)

// SpendFrom is the SELECT of rollup_tenant_spend rows (SpendKey, cost_nanos) from rows r of daily
// sums (project_id, bucket: the local day, cost_nanos) with their tenant in the expression tenant,
// the rest of the FROM clause from: each day's cost added to its block of every span.
func SpendFrom(from, tenant string) string {
	return fmt.Sprintf(`SELECT r.project_id, sp.span, %s, %s, sum(r.cost_nanos)::int8
		FROM %s CROSS JOIN unnest(%s) AS sp(span) GROUP BY 1, 2, 3, 4`,
		spendBlockOf("r.bucket", "sp.span"), tenant, from, spansSQL(SpendSpans))
}

// spendFoldSQL is the fold's upsert of the daily rows per tenant bt into rollup_tenant_spend, in
// key order.
var spendFoldSQL = fmt.Sprintf(`INSERT INTO rollup_tenant_spend AS t (%[1]s, cost_nanos)
		SELECT * FROM (%[2]s) x ORDER BY 1, 2, 3, 4
		ON CONFLICT (%[1]s) DO UPDATE SET cost_nanos = t.cost_nanos + excluded.cost_nanos
		RETURNING 1`, strings.Join(SpendKey, ", "), SpendFrom("bt r", "r.tenant"))

// spendRebuildSteps count rollup_tenant_spend again from rollup_daily_tenant.
var spendRebuildSteps = []Step{
	{"clear rollup_tenant_spend", "DELETE FROM rollup_tenant_spend", nil},
	{"count rollup_tenant_spend", fmt.Sprintf(`INSERT INTO rollup_tenant_spend (%s, cost_nanos) SELECT * FROM (%s) x ORDER BY 1, 2, 3, 4`,
		strings.Join(SpendKey, ", "), SpendFrom("rollup_daily_tenant r", "r.tenant")), nil},
}

// SpendBlock is one block of rollup_tenant_spend: its span in days and its first day.
type SpendBlock struct {
	Span  int
	Start time.Time // a date, at UTC midnight
}

// SpendBlocks tiles the local days [from, to) (dates at UTC midnight) with the fewest blocks of
// rollup_tenant_spend: from each end, the largest aligned blocks that fit. A month takes about ten.
func SpendBlocks(from, to time.Time) []SpendBlock {
	day := func(t time.Time) int { return int(t.Sub(spendEpoch).Hours()) / 24 }
	lo, hi := day(from), day(to)
	var out []SpendBlock
	for lo < hi {
		span := SpendSpans[0]
		for _, n := range SpendSpans[1:] {
			if lo%n == 0 && lo+n <= hi {
				span = n
			}
		}
		out = append(out, SpendBlock{span, spendEpoch.AddDate(0, 0, lo)})
		lo += span
	}
	return out
}
