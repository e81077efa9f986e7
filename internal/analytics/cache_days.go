package analytics

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerd/ledgerd/internal/rollup"
)

// The local days' cache summaries (rollup_cache_daily), kept between reads. The Overview's open
// incidents read a week of them on every load, 34,000 rows at 10,000 tenants, and turning those
// rows into spans took most of that read's time, in Go (docs/performance.md). A day's summaries
// change only when the writer sums the day again, which writes its row of rollup_cache_days again
// in the same transaction; so the Service keeps each day's rows, read once, with the through and
// the xmin of that row, and reads a day again only when either has changed.

// cacheDaySumsSQL reads the summaries of the local days @days: each row's day (its midnight, as a
// UTC timestamp), names and the columns of rollup.CacheDayCols; every model's and hash's row.
var cacheDaySumsSQL = `SELECT (bucket::timestamp AT TIME ZONE 'UTC') AS day, service, operation, provider, model, fallback,
		prompt_hash, ` + strings.Join(rollup.CacheDayCols, ", ") + `
	FROM rollup_cache_daily WHERE project_id = @project AND bucket = ANY(@days::date[])`

// summed is a local day whose summaries a read takes: the hours [lo, hi) of day (hi its through),
// summed by the transaction xmin.
type summed struct {
	day    date
	lo, hi time.Time
	xmin   int64
}

// version is the summing of the day the read takes.
func (d summed) version() dayVersion { return dayVersion{through: d.hi.UnixMicro(), xmin: d.xmin} }

// dayVersion tells one summing of a day from another: its through (Unix microseconds) and the
// transaction that wrote its row of rollup_cache_days.
type dayVersion struct{ through, xmin int64 }

// dayRow is one row of a day's summaries: a prefix's span, and its sums (cacheCols) when it is a
// hash's, or the calls of its hashes used once when it is a model's.
type dayRow struct {
	key       *sinceKey
	span      cacheSpan
	sums      []int64
	singleUse int64
}

// keptDays are the local days' rows (of type R) read so far, by project and day, the least
// recently used dropped once they hold more than maxKeptRows rows. Their rows are shared by the
// reads that take them, which only read them.
type keptDays[R any] struct {
	mu    sync.Mutex
	days  map[keptDay]*keptRows[R]
	rows  int
	clock uint64
}

// keptDay is a project's local day: what keptDays and the incidents' hours (s.hours) are kept by.
type keptDay struct {
	project int64
	day     date
}

type keptRows[R any] struct {
	version dayVersion
	rows    []R
	used    uint64
}

// maxKeptRows bounds each keptDays: for the cache summaries some 40 MB, a month of the models'
// of a ledger of 10,000 tenants and 50 services, or about three weeks with their hashes' too; for
// the models' daily sums (cache_models.go) some 15 MB, about two weeks of that ledger.
const maxKeptRows = 1 << 17

// get returns the rows of the project's day as of version, if kept.
func (k *keptDays[R]) get(project int64, d date, v dayVersion) ([]R, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e := k.days[keptDay{project, d}]
	if e == nil || e.version != v {
		return nil, false
	}
	k.clock++
	e.used = k.clock
	return e.rows, true
}

// put keeps the rows of the project's day as of version, dropping the least recently used days
// while more than maxKeptRows rows are kept (never the day put).
func (k *keptDays[R]) put(project int64, d date, v dayVersion, rows []R) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.days == nil {
		k.days = map[keptDay]*keptRows[R]{}
	}
	key := keptDay{project, d}
	if old := k.days[key]; old != nil {
		k.rows -= len(old.rows)
	}
	k.clock++
	k.days[key] = &keptRows[R]{version: v, rows: rows, used: k.clock}
	k.rows += len(rows)
	for k.rows > maxKeptRows && len(k.days) > 1 {
		oldest := leastUsed(k.days, key, func(e *keptRows[R]) uint64 { return e.used })
		k.rows -= len(k.days[oldest].rows)
		delete(k.days, oldest)
	}
}

// leastUsed is the key of m's entry used least recently (the smallest used), keep aside: what a
// bounded keeper of reads drops first.
func leastUsed[K comparable, E any](m map[K]E, keep K, used func(E) uint64) K {
	var (
		oldest K
		least  uint64
	)
	for k, e := range m {
		if u := used(e); k != keep && (least == 0 || u < least) {
			oldest, least = k, u
		}
	}
	return oldest
}

// cacheDays adds the summaries of the local days days into the prefixes (prefix finds or adds
// one), a span each, of the models f selects (its service, operation, provider and model) and,
// when perHash, of their hashes: the days kept as they were last summed from keptDays, the others
// read (cacheDaySumsSQL) and kept.
func (s *Service) cacheDays(q queryFunc, f Filter, perHash bool, days []summed, prefix func(sinceKey) *cachePrefix) error {
	rows := make([][]dayRow, len(days))
	var missing []int
	for i, d := range days {
		var ok bool
		if rows[i], ok = s.kept.get(f.ProjectID, d.day, d.version()); !ok {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		names := make([]string, len(missing))
		for j, i := range missing {
			names[j] = days[i].day.String()
		}
		read, err := s.readDays(q, f.ProjectID, names)
		if err != nil {
			return err
		}
		for _, i := range missing {
			rows[i] = read[days[i].day]
			s.kept.put(f.ProjectID, days[i].day, days[i].version(), rows[i])
		}
	}
	found := map[*sinceKey]*cachePrefix{}
	for _, day := range rows {
		for i := range day {
			r := &day[i]
			if (!perHash && r.key.hash != "") || !f.selects(r.key.key) {
				continue
			}
			p := found[r.key]
			if p == nil {
				p = prefix(*r.key)
				found[r.key] = p
			}
			if len(p.spans) == cap(p.spans) {
				p.spans = slices.Grow(p.spans, len(days))
			}
			p.spans = append(p.spans, r.span)
			if r.key.hash == "" {
				p.singleUse += r.singleUse
			} else {
				for i, v := range r.sums {
					p.sums[i] += v
				}
			}
		}
	}
	return nil
}

// readDays reads the summaries of the project's local days days (cacheDaySumsSQL), by day. A
// week holds tens of thousands of them at 10,000 tenants, so a row's prefix is found by its names'
// bytes as read, and its values are read as sent (rawRow): a string made of each name of each
// row, and a scan destination per column, took most of this read's time in CPU profiles
// (docs/performance.md).
func (s *Service) readDays(q queryFunc, project int64, days []string) (map[date][]dayRow, error) {
	var (
		row = rawRow{cols: slices.Concat([]string{"day", "service", "operation", "provider", "model", "fallback", "prompt_hash"},
			rollup.CacheDayCols)}
		// The columns' positions, found by their names once.
		at = func(names ...string) []int {
			out := make([]int, len(names))
			for i, name := range names {
				out[i] = row.col(name)
			}
			return out
		}
		names                       = at("service", "operation", "provider", "model", "prompt_hash")
		sums                        = at(cacheCols...)
		fromSince                   = at("since_calls", "since_writes", "since_cost", "since_nocache", "since_unpriced")
		reading                     = at("read_calls", "read_cost", "read_unpriced")
		cDay, cFallback, cSingleUse = row.col("day"), row.col("fallback"), row.col("single_use")
		cFirst, cLastRead, cSince   = row.col("first_hour"), row.col("last_read"), row.col("since")
		n                           = make([]int64, len(cacheCols))
		key                         []byte
		found                       = map[string]*sinceKey{}
		out                         = map[date][]dayRow{}
	)
	args := pgx.NamedArgs{"project": project, "days": days}
	err := q(cacheDaySumsSQL, args, []any{&row}, func() error {
		key = key[:0]
		for _, i := range names {
			key = append(append(key, row.text(i)...), 0)
		}
		fallback := row.bool(cFallback)
		if fallback {
			key = append(key, 1)
		}
		k := found[string(key)]
		if k == nil {
			k = &sinceKey{key: cacheKey{service: string(row.text(names[0])), operation: string(row.text(names[1])),
				provider: string(row.text(names[2])), model: string(row.text(names[3])), fallback: fallback},
				hash: string(row.text(names[4]))}
			found[string(key)] = k
		}
		for i, col := range sums {
			n[i] = row.int8(col)
		}
		r := dayRow{key: k, span: cacheSpan{lastRead: row.time(cLastRead), since: row.time(cSince),
			all: cacheSums{calls: n[kCalls], writes: n[kWriteCalls], reads: n[kReadCalls], cost: n[kCost],
				nocache: n[kNoCache], unpriced: n[kUnpriced]},
			fromSince: cacheSums{calls: row.int8(fromSince[0]), writes: row.int8(fromSince[1]), cost: row.int8(fromSince[2]),
				nocache: row.int8(fromSince[3]), unpriced: row.int8(fromSince[4])},
			reading: cacheSums{calls: row.int8(reading[0]), cost: row.int8(reading[1]), unpriced: row.int8(reading[2])}}}
		if first := row.time(cFirst); first != nil {
			r.span.at = *first
		}
		if k.hash == "" {
			r.singleUse = row.int8(cSingleUse)
		} else {
			r.sums = slices.Clone(n)
		}
		var d date
		if t := row.time(cDay); t != nil {
			d = date{t.Year(), t.Month(), t.Day()}
		}
		if row.err != nil {
			return row.err
		}
		out[d] = append(out[d], r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cache days: %w", err)
	}
	return out, nil
}
