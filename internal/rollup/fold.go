package rollup

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// An ingest commit adds its rollup deltas to the pending tables (migrations 00008 and 00009)
// instead of updating the rollups: plain inserts, with no rollup row to find and lock, so commits
// neither pay for the upserts nor wait for each other on the current hour's rows. A commit writes
// one row per UTC hour, local day and series key to pending_rollup_hourly, and its cache groups to
// pending_cache. Fold then adds everything pending to the rollups at once: many commits' deltas
// summed into one upsert per rollup row, the daily rollups summed from the same hourly rows.

// lockFoldSQL makes folds take turns: the writers' rollers, reprice and rebuild. It conflicts
// with nothing an ingest commit takes.
const lockFoldSQL = `LOCK TABLE rollup_fold_lock IN EXCLUSIVE MODE`

// lockFold waits for any other fold to finish and holds the fold lock for the rest of tx.
func lockFold(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, lockFoldSQL); err != nil {
		return fmt.Errorf("lock rollup fold: %w", err)
	}
	return nil
}

// foldSQL moves one chunk of the pending deltas into the rollups (see chunk: $1 is the last ctid
// folded, $2 the chunk's size), in two statements. The first sums the chunk's hourly rows from
// minutes_from on per 5 minutes (a5), deletes the chunk's rows, and adds a5 to rollup_minute5; a5
// and the older rows summed per hour and local day (a) to rollup_hourly and the narrow hourly
// rollups; and a's sums per day (b) to rollup_daily and, through each series' columns, to the
// narrow daily rollups (noting their days in rollup_days: days.go). So each pending row's
// histogram is merged once, into its 5 minutes or its hour: merges are most of a fold's time, and
// summing the recent rows per hour and again per 5 minutes merged them twice. The older rows (a
// backfill's) skip the 5 minutes: they seldom share them, so a pass per 5 minutes merges next to
// nothing and only sorts them once more (summing every row per 5 minutes first made a week's
// backfill fold 15% longer in one alternated run). The second statement folds the cache groups
// and notes their local days (markCacheDaysSQL).
// Each returns how many rollup rows it wrote, then the chunk's size and last ctid.
// Every upsert goes in key order, as every fold locks rows in it.
//
// Each statement reads the pending rows and deletes them in separate WITH items, not through
// DELETE … RETURNING: all parts of a statement share one snapshot, so the DELETE removes exactly the
// rows the sums read (rows committed meanwhile are invisible to both and wait for the next fold),
// and only a fold deletes pending rows, under the fold lock. Summing straight from the table,
// instead of from RETURNING's copy of every wide row, took a quarter off the fold.
var foldSQL = func() [2]string {
	var sums []string
	for _, s := range Sums {
		sums = append(sums, fmt.Sprintf("sum8(a.%s)", s.Col))
	}
	set := addedSet(Cols(Sums))
	// upsert adds the sums of from (aliased a) to table, grouped by the select list keySel (the
	// table's key columns key, in order); with keySel nil, from is summed per key already, and its
	// rows are added as they are.
	upsert := func(table string, key, keySel []string, from string) string {
		order := Ordinals(len(key))
		var sel, group string
		if keySel == nil {
			sel = strings.Join(slices.Concat(prefixed("a.", key), prefixed("a.", Cols(Sums)), []string{"a.latency_hist"}), ", ")
		} else {
			sel = fmt.Sprintf("%s, %s, hist_sum(a.latency_hist)", strings.Join(keySel, ", "), strings.Join(sums, ", "))
			group = " GROUP BY " + order
		}
		return fmt.Sprintf(`INSERT INTO %[1]s AS r (%[2]s, %[3]s, latency_hist)
		SELECT %[4]s FROM %[5]s%[6]s ORDER BY %[7]s
		ON CONFLICT (%[2]s) DO UPDATE SET %[8]s, latency_hist = hist_merge(r.latency_hist, excluded.latency_hist)
		RETURNING 1`,
			table, strings.Join(key, ", "), strings.Join(Cols(Sums), ", "), sel, from, group, order, strings.Join(set, ", "))
	}
	// a holds the pending rows summed per hour and day, b the same per day. Each rollup is summed
	// from the narrowest of these that holds its key, so that a histogram merged once is not merged
	// again for the next rollup: ah and bd are a and b summed onto their series' shapes (the shape
	// is a series row with the same columns but the tenant), which rollup_hourly and rollup_daily
	// take as they are and the narrow rollups that keep no tenant sum further; btm is b per tenant
	// and model, and bt btm per tenant. Summed from the series rows instead, each narrow rollup
	// merged every series' histogram again, for 6-9% of a live fold's statement. rollup_hourly
	// leaves out the hours Prune removed; the narrow hourly rollups keep every hour.
	tenantModel := Narrow{Keep: tenantModelKeep}
	shapeSel := []string{"a.project_id", "a.bucket", "s.shape_id", "a.fallback", "a.status", "a.error_class"}
	shapeAs := slices.Replace(slices.Clone(shapeSel), 2, 3, "s.shape_id AS series_id")
	// rollup_minute5 (minute.go) takes the chunk's sums per 5 minutes from minutes_from on (mn).
	steps := []string{
		upsert("rollup_hourly", Key, nil, "ah a WHERE a.bucket >= "+PrunedBeforeSQL),
		upsert("rollup_daily", Key, nil, "bd a"),
		upsert("rollup_minute5", Key, shapeSel, "mn a "+seriesOfA),
	}
	narrowSel := func(d Narrow) []string {
		return append(append([]string{"a.project_id", "a.bucket"}, prefixed("s.", d.Keep)...), "a.fallback", "a.status", "a.error_class")
	}
	for _, d := range HourlyBy {
		steps = append(steps, upsert(d.Table, d.Key(), narrowSel(d), "ah a "+seriesOfA))
	}
	for _, d := range DailyBy {
		switch {
		case slices.Equal(d.Keep, SpendKeep):
			// Summed per tenant once (bt), for the spend and the blocks too.
			steps = append(steps, upsert(d.Table, d.Key(), nil, "bt a"))
		case slices.Equal(d.Keep, tenantModel.Keep):
			steps = append(steps, upsert(d.Table, d.Key(), nil, "btm a"))
		default:
			// The shapes have no tenant: a rollup that keeps it sums the series rows.
			from := "bd a "
			if d.Tenant() {
				from = "b a "
			}
			steps = append(steps, upsert(d.Table, d.Key(), narrowSel(d), from+seriesOfA))
		}
	}
	steps = append(steps, spendFoldSQL,
		upsert("rollup_tenant_blocks", BlocksKey, prefixed("a.", BlocksKey), "("+blockRows("bt r", "r.tenant")+") a"))
	var ctes, counts []string
	for i, st := range steps {
		ctes = append(ctes, fmt.Sprintf("u%d AS (%s)", i, st))
		counts = append(counts, fmt.Sprintf("(SELECT count(*) FROM u%d)", i))
	}
	// The days of rollup_daily written are noted (days.go); not counted as rollup rows.
	ctes = append(ctes, "ud AS ("+touchDaysSQL("b")+")")
	ph := chunkOf("pending_rollup_hourly")
	recent := "p.bucket + p.minute * interval '1 minute' >= " + MinutesFromSQL
	rollups := fmt.Sprintf(`WITH `+ph.with+`
	a5 AS (SELECT %[1]s, minute, %[2]s, hist_sum(latency_hist) AS latency_hist FROM `+ph.from+` AND `+recent+`
		GROUP BY %[1]s, minute),
	a AS (SELECT %[1]s, %[2]s, hist_sum(latency_hist) AS latency_hist FROM (
		SELECT %[1]s, %[5]s, latency_hist FROM a5
		UNION ALL SELECT %[1]s, %[5]s, latency_hist FROM `+ph.from+` AND (`+recent+`) IS NOT TRUE) p GROUP BY %[1]s),
	b AS (SELECT project_id, day AS bucket, series_id, fallback, status, error_class, %[2]s,
		hist_sum(latency_hist) AS latency_hist FROM a GROUP BY 1, 2, 3, 4, 5, 6),
	ah AS (SELECT %[6]s, %[2]s, hist_sum(latency_hist) AS latency_hist FROM a a `+seriesOfA+` GROUP BY 1, 2, 3, 4, 5, 6),
	bd AS (SELECT %[6]s, %[2]s, hist_sum(latency_hist) AS latency_hist FROM b a `+seriesOfA+` GROUP BY 1, 2, 3, 4, 5, 6),
	btm AS (SELECT %[7]s, %[2]s, hist_sum(latency_hist) AS latency_hist FROM b a `+seriesOfA+` GROUP BY %[8]s),
	bt AS (SELECT project_id, bucket, tenant, fallback, status, error_class, %[2]s,
		hist_sum(latency_hist) AS latency_hist FROM btm GROUP BY 1, 2, 3, 4, 5, 6),
	mn AS (SELECT project_id, bucket + minute * interval '1 minute' AS bucket, series_id, fallback, status, error_class,
		%[5]s, latency_hist FROM a5),
	%[3]s
	SELECT %[4]s, `+ph.taken, strings.Join(PendingKey, ", "), strings.Join(SummedAs(Cols(Sums)), ", "), strings.Join(ctes, ",\n\t"),
		strings.Join(counts, " + "), strings.Join(Cols(Sums), ", "),
		strings.Join(shapeAs, ", "), strings.Join(narrowSel(tenantModel), ", "), Ordinals(len(tenantModel.Key())))

	// The cache groups go to their series' shapes.
	pc := chunkOf("pending_cache")
	src := fmt.Sprintf(`SELECT p.project_id, p.bucket, s.shape_id AS series_id, p.fallback, p.prompt_hash, %s
		FROM pending_cache p JOIN series s ON s.project_id = p.project_id AND s.id = p.series_id WHERE %s GROUP BY %s`,
		strings.Join(SummedAs(Cols(CacheSums)), ", "), pc.in, Ordinals(len(CacheKey)))
	// The days the cache groups fall in are noted for SummarizeCacheDays (cachedays.go).
	return [2]string{rollups, "WITH " + pc.with + " " + cacheFoldCTEs(src) + ", ins AS (" + cacheFoldUpsert +
		" RETURNING 1), dd AS (" + markCacheDaysSQL("m") + ") SELECT (SELECT count(*) FROM ins), " + pc.taken}
}()

// chunk is how a fold statement takes one chunk of a pending table's rows: with are its first WITH
// items (the chunk k: the ctids of up to $2 rows after the ctid $1, in physical order, read by a TID
// range scan, then gone: their deletion), from is the FROM item of the chunk's rows (a TID scan of
// the same ctids; aliased p), in the condition that selects them, and taken the chunk's size and its last ctid, as two columns of the statement's
// result. The deletion and the sums read the same rows: they share the statement's snapshot and
// the ctids, and no other statement deletes pending rows (folds hold the fold lock).
type chunk struct{ with, from, in, taken string }

func chunkOf(table string) chunk {
	in := "ctid = ANY((SELECT t FROM k)::tid[])"
	return chunk{
		in: "p." + in,
		with: fmt.Sprintf(`k AS MATERIALIZED (SELECT ARRAY(SELECT ctid FROM %[1]s WHERE ctid > $1::tid LIMIT $2) AS t),
	gone AS (DELETE FROM %[1]s WHERE %[2]s),`, table, in),
		from:  table + " p WHERE p." + in,
		taken: "(SELECT cardinality(t) FROM k), (SELECT max(c) FROM k, unnest(k.t) AS c)",
	}
}

// JoinSeries joins the rows aliased rows (with project_id and series_id) to their series s.
func JoinSeries(rows string) string {
	return "JOIN series s ON s.project_id = " + rows + ".project_id AND s.id = " + rows + ".series_id"
}

// seriesOfA joins the rows a (attempts, or pending rows) to their series s.
var seriesOfA = JoinSeries("a")

// SummedAs is each column of cols summed into itself, as bigint: the select list that adds rows up
// under the rollups' column names.
func SummedAs(cols []string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = fmt.Sprintf("sum8(%[1]s) AS %[1]s", c)
	}
	return out
}

// addedSet is the ON CONFLICT SET items that add the incoming row's cols to the stored row r's.
func addedSet(cols []string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = fmt.Sprintf("%[1]s = r.%[1]s + excluded.%[1]s", c)
	}
	return out
}

// cacheFoldCTEs are the WITH items that count new attempts into cache_prefixes and lay out their
// rollup_cache_hourly rows (see migration 00005): src yields the new attempts' cache groups, as
// (project_id, bucket, series_id, fallback, prompt_hash, the CacheSums columns), empty when none. A
// group goes to its hash's row when the hash now has two or more calls in its UTC month, else to
// the empty-hash row as single-use; when the hash had exactly one call before, that call (its
// series, hour and sums kept in cache_prefixes) moves from the empty-hash row to the hash's row.
// The upsert locks the cache_prefixes rows, so concurrent commits of the same hash count one after
// the other.
func cacheFoldCTEs(src string) string {
	var rest, hsum, first, ret, neg, pos, cs []string
	for _, s := range CacheSums[1:] {
		rest = append(rest, s.Col)
		hsum = append(hsum, fmt.Sprintf("sum(%s)::int8 AS %s", s.Col, s.Col))
		first = append(first, fmt.Sprintf("CASE WHEN calls = 1 THEN %s END", s.Col))
		ret = append(ret, "p."+s.Col)
		neg = append(neg, "-d."+s.Col)
		pos = append(pos, "d."+s.Col)
		cs = append(cs, "c."+s.Col)
	}
	return fmt.Sprintf(`c AS (%[1]s
	), h AS (
		SELECT project_id, %[2]s AS month, prompt_hash, sum(calls)::int8 AS calls,
			min(series_id) AS series_id, bool_or(fallback) AS fallback, min(bucket) AS bucket, %[3]s
		FROM c WHERE prompt_hash <> '' GROUP BY 1, 2, 3
	), d AS (
		INSERT INTO cache_prefixes AS p (project_id, month, prompt_hash, calls, series_id, fallback, bucket, %[4]s)
		SELECT project_id, month, prompt_hash, calls, CASE WHEN calls = 1 THEN series_id END,
			CASE WHEN calls = 1 THEN fallback END, CASE WHEN calls = 1 THEN bucket END, %[5]s
		FROM h ORDER BY 1, 2, 3
		ON CONFLICT (project_id, month, prompt_hash) DO UPDATE SET calls = p.calls + excluded.calls
		RETURNING p.project_id, p.month, p.prompt_hash, p.calls, p.series_id, p.fallback, p.bucket, %[6]s
	), moved AS (
		SELECT d.* FROM d JOIN h USING (project_id, month, prompt_hash) WHERE d.calls - h.calls = 1
	), m AS (
		SELECT c.project_id, c.bucket, c.series_id, c.fallback,
			CASE WHEN d.calls >= 2 THEN c.prompt_hash ELSE '' END AS prompt_hash, c.calls, %[7]s,
			CASE WHEN d.calls = 1 THEN 1 ELSE 0 END AS single_use
		FROM c LEFT JOIN d ON d.project_id = c.project_id AND d.month = %[8]s AND d.prompt_hash = c.prompt_hash
		UNION ALL
		SELECT d.project_id, d.bucket, d.series_id, d.fallback, '', -1, %[9]s, -1 FROM moved d
		UNION ALL
		SELECT d.project_id, d.bucket, d.series_id, d.fallback, d.prompt_hash, 1, %[10]s, 0 FROM moved d
	)`, src, MonthOf("bucket"), strings.Join(hsum, ", "), strings.Join(rest, ", "), strings.Join(first, ", "),
		strings.Join(ret, ", "), strings.Join(cs, ", "), MonthOf("c.bucket"), strings.Join(neg, ", "), strings.Join(pos, ", "))
}

// cacheFoldUpsert adds the rows laid out by cacheFoldCTEs (named m) to rollup_cache_hourly, in key
// order.
var cacheFoldUpsert = func() string {
	var sums []string
	cols := append(Cols(CacheSums), "single_use")
	for _, c := range cols {
		sums = append(sums, fmt.Sprintf("sum(%s)::int8", c))
	}
	set := addedSet(cols)
	key, group := strings.Join(CacheKey, ", "), Ordinals(len(CacheKey))
	return fmt.Sprintf(`INSERT INTO rollup_cache_hourly AS r (%[1]s, %[2]s)
		SELECT %[1]s, %[3]s FROM m
		GROUP BY %[4]s ORDER BY %[4]s
		ON CONFLICT (%[1]s) DO UPDATE SET %[5]s`,
		key, strings.Join(cols, ", "), strings.Join(sums, ", "), group, strings.Join(set, ", "))
}()

// VacuumPendingSQL clears the pending tables of the rows folds deleted. Autovacuum looks at a
// database about once a minute, and a minute of backfill leaves hundreds of megabytes of dead rows
// that every fold's scan then reads, so the writer vacuums them itself, about once a second while
// it folds.
const VacuumPendingSQL = `VACUUM (SKIP_LOCKED) pending_rollup_hourly, pending_cache, pending_load_minute, pending_load_touched`

// DefaultChunk is how many pending rows of each table a fold takes in one statement: about a
// second's work on a backlog (a fold sums and upserts some 25,000 pending rows a second on the
// project's 2-core VM), so a backlog of any size drains in bounded steps.
const DefaultChunk = 20_000

// pendingTables are the pending tables in the order of a chunk's statements (foldSQL, LoadFoldSQL).
var pendingTables = [3]string{"pending_rollup_hourly", "pending_cache", "pending_load_minute"}

// Cursor is how far a chunked fold has come through each pending table: the last ctid it folded,
// and whether it has reached the table's end. Rows committed meanwhile into earlier pages (space
// a vacuum freed) are left for the next fold, which starts from the beginning again.
type Cursor struct {
	after [len(pendingTables)]pgtype.TID
	done  [len(pendingTables)]bool
}

// NewCursor is a cursor at the start of every pending table.
func NewCursor() Cursor {
	var c Cursor
	for i := range c.after {
		c.after[i] = pgtype.TID{Valid: true}
	}
	return c
}

// Done tells whether the fold has reached the end of every pending table.
func (c Cursor) Done() bool { return !slices.Contains(c.done[:], false) }

// FoldChunk adds up to n pending rows of each table not yet done to the rollups and removes them
// from the pending tables, after waiting for any other fold to finish (it takes the fold lock for
// the rest of tx). It returns the cursor after the chunk and how many rollup rows it wrote. A
// caller that commits each chunk in its own transaction makes progress however large the backlog,
// and must keep the cursor only once tx has committed.
func FoldChunk(ctx context.Context, tx pgx.Tx, cur Cursor, n int) (Cursor, int64, error) {
	if err := lockFold(ctx, tx); err != nil {
		return cur, 0, err
	}
	// A chunk is the rows after the cursor in physical order: a parallel scan would hand them out
	// of order, and the cursor would pass rows not taken.
	if _, err := tx.Exec(ctx, `SET LOCAL max_parallel_workers_per_gather = 0`); err != nil {
		return cur, 0, fmt.Errorf("fold serially: %w", err)
	}
	stmts := [len(pendingTables)]string{foldSQL[0], foldSQL[1], LoadFoldSQL}
	b := &pgx.Batch{}
	var queued []int
	for i, st := range stmts {
		if !cur.done[i] {
			b.Queue(st, cur.after[i], n)
			queued = append(queued, i)
		}
	}
	res := tx.SendBatch(ctx, b)
	var moved int64
	for _, i := range queued {
		var (
			wrote, taken int64
			last         pgtype.TID
		)
		if err := res.QueryRow().Scan(&wrote, &taken, &last); err != nil {
			_ = res.Close()
			return cur, 0, fmt.Errorf("fold %s: %w", pendingTables[i], err)
		}
		moved += wrote
		if taken < int64(n) {
			cur.done[i] = true
		} else {
			cur.after[i] = last
		}
	}
	if err := res.Close(); err != nil {
		return cur, 0, fmt.Errorf("fold pending rollups: %w", err)
	}
	return cur, moved, nil
}

// Fold adds every pending rollup delta tx sees to the rollups and removes it from the pending
// tables, chunk after chunk in tx, then raises the load peaks, after waiting for any other fold to
// finish, and returns how many rollup rows it wrote. Reprice and rebuild call it first in a REPEATABLE READ transaction, so the
// deltas they fold are exactly those of the attempts they read; deltas committed later stay
// pending for the next fold.
func Fold(ctx context.Context, tx pgx.Tx) (int64, error) {
	var total int64
	for cur := NewCursor(); !cur.Done(); {
		var (
			moved int64
			err   error
		)
		if cur, moved, err = FoldChunk(ctx, tx, cur, DefaultChunk); err != nil {
			return total, err
		}
		total += moved
	}
	for more := true; more; {
		var (
			raised int64
			err    error
		)
		if raised, more, err = RaisePeaks(ctx, tx); err != nil {
			return total, err
		}
		total += raised
	}
	return total, nil
}

// PendingRowsSQL estimates how many rows wait in the pending tables, from the statistics
// PostgreSQL keeps as rows are inserted and deleted: cheap enough for every fold to report it.
const PendingRowsSQL = `SELECT coalesce(sum(n_live_tup), 0)::int8 FROM pg_stat_user_tables
	WHERE relname IN ('pending_rollup_hourly', 'pending_cache', 'pending_load_minute')`
