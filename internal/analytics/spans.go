package analytics

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// A summary's whole local days before today, kept between reads. With 10,000 tenants the month by
// tenant adds up some 300,000 rows of the tenant rollups with their histograms on every read, 1.3 s
// of it at 10M records (docs/performance.md), where only today's rows change while calls come in.
// A day's rows of every daily rollup change only by a statement that also writes the day's row of
// rollup_days (a fold, a reprice, a rebuild: internal/rollup/days.go), so the Service keeps a
// summary's groups over its whole days before today with the xmin of each of those days' rows,
// and reads only today and the edge hours while none of them has changed.

// keptRead is a read's value V as of the versions of the local days it covers (the xmin of each
// day's row of rollup_days, 0 for a day without one), read before the value was, and its size.
type keptRead[V any] struct {
	versions []int64
	value    V
	size     int
	used     uint64
}

// spanKey is one question over one span: the project, the statement asked with the grouping, the
// grouping, the filter's values and the span's first and end day.
type spanKey struct {
	project  int64
	query    string
	grouping string
	filter   [5]string
	from, to date
}

// keptReads are the values read so far by key, the least recently used dropped once their sizes
// add up to more than maxKept: a summary's span is as large as its groups, a recovery is 1. Their
// values are shared by the reads that take them, which only read them.
type keptReads[K comparable, V any] struct {
	mu    sync.Mutex
	reads map[K]*keptRead[V]
	size  int
	clock uint64
}

// maxKept bounds each keptReads: for the summaries' groups some 60 MB at the size of a month's
// tenant groups (about 1 kB a group with its histogram), six months by 10,000 tenants.
const maxKept = 1 << 16

// get returns the value of k as of versions, if kept.
func (kr *keptReads[K, V]) get(k K, versions []int64) (V, bool) {
	kr.mu.Lock()
	defer kr.mu.Unlock()
	e := kr.reads[k]
	if e == nil || !slices.Equal(e.versions, versions) {
		var zero V
		return zero, false
	}
	kr.clock++
	e.used = kr.clock
	return e.value, true
}

// put keeps the value v (of size size) of k as of versions, dropping the least recently used
// while more than maxKept is kept; a value larger than that is not kept.
func (kr *keptReads[K, V]) put(k K, versions []int64, v V, size int) {
	if size > maxKept {
		return
	}
	kr.mu.Lock()
	defer kr.mu.Unlock()
	if kr.reads == nil {
		kr.reads = map[K]*keptRead[V]{}
	}
	if old := kr.reads[k]; old != nil {
		kr.size -= old.size
	}
	kr.clock++
	kr.reads[k] = &keptRead[V]{versions: versions, value: v, size: size, used: kr.clock}
	kr.size += size
	for kr.size > maxKept {
		oldest := leastUsed(kr.reads, k, func(e *keptRead[V]) uint64 { return e.used })
		kr.size -= kr.reads[oldest].size
		delete(kr.reads, oldest)
	}
}

// keepsSpans tells whether a summary grouped as g with plan p reads whole days that may be kept:
// plans of daily rollups, not grouped by hour or minute (which read hours only), and not asking
// for the calls by attempts (read from the raw attempts of the whole range).
func keepsSpans(g grouping, p plan, f Filter) bool {
	return !g.hourly && !g.minute && !p.raw && !f.WithAttempts
}

// readSpans reads a question over the effective range [from, to) of a plan that keepsSpans, with
// read (given the plan's parameters, s.args, and for the rest its source), in two parts: the
// range's whole days before today (local), taken from ks as of the versions of those days or read
// and kept there under key (its days set here), and the rest (today, the days after, the edge
// hours), read each time. It returns the parts there are, the span's first.
func readSpans[V any](ctx context.Context, s *Service, ks *keptReads[spanKey, V], key spanKey, f Filter, from, to time.Time,
	read func(ctx context.Context, args pgx.NamedArgs, rest *source) (V, error), size func(V) int) ([]V, error) {
	src := s.split(from, to, false)
	cut := dateOf(s.now(), s.tz).civil()
	if src.dayTo.Before(cut) {
		cut = src.dayTo
	}
	if !src.dayFrom.Before(cut) {
		v, err := read(ctx, s.args(f, src), nil)
		return []V{v}, err
	}
	span, rest := src, src
	span.dayTo, span.edges = cut, [2][2]time.Time{{from, from}, {to, to}}
	rest.dayFrom = cut
	spanArgs := s.args(f, span)

	key.from, key.to = dateOf(span.dayFrom, time.UTC), dateOf(cut, time.UTC)
	days, err := s.dayVersions(ctx, f.ProjectID, key.from, key.to)
	if err != nil {
		return nil, err
	}
	versions := versionsOf(days, key.from, key.to)

	parts := make([]V, 2)
	kept, ok := ks.get(key, versions)
	parts[0] = kept
	eg, ectx := errgroup.WithContext(ctx)
	if !ok {
		eg.Go(func() (err error) {
			parts[0], err = read(ectx, spanArgs, nil)
			return err
		})
	}
	hasRest := rest.dayFrom.Before(rest.dayTo) || rest.hasEdges()
	if hasRest {
		eg.Go(func() (err error) {
			parts[1], err = read(ectx, s.args(f, rest), &rest)
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	if !ok {
		ks.put(key, versions, parts[0], size(parts[0]))
	}
	if !hasRest {
		parts = parts[:1]
	}
	return parts, nil
}

// dayVersions are the xmins of the rows of rollup_days of the project's local days [from, to):
// a day's rollups, and its attempts once folded, change only by a statement that writes its row.
func (s *Service) dayVersions(ctx context.Context, project int64, from, to date) (days map[date]int64, err error) {
	err = s.readTx(ctx, pgx.ReadCommitted, func(q queryFunc) error {
		days, err = readDayVersions(q, project, from, to)
		return err
	})
	return days, err
}

// versionsOf lists the versions (dayVersions' days) of the local days [from, to), in order.
func versionsOf(days map[date]int64, from, to date) []int64 {
	var vs []int64
	for d := from; d.before(to); d = d.addDays(1) {
		vs = append(vs, days[d])
	}
	return vs
}

// readDayVersions is dayVersions read with q, in a read's transaction.
func readDayVersions(q queryFunc, project int64, from, to date) (map[date]int64, error) {
	days := map[date]int64{}
	var (
		day  time.Time
		xmin int64
	)
	if err := q(modelDaysSQL, pgx.NamedArgs{"project": project, "day_from": from.civil(), "day_to": to.civil()},
		[]any{&day, &xmin}, func() error {
			days[date{day.Year(), day.Month(), day.Day()}] = xmin
			return nil
		}); err != nil {
		return nil, fmt.Errorf("days: %w", err)
	}
	return days, nil
}

// summaryKey is the spanKey of a summary grouped as g with plan p and filter f.
func summaryKey(g grouping, p plan, f Filter, query string) spanKey {
	k := spanKey{project: f.ProjectID, query: fmt.Sprintf(query, g.columns(p.seriesAlias())), grouping: fmt.Sprint(g.dims, g.fallback)}
	copy(k.filter[:], filterValues(f))
	return k
}

// collectKept is collect for a summary that keepsSpans, over readSpans: the span's groups kept in
// s.spans, each merged into a group of the answer's own with the rest's; or, when the rest is
// today alone and the plan reads it from a narrow daily rollup, both kept, merged and all, in
// s.todays (today.go).
func (s *Service) collectKept(ctx context.Context, g grouping, p plan, f Filter, from, to time.Time) (Summary, error) {
	key := summaryKey(g, p, f, p.sums)
	var today *dayRows
	parts, err := readSpans(ctx, s, &s.spans, key, f, from, to,
		func(ctx context.Context, args pgx.NamedArgs, rest *source) (groups map[gkey]*acc, err error) {
			q := p
			if rest != nil {
				if day := dateOf(s.now(), s.tz); p.daily.Table != "" && rest.only(day) {
					tk := key
					tk.from, tk.to = day, day.addDays(1)
					today, err = s.today(ctx, g, p, args, tk)
					return nil, err
				}
				// The rest is mostly today: a row a group for each day, which the server would take
				// several times as long to add up (summing 17 columns of 48,000 tenant rows a day
				// took 150 ms at 10,000 tenants).
				q.sums = p.rows
			}
			groups, _, err = s.gather(ctx, g, q, f, from, to, args)
			return groups, err
		}, func(groups map[gkey]*acc) int { return len(groups) })
	if err != nil {
		return Summary{}, fmt.Errorf("summary: %w", err)
	}
	if today != nil {
		out := s.frame(g, from, to)
		out.Groups, out.Total = today.answer(g, s.tz, parts[0])
		return out, nil
	}
	// The span's groups are kept, so only read; the rest's are this read's own. The span is merged
	// into the rest, and a group of the span alone is taken as it is (build only reads its groups).
	groups := parts[0]
	if len(parts) == 2 {
		groups = parts[1]
		for k, a := range parts[0] {
			if m := groups[k]; m != nil {
				m.merge(a)
			} else {
				groups[k] = a
			}
		}
	}
	return s.build(g, f, from, to, groups, nil), nil
}

// only tells whether the source is the local day d alone, with no edge hours.
func (src source) only(d date) bool {
	return src.dayFrom.Equal(d.civil()) && src.dayTo.Equal(d.addDays(1).civil()) && !src.hasEdges()
}

// hasEdges tells whether the source has edge hours.
func (src source) hasEdges() bool {
	return src.edges[0][0].Before(src.edges[0][1]) || src.edges[1][0].Before(src.edges[1][1])
}
