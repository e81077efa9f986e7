package analytics

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Today's rows of a narrow daily rollup, kept between reads and refreshed by the rows changed
// since. With 10,000 tenants a month by tenant read today's 48,000 tenant rows with their
// histograms on every read, most of its time (docs/performance.md), while the whole days before
// today were kept (spans.go). While calls come in, a fold rewrites some of today's rows every
// 500 ms, so today cannot be kept by its version as those days are; but every row a fold, a
// reprice or a rebuild writes is a new row version, by a transaction the snapshot of the last
// read did not see. So the Service keeps each question's rows of today with the snapshot they
// were read in, and reads again only the rows of transactions that snapshot did not see
// (changedSinceSQL), which a fold of a few seconds' calls makes few; while the day's row of
// rollup_days is the version that snapshot saw, none were written, and nothing is read. Of
// today's rows, only a rebuild deletes any, and it makes the day's row of rollup_days anew: then
// the day is read whole. The cache report's models keep today's rows of rollup_daily the same
// way (cache_models.go).

// dayRowsSQL reads the rows of the narrow daily rollup %[2]s (keeping the series columns %[3]s,
// listed with ", r.") of the local day @day_from that the filter (%[4]s) selects, as a plan's
// rows statement does (%[1]s the grouping's columns, %[6]s the sums), each with its identity
// first (its key columns as a row's text) and the histogram of a succeeded row last; %[5]s is a
// condition on the rollup's rows d, changedSinceSQL or none.
const dayRowsSQL = `SELECT ROW(r.%[3]s, r.fallback, r.status, r.error_class)::text, %[1]s r.fallback, r.status::text,
		r.error_class::text, r.%[6]s, CASE WHEN r.status = 'ok' THEN r.latency_hist::text END
	FROM (SELECT d.*, d.bucket AS day, NULL::timestamptz AS hour FROM %[2]s d
		WHERE d.project_id = @project AND d.bucket = @day_from%[5]s) r
	WHERE %[4]s`

// changedSinceSQL selects the rows written by a transaction the snapshot of the last read did
// not see. Each has an xid from that snapshot's xmin (@since) on, as age compares them (against
// the same xid for every row of the statement), which leaves few rows to test further. A snapshot
// taken on a primary (@exact) then tells by pg_visible_in_snapshot which of those it saw (the
// writers of the rollups run no subtransactions, which a pg_snapshot does not list); the xid is
// placed in the epoch of @top (the xmax of the statement's snapshot), or the one before when that
// would put it at or past @top, as a committed row's xid is below it. A standby's pg_snapshot
// lists no running transactions (it keeps them among the subtransactions), so a snapshot taken
// there is not asked: every row from its xmin on is read again, the rows of transactions that
// ended while older ones ran too, which replace themselves.
const changedSinceSQL = `
		AND age(d.xmin) <= (SELECT age(@since::bigint::text::xid))
		AND (NOT @exact::bool OR NOT pg_visible_in_snapshot((SELECT CASE WHEN v >= @top THEN v - 4294967296 ELSE v END
			FROM (SELECT (@top::bigint & ~4294967295::bigint) | d.xmin::text::bigint AS v) x)::text::xid8, @snap::pg_snapshot))`

// dayStateSQL is the statement's snapshot, its xmin as a 32-bit xid and its xmax, whether it was
// taken on a primary, and the number the day's row of rollup_days was made with (migration 00044)
// and the transaction that last wrote it (0 and 0 without one).
const dayStateSQL = `SELECT pg_current_snapshot()::text, pg_snapshot_xmin(pg_current_snapshot())::text::bigint % 4294967296,
	pg_snapshot_xmax(pg_current_snapshot())::text::bigint, NOT pg_is_in_recovery(), coalesce(d.made, 0),
	coalesce(d.xmin::text::bigint, 0)
	FROM (SELECT 1) x LEFT JOIN rollup_days d ON d.project_id = @project AND d.bucket = @day_from`

// dayState is what dayStateSQL reads of a snapshot but its xmax, which only the statements of
// that snapshot need.
type dayState struct {
	snap  string
	since int64
	exact bool
	made  int64
	xmin  int64
}

// scan are the destinations of dayStateSQL's columns, the xmax into top.
func (st *dayState) scan(top *int64) []any {
	return []any{&st.snap, &st.since, top, &st.exact, &st.made, &st.xmin}
}

// dayRows are a question's rows of one local day of a narrow daily rollup (nil: none read) as
// of the snapshot of state, by group, size of them, and groups, each
// group's rows added up. merged are those groups with the groups of the span before the day
// (span) merged in, as of the rows but those of the groups in dirty; out and total are the
// answer's groups (in key order, each at its index in at) and their total.
// With today kept, merging a month's 10,000 tenant groups with today's and working out their
// figures took three quarters of the month by tenant's CPU, so these are kept too, and worked
// out again for the groups changed. mu is held while refreshing or answering.
type dayRows struct {
	mu     sync.Mutex
	state  dayState
	size   int
	rows   map[gkey][]idRow
	groups map[gkey]*acc
	merged map[gkey]*acc
	span   map[gkey]*acc
	dirty  map[gkey]bool
	out    []Group
	at     map[gkey]int
	total  Stats
}

// idRow is one rollup row, by its identity.
type idRow struct {
	id string
	a  *acc
}

// today returns the rows of a summary grouped as g with plan p (which reads whole days from
// p.daily) over today's local day, as args (s.args of that day) select them: kept in s.todays,
// refreshed by the rows changed since the last read.
func (s *Service) today(ctx context.Context, g grouping, p plan, args pgx.NamedArgs, key spanKey) (*dayRows, error) {
	d, ok := s.todays.get(key, nil)
	if !ok {
		d = &dayRows{}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.refresh(ctx, s, g, p, args); err != nil {
		return nil, fmt.Errorf("today: %w", err)
	}
	s.todays.put(key, nil, d, d.size)
	return d, nil
}

// answer returns the groups (in key order; none when g has no dimensions) and total of a
// summary grouped as g of the day's groups with the groups of span merged in. It keeps them while
// span is the one merged last, and works out again those of the groups changed since; else it
// works them all out anew. The groups are the caller's, their figures shared, so only read.
func (d *dayRows) answer(g grouping, tz *time.Location, span map[gkey]*acc) ([]Group, Stats) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.merged == nil || reflect.ValueOf(d.span).UnsafePointer() != reflect.ValueOf(span).UnsafePointer() {
		d.merged, d.span, d.dirty = maps.Clone(span), span, nil
		if d.merged == nil {
			d.merged = map[gkey]*acc{}
		}
		for k, a := range d.groups {
			d.merged[k] = sum(span[k], a)
		}
		d.figures(g, tz)
	} else if len(d.dirty) > 0 {
		added := false
		for k := range d.dirty {
			d.merged[k] = sum(span[k], d.groups[k])
			if i, ok := d.at[k]; ok {
				d.out[i].Stats = d.merged[k].stats()
			} else {
				added = true
			}
		}
		if added || len(g.dims) == 0 {
			d.figures(g, tz)
		} else {
			d.total = totalOf(d.merged).stats()
		}
		d.dirty = nil
	}
	return slices.Clone(d.out), d.total
}

// figures works out every group's figures and the total of d.merged.
func (d *dayRows) figures(g grouping, tz *time.Location) {
	var keys []gkey
	keys, d.out, d.total = figuresOf(g, tz, d.merged)
	d.at = make(map[gkey]int, len(d.out))
	for i := range d.out {
		d.at[keys[i]] = i
	}
}

// sum is a group of both a and b (either may be nil), a new one where both are not.
func sum(a, b *acc) *acc {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	m := &acc{}
	m.merge(a)
	m.merge(b)
	return m
}

// refresh reads the rows written since the kept snapshot (changes) and adds up again the groups
// they are in.
func (d *dayRows) refresh(ctx context.Context, s *Service, g grouping, p plan, args pgx.NamedArgs) error {
	return s.readSnapshot(ctx, func(q queryFunc) error {
		st, changed, err := d.changes(q, g, p, args)
		if err != nil {
			return err
		}
		d.sum(changed)
		d.state = st
		return nil
	})
}

// changes reads, with q in one snapshot, the day's state and the rows written since the kept
// snapshot, or all of them (dayChanges), into d.rows; it returns the state and the groups the
// rows are in.
func (d *dayRows) changes(q queryFunc, g grouping, p plan, args pgx.NamedArgs) (dayState, map[gkey]bool, error) {
	keyDst, keyOf := g.scanTargets()
	var (
		id, status, class string
		fallback          bool
		hist              pgtype.UndecodedBytes
		buf               []int64
		sums              = make([]int64, len(sumCols))
	)
	dst := append([]any{&id}, keyDst...)
	dst = append(dst, &fallback, &status, &class)
	for i := range sums {
		dst = append(dst, &sums[i])
	}
	dst = append(dst, &hist)
	query := func(cond string) string {
		return fmt.Sprintf(dayRowsSQL, g.columns("r"), p.daily.Table, strings.Join(p.daily.Keep, ", r."), narrowFilter(p.keep),
			cond, strings.Join(sumCols, ", r."))
	}
	reset := func() { d.size, d.rows, d.groups, d.merged = 0, map[gkey][]idRow{}, nil, nil }
	changed := map[gkey]bool{}
	st, err := dayChanges(q, d.state, args, query, reset, dst, func() error {
		a := &acc{}
		a.add(fallback, status, class, sums)
		if hist != nil {
			var err error
			if buf, err = a.hist.addText(hist, buf); err != nil {
				return err
			}
		}
		k := keyOf(fallback)
		changed[k] = true
		rows := d.rows[k]
		for i := range rows {
			if rows[i].id == id {
				rows[i].a = a
				return nil
			}
		}
		d.rows[k] = append(rows, idRow{id, a})
		d.size++
		return nil
	})
	return st, changed, err
}

// dayChanges reads with q, in one snapshot, the state of the local day @day_from (dayStateSQL)
// and the rows the statement query(cond) selects into dst, calling each for every row. cond is
// changedSinceSQL, the rows written since the snapshot of kept; or, when kept holds no snapshot
// or the day's row of rollup_days was made again (by a rebuild, which may have deleted rows),
// none: then reset is called first and every row is read. While the day's row of rollup_days is
// the one kept saw, no row was written since (every writer of a day's rows writes it in the same
// transaction, internal/rollup/days.go), and none is read. It returns the state to keep.
func dayChanges(q queryFunc, kept dayState, args pgx.NamedArgs, query func(cond string) string, reset func(),
	dst []any, each func() error) (dayState, error) {
	var (
		st  dayState
		top int64
	)
	if err := q(dayStateSQL, args, st.scan(&top), func() error { return nil }); err != nil {
		return st, err
	}
	if kept.snap != "" && kept.made == st.made && kept.xmin == st.xmin {
		return st, nil
	}
	cond := ""
	if kept.snap != "" && kept.made == st.made {
		cond = changedSinceSQL
		args = maps.Clone(args)
		args["snap"], args["since"], args["exact"], args["top"] = kept.snap, kept.since, kept.exact, top
	} else {
		reset()
	}
	return st, q(query(cond), args, dst, each)
}

// sum adds up again the groups changed and notes them dirty.
func (d *dayRows) sum(changed map[gkey]bool) {
	if d.groups == nil {
		d.groups = map[gkey]*acc{}
	}
	if d.dirty == nil {
		d.dirty = map[gkey]bool{}
	}
	for k := range changed {
		var sum acc
		for _, r := range d.rows[k] {
			sum.merge(r.a)
		}
		d.groups[k] = &sum
		d.dirty[k] = true
	}
}
