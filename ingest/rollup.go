package ingest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ledgerd/ledgerd/internal/rollup"
)

// column is a column a statement sends as an array, with its array element type.
type column struct{ col, typ string }

// attemptCols are the attempts columns the writer fills, in the order of the unnest arrays.
var attemptCols = slices.Concat([]column{
	{"project_id", "int8"}, {"started_at", "timestamptz"}, {"series_id", "int8"},
	{"attempt_no", "int4"}, {"latency_ms", "int4"}, {"status", "attempt_status"},
	{"error_class", "error_class"}, {"fallback", "bool"}, {"batch", "bool"},
	{"http_status", "int2"}, {"retry_after_ms", "int4"}, {"price_id", "int4"},
	{"input_tokens", "int8"}, {"output_tokens", "int8"}, {"cache_write_tokens", "int8"},
	{"cache_write_1h_tokens", "int8"}, {"cache_read_tokens", "int8"}, {"reasoning_tokens", "int8"},
	{"cost_nanos", "int8"}, {"nocache_cost_nanos", "int8"}, {"client_cost_nanos", "int8"},
	{"attempt_id", "text"}, {"request_id", "text"}, {"prompt_hash", "text"},
	{"provider_request_id", "text"}, {"metadata", "jsonb"},
}, limitCols, []column{{"usage_unknown", "bool"}})

// SQLSTATEs the writer tells apart: a COPY fails with uniqueViolation when a record is already
// stored; a fold fails with lockNotAvailable when another fold holds the lock past lock_timeout.
const (
	uniqueViolation  = "23505"
	lockNotAvailable = "55P03"
)

// insertSQL inserts a batch of attempts from arrays, skipping records already stored, and adds
// exactly the inserted rows' rollup deltas to the pending tables in the same statement
// (rollup.PendingFrom). $N+1 is the timezone of daily rollups. It returns the identity of each
// inserted row. It is built once, at start-up.
var insertSQL = func() string {
	cols := colList(attemptCols)
	var params []string
	for i, c := range attemptCols {
		params = append(params, fmt.Sprintf("$%d::%s[]", i+1, c.typ))
	}
	return fmt.Sprintf(`WITH ins AS (
		INSERT INTO attempts (%[1]s)
		SELECT * FROM unnest(%[2]s) AS t(%[1]s)
		ON CONFLICT (project_id, attempt_id, started_at) DO NOTHING
		RETURNING *
	), %[3]s
	SELECT project_id, attempt_id, started_at FROM ins`,
		strings.Join(cols, ", "), strings.Join(params, ", "), rollup.PendingFrom("ins", fmt.Sprintf("$%d", len(attemptCols)+1)))
}()

func colList(cols []column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.col
	}
	return out
}
