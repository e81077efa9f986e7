package analytics

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerd/ledgerd/internal/rollup"
)

// The cache report's model rows count every attempt of a model that used the cache (calls,
// input, cost), so they come from the main rollups, not the cache rollup: its default week is
// some 100,000 rows of rollup_daily with 10,000 tenants, and adding them up took most of the
// report's time (docs/performance.md). A day's rows change only by a statement that also writes
// the day's row of rollup_days (internal/rollup/days.go: a fold, a reprice, a rebuild), so the Service
// keeps each day's sums per series shape, read once, with the xmin of that row (read before the
// sums, so they are never older than it: Cache's cacheVersions), and reads again only the days
// whose row changed. Today's row changes with every fold while calls come in, so
// today's rows are kept as a summary's are (today.go), with the snapshot they were read in, and
// only the rows written since are read again (modelToday).

// modelCols are the columns a model row adds up from the main rollups, in the order of cacheCols:
// calls being the model's attempts.
var modelCols = append([]string{"attempts"}, cacheCols[1:]...)

// modelDaysSQL lists the local days [@day_from, @day_to) that rollup_days holds, each with the
// transaction that last wrote its row.
const modelDaysSQL = `SELECT bucket::timestamp, xmin::text::int8 FROM rollup_days
	WHERE project_id = @project AND bucket >= @day_from AND bucket < @day_to`

// modelSumsSQL adds up modelCols per series shape and fallback flag over the rows of sourceSQL
// (its parameters): each of the whole local days @days, and the edge hours as one day NULL. The
// condition on the day reaches rollup_daily's scan, so the other whole days are not read.
var modelSumsSQL = `SELECT CASE WHEN hour IS NULL THEN day::timestamp END, series_id, fallback, ` +
	strings.Join(rollup.SummedAs(modelCols), ", ") + `
	FROM (` + fmt.Sprintf(sourceSQL, strings.Join(modelCols, ", "), "") + `) x
	WHERE hour IS NOT NULL OR day = ANY(@days::date[]) GROUP BY 1, 2, 3`

// modelSums reads with q the sums of modelSumsSQL (args its parameters but days) of the whole
// local days read and the edge hours, by day (the edge hours' the zero date).
func (s *Service) modelSums(q queryFunc, args pgx.NamedArgs, read []date) (map[date][]shapeDay, error) {
	days := make([]string, len(read))
	for i, d := range read {
		days[i] = d.String()
	}
	args["days"] = days
	var (
		r   shapeDay
		at  *time.Time
		got = map[date][]shapeDay{}
	)
	r.n = make([]int64, len(modelCols))
	dst := []any{&at, &r.shape, &r.fallback}
	for i := range r.n {
		dst = append(dst, &r.n[i])
	}
	if err := q(modelSumsSQL, args, dst, func() error {
		row := r
		row.n = slices.Clone(r.n)
		var d date // the edge hours'
		if at != nil {
			d = date{at.Year(), at.Month(), at.Day()}
		}
		got[d] = append(got[d], row)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("sums: %w", err)
	}
	return got, nil
}

// modelTodaySQL reads the rows of rollup_daily of the local day @day_from, each with its key and
// modelCols; %s is a condition on the rows d (changedSinceSQL) or none.
var modelTodaySQL = `SELECT series_id, fallback, status::text, error_class::text, ` + strings.Join(modelCols, ", ") + `
	FROM rollup_daily d WHERE project_id = @project AND bucket = @day_from%s`

// shapeKey is a series shape with a fallback flag: what a model row's sums are kept by.
type shapeKey struct {
	shape    int64
	fallback bool
}

// dayModels are one project's rows of rollup_daily of one local day as of the snapshot of state,
// by series shape and fallback flag, then status and error class, each with modelCols; and their
// sums per shape and fallback flag (out, each at its index in at). mu is held while refreshing.
type dayModels struct {
	mu    sync.Mutex
	state dayState
	size  int
	rows  map[shapeKey]map[[2]string][]int64
	out   []shapeDay
	at    map[shapeKey]int
}

// dayKey is one project's local day.
type dayKey struct {
	project int64
	day     date
}

// modelToday returns the sums of modelCols per series shape and fallback flag of the project's
// rows of rollup_daily of the local day d, read with q: kept in s.modelDays, refreshed by the
// rows written since the last read. The sums are shared, so only read.
func (s *Service) modelToday(q queryFunc, project int64, d date) ([]shapeDay, error) {
	k := dayKey{project, d}
	m, ok := s.modelDays.get(k, nil)
	if !ok {
		m = &dayModels{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, changed, err := m.changes(q, k)
	if err != nil {
		return nil, fmt.Errorf("today: %w", err)
	}
	// A changed shape's sums are worked out into a new slice: the ones handed out stay as they were.
	for c := range changed {
		sum := make([]int64, len(modelCols))
		for _, v := range m.rows[c] {
			for i, x := range v {
				sum[i] += x
			}
		}
		if i, ok := m.at[c]; ok {
			m.out[i].n = sum
		} else {
			m.at[c] = len(m.out)
			m.out = append(m.out, shapeDay{shape: c.shape, fallback: c.fallback, n: sum})
		}
	}
	m.state = st
	s.modelDays.put(k, nil, m, m.size)
	return slices.Clone(m.out), nil
}

// changes reads with q the rows of k's day written since the kept snapshot, or all of them
// (dayChanges), into m.rows, and returns the state and the shapes the rows are of.
func (m *dayModels) changes(q queryFunc, k dayKey) (dayState, map[shapeKey]bool, error) {
	var (
		r             shapeKey
		status, class string
		n             = make([]int64, len(modelCols))
	)
	dst := []any{&r.shape, &r.fallback, &status, &class}
	for i := range n {
		dst = append(dst, &n[i])
	}
	reset := func() { m.size, m.rows, m.out, m.at = 0, map[shapeKey]map[[2]string][]int64{}, nil, map[shapeKey]int{} }
	changed := map[shapeKey]bool{}
	st, err := dayChanges(q, m.state, pgx.NamedArgs{"project": k.project, "day_from": k.day.civil()},
		func(cond string) string { return fmt.Sprintf(modelTodaySQL, cond) }, reset, dst, func() error {
			rows := m.rows[r]
			if rows == nil {
				rows = map[[2]string][]int64{}
				m.rows[r] = rows
			}
			sc := [2]string{status, class}
			if _, ok := rows[sc]; !ok {
				m.size++
			}
			rows[sc] = slices.Clone(n)
			changed[r] = true
			return nil
		})
	return st, changed, err
}

// shapeDay is one series shape's sums (modelCols) with one fallback flag over a day.
type shapeDay struct {
	shape    int64
	fallback bool
	n        []int64
}

// cacheModels gives the report's model rows over [from, to): the sums of modelCols per model
// (service, operation, provider, model, fallback flag) f selects, for the models that wrote or
// read the cache at all. The whole local days come from the days kept as they were last written
// (s.models) by their versions in days (readDayVersions, read before), or are read and kept; the
// edge hours are read.
func (s *Service) cacheModels(ctx context.Context, f Filter, from, to time.Time, days map[date]int64) ([]cacheScan, error) {
	src := s.split(from, to, false)
	args := s.args(Filter{ProjectID: f.ProjectID}, src)
	type shape struct {
		id       int64
		fallback bool
	}
	sums := map[shape][]int64{}
	add := func(rows []shapeDay) {
		for _, r := range rows {
			k := shape{r.shape, r.fallback}
			n := sums[k]
			if n == nil {
				n = make([]int64, len(modelCols))
				sums[k] = n
			}
			for i, v := range r.n {
				n[i] += v
			}
		}
	}
	var names map[int64]cacheKey
	err := s.readSnapshot(ctx, func(q queryFunc) error {
		d0, d1 := dateOf(src.dayFrom, time.UTC), dateOf(src.dayTo, time.UTC)
		var read []date
		today := dateOf(s.now(), s.tz)
		for d := d0; d.before(d1); d = d.addDays(1) {
			if d == today {
				rows, err := s.modelToday(q, f.ProjectID, d)
				if err != nil {
					return err
				}
				add(rows)
				continue
			}
			if xmin, ok := days[d]; ok {
				if rows, kept := s.models.get(f.ProjectID, d, dayVersion{xmin: xmin}); kept {
					add(rows)
					continue
				}
			}
			read = append(read, d)
		}
		// With every whole day kept and no edge hours there is nothing to read.
		if len(read) > 0 || src.hasEdges() {
			got, err := s.modelSums(q, args, read)
			if err != nil {
				return err
			}
			for _, rows := range got {
				add(rows)
			}
			// A day without a row in rollup_days is read every time.
			for _, d := range read {
				if xmin, ok := days[d]; ok {
					s.models.put(f.ProjectID, d, dayVersion{xmin: xmin}, got[d])
				}
			}
		}
		ids := make([]int64, 0, len(sums))
		for k := range sums {
			ids = append(ids, k.id)
		}
		var err error
		names, err = s.names(q, f.ProjectID, ids)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cache models: %w", err)
	}
	byModel := map[cacheKey][]int64{}
	for k, n := range sums {
		key, ok := names[k.id]
		key.fallback = k.fallback
		if !ok || !f.selects(key) {
			continue
		}
		m := byModel[key]
		if m == nil {
			m = make([]int64, len(modelCols))
			byModel[key] = m
		}
		for i, v := range n {
			m[i] += v
		}
	}
	var out []cacheScan
	for k, n := range byModel {
		if n[kWriteCalls]+n[kReadCalls] > 0 {
			out = append(out, cacheScan{key: k, n: n})
		}
	}
	return out, nil
}
