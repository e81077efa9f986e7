package rollup

import (
	"fmt"
	"strings"
)

// The tenant blocks rollup (rollup_tenant_blocks, migration 00038): rollup_daily_tenant's rows
// summed over the blocks of BlockSpans local days, with every sum and the histogram. A question
// about tenants that needs no day (a month by tenant, one tenant's total) reads a range's whole
// days as the fewest blocks that tile them (SpendBlocks): the blocks of 1 day from
// rollup_daily_tenant, the longer ones from here. At 10,000 tenants a month is nine blocks a
// tenant instead of thirty days, and each row carries a histogram to merge. The fold adds the same
// daily sums to it as to rollup_daily_tenant, reprice the same deltas, and a rebuild counts it from
// rollup_daily_tenant once that is recounted.

// BlockSpans are the spans of rollup_tenant_blocks: SpendSpans but the day, which
// rollup_daily_tenant holds.
var BlockSpans = SpendSpans[1:]

// BlocksKey is the primary key of rollup_tenant_blocks, in order.
var BlocksKey = []string{"project_id", "span", "bucket", "tenant", "fallback", "status", "error_class"}

// BlocksFrom is the FROM clause and select list of rollup_tenant_blocks keys from the rows r
// (project_id; bucket, the local day; fallback, status, error_class) of from, their tenant in the
// expression tenant: each row once for the block of every span it falls in (sp.span). cols
// follow the key in the select list.
func BlocksFrom(from, tenant string, cols []string) string {
	return fmt.Sprintf(`SELECT r.project_id, sp.span, %s AS bucket, %s AS tenant, r.fallback, r.status, r.error_class, %s
		FROM %s CROSS JOIN unnest(%s) AS sp(span)`,
		spendBlockOf("r.bucket", "sp.span"), tenant, strings.Join(cols, ", "), from, spansSQL(BlockSpans))
}

// blockRows are the daily rows r of from (their tenant in the expression tenant) once for each
// block they fall in, keyed as BlocksKey, with their sums and histogram: what the fold adds up
// into rollup_tenant_blocks and a rebuild counts it from.
func blockRows(from, tenant string) string {
	return BlocksFrom(from, tenant, append(prefixed("r.", Cols(Sums)), "r.latency_hist"))
}

// BlocksFromDailySQL is rollup_tenant_blocks as rollup_daily_tenant's rows add up, in key order
// (BlocksKey, Sums, latency_hist): what a rebuild writes, and what the table must always equal.
var BlocksFromDailySQL = fmt.Sprintf(`SELECT %[1]s, %[2]s, hist_sum(latency_hist) AS latency_hist FROM (%[3]s) x
	GROUP BY %[4]s ORDER BY %[4]s`, strings.Join(BlocksKey, ", "), strings.Join(SummedAs(Cols(Sums)), ", "),
	blockRows("rollup_daily_tenant r", "r.tenant"), Ordinals(len(BlocksKey)))

// blocksRebuildSteps count rollup_tenant_blocks again from rollup_daily_tenant.
var blocksRebuildSteps = []Step{
	{"clear rollup_tenant_blocks", "DELETE FROM rollup_tenant_blocks", nil},
	{"count rollup_tenant_blocks", fmt.Sprintf(`INSERT INTO rollup_tenant_blocks (%s, %s, latency_hist) %s`,
		strings.Join(BlocksKey, ", "), strings.Join(Cols(Sums), ", "), BlocksFromDailySQL), nil},
}
