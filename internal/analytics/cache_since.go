package analytics

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerd/ledgerd/money"
)

// When a cache broke. A prefix (a model's cache use, or one prompt_hash of it) is broken since the
// first hour it wrote without reads after the last hour it was read back in the range, or since its
// first hour when it was never read back; it counts as broken once at least the minimum of calls
// wrote it since then. Its extra cost is what the calls since then cost beyond what as many calls
// cost while the cache worked (the calls of the hours before that one in which it was read back,
// at their mean cost, rounded down to the nano-dollar); never read back, beyond what they would
// have cost without caching.

// cacheRowsSQL reads rollup_cache_hourly's rows in the ranges [@los[i], @his[i]) as stored: the
// row's shape (a series id), fallback flag, prompt hash when @per_hash, hour, the columns of
// cacheCols and single_use, in no order. The rollup keys its rows by hour, shape, fallback flag
// and hash, so nothing is grouped here: cacheHours names the shapes and adds the rows up per model
// in Go. Grouping them in SQL, per hash for the report's totals, per prefix and hour with windows
// for its breaks, and per model and hour for the incidents, took most of those reads' time when
// the shapes are many; so did numbering the shapes by their names, and then looking their names
// up in series on every read (docs/performance.md). Each range is read by its own range scan of
// the rollup's key (OFFSET 0, as in modelMinutesSQL).
var cacheRowsSQL = `SELECT c.series_id, c.fallback, CASE WHEN @per_hash THEN c.prompt_hash END, c.bucket, ` +
	strings.Join(cacheCols, ", ") + `, c.single_use
	FROM unnest(@los::timestamptz[], @his::timestamptz[]) w(lo, hi)
	CROSS JOIN LATERAL (SELECT * FROM rollup_cache_hourly c WHERE c.project_id = @project AND c.bucket >= w.lo
		AND c.bucket < w.hi OFFSET 0) c`

// shapeNamesSQL reads the names of the shapes @ids of the project (cacheShapes); an id that is
// not a shape of the project is left out.
var shapeNamesSQL = cacheShapes("s.id = ANY(@ids::int8[])")

// shapeNames are the names of the series shapes the cache reads have met, by id (series ids are
// one identity over all projects). A series row never changes and is never deleted, so a shape's
// names are read from series once
// (shapeNamesSQL) and kept: the cache hours' rows name only their shape, where looking up every
// shape of a read in series took most of its statement's time at 10,000 tenants
// (docs/performance.md). The shapes are a project's services, operations and models, not its
// tenants; the map is emptied should it ever hold maxShapeNames of them.
type shapeNames struct {
	mu sync.Mutex
	m  map[int64]cacheKey
}

// maxShapeNames bounds shapeNames.
const maxShapeNames = 1 << 20

// get returns the names of the shapes ids that it holds, and the ids it does not hold.
func (n *shapeNames) get(ids []int64) (map[int64]cacheKey, []int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[int64]cacheKey, len(ids))
	var missing []int64
	for _, id := range ids {
		if k, ok := n.m[id]; ok {
			out[id] = k
		} else {
			missing = append(missing, id)
		}
	}
	return out, missing
}

// put keeps the names of shapes.
func (n *shapeNames) put(names map[int64]cacheKey) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil || len(n.m)+len(names) > maxShapeNames {
		n.m = make(map[int64]cacheKey, len(names))
	}
	maps.Copy(n.m, names)
}

// names finds the names of the project's shapes ids: those read before from shapeNames, the
// others with shapeNamesSQL, in the snapshot of q. An id that is not a shape has none.
func (s *Service) names(q queryFunc, project int64, ids []int64) (map[int64]cacheKey, error) {
	out, missing := s.shapes.get(ids)
	if len(missing) == 0 {
		return out, nil
	}
	var (
		id  int64
		k   cacheKey
		got = map[int64]cacheKey{}
	)
	args := filterArgs(Filter{})
	args["project"], args["ids"] = project, missing
	err := q(shapeNamesSQL, args, []any{&id, &k.service, &k.operation, &k.provider, &k.model}, func() error {
		got[id] = k
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("shape names: %w", err)
	}
	s.shapes.put(got)
	maps.Copy(out, got)
	return out, nil
}

// cacheDaysSQL lists the local days @days (dates) whose summaries in rollup_cache_daily may be read
// (rollup.SummarizeCacheDays), each with its through and the transaction that last summed it (the
// row's xmin: a day is summed again, its row written again, whenever its summaries change).
const cacheDaysSQL = `SELECT d.bucket, d.through, d.xmin::text::int8 FROM rollup_cache_days d
	WHERE d.project_id = @project AND d.bucket = ANY(@days::date[]) AND NOT EXISTS (
		SELECT 1 FROM cache_days_dirty x WHERE x.project_id = d.project_id AND x.bucket = d.bucket AND x.hour < d.through)`

// cacheSums are a prefix's sums over some of its hours.
type cacheSums struct{ calls, writes, reads, cost, nocache, unpriced int64 }

func (c *cacheSums) add(o cacheSums) {
	c.calls, c.writes, c.reads = c.calls+o.calls, c.writes+o.writes, c.reads+o.reads
	c.cost, c.nocache, c.unpriced = c.cost+o.cost, c.nocache+o.nocache, c.unpriced+o.unpriced
}

// cacheHour is one hour of a prefix's cache use: a model's or one prompt_hash's of it.
type cacheHour struct {
	at time.Time
	cacheSums
}

// cacheSpan is what a prefix did in a span of its hours, from its first hour at: one hour, or a
// local day up to its summary's through (a row of rollup_cache_daily). lastRead is its last hour
// that read and since its first hour after that one that wrote (nil when none); all sums every
// hour, fromSince the hours from since on, reading the hours that read.
type cacheSpan struct {
	at                      time.Time
	lastRead, since         *time.Time
	all, fromSince, reading cacheSums
}

// spanOf is the span of one hour.
func spanOf(h cacheHour) cacheSpan {
	sp := cacheSpan{at: h.at, all: h.cacheSums}
	switch {
	case h.reads > 0:
		sp.lastRead, sp.reading = &sp.at, h.cacheSums
	case h.writes > 0:
		sp.since, sp.fromSince = &sp.at, h.cacheSums
	}
	return sp
}

// byHour sorts hours (of several hashes or shapes) in time and adds up those of the same hour, in
// place, returning them.
func byHour(hours []cacheHour) []cacheHour {
	if len(hours) == 0 {
		return hours
	}
	slices.SortFunc(hours, func(x, y cacheHour) int { return x.at.Compare(y.at) })
	merged := hours[:1]
	for _, h := range hours[1:] {
		if last := &merged[len(merged)-1]; last.at.Equal(h.at) {
			last.add(h.cacheSums)
		} else {
			merged = append(merged, h)
		}
	}
	return merged
}

// cacheState is where a prefix stands after its spans (in time order): the last hour that read,
// whether and since when it is broken (see the top of this file) with the sums of its hours since
// then, and the sums of every hour that read. The hours that read all come before since, so the
// spans' sums give it as their hours would.
type cacheState struct {
	lastRead, since    *time.Time
	fromSince, reading cacheSums
}

// stateOf is the state after spans, in time order: their joined span's, except that a prefix
// never read back is broken since its first hour, every call counted.
func stateOf(spans []cacheSpan) cacheState {
	if len(spans) == 0 {
		return cacheState{}
	}
	j := joinSpans(spans)
	st := cacheState{lastRead: j.lastRead, since: j.since, fromSince: j.fromSince, reading: j.reading}
	if j.lastRead == nil {
		st.since, st.fromSince = &spans[0].at, j.all
	}
	return st
}

// brokenSince is when a prefix broke and what it cost since (see the top of this file).
type brokenSince struct {
	since, lastRead                         *time.Time
	calls, writes, cost, nocache, unpriced  int64
	callsBefore, costBefore, unpricedBefore int64
}

// sinceOf finds when the prefix of spans (in time order, as cachePrefixes gives them) broke: ok is
// false when nothing wrote it since it was last read back.
func sinceOf(spans []cacheSpan) (b brokenSince, ok bool) {
	st := stateOf(spans)
	if st.since == nil {
		return b, false
	}
	f, r := st.fromSince, st.reading
	return brokenSince{since: st.since, lastRead: st.lastRead, calls: f.calls, writes: f.writes, cost: f.cost,
		nocache: f.nocache, unpriced: f.unpriced, callsBefore: r.calls, costBefore: r.cost, unpricedBefore: r.unpriced}, true
}

// extra is the extra cost of a broken prefix (see the top of this file); nil when the calls since
// it broke are all unpriced, or when the calls it is compared with are.
func (b brokenSince) extra() *money.Nanos {
	priced := b.calls - b.unpriced
	if priced == 0 {
		return nil
	}
	var e money.Nanos
	if before := b.callsBefore - b.unpricedBefore; b.lastRead != nil && before > 0 {
		// The calls of the working period at their mean cost, rounded down: exact in integers.
		e = money.Nanos(b.cost - priced*b.costBefore/before)
	} else if b.lastRead == nil {
		e = money.Nanos(b.cost - b.nocache)
	} else {
		return nil
	}
	return &e
}

// cachePrefix is what the cache rollups hold of one prefix over a range: its spans, in time order
// (hours, and days summed up to their through); of a hash, its totals (the columns of cacheCols);
// of a model, the calls of hashes used once in their month (counted on their shape's empty-hash
// row, see migration 00005) and how many distinct hashes have rows of their own.
type cachePrefix struct {
	spans             []cacheSpan
	sums              []int64
	singleUse, hashes int64
	// kept marks a prefix of s.prefixes, which reads share and do not change.
	kept bool
}

// prefixSet adds up prefixes into m: a kept one is copied the first time it is added to, and the
// hashes that get prefixes of their own are counted per model as they are added (a kept model's
// count covers the kept hashes already).
type prefixSet struct {
	m     map[sinceKey]*cachePrefix
	added map[cacheKey]int64
}

// get finds k's prefix to add to.
func (ps *prefixSet) get(k sinceKey) *cachePrefix {
	p := ps.m[k]
	switch {
	case p == nil:
		p = &cachePrefix{}
		if k.hash != "" {
			p.sums = make([]int64, len(cacheCols))
			ps.added[k.key]++
		}
	case !p.kept:
		return p
	default:
		c := *p
		c.kept = false
		c.spans = append(make([]cacheSpan, 0, len(p.spans)+2), p.spans...)
		c.sums = slices.Clone(p.sums)
		p = &c
	}
	ps.m[k] = p
	return p
}

// finish adds the hashes counted to their models and puts the spans added to in time order.
func (ps *prefixSet) finish() {
	for k, n := range ps.added {
		ps.get(sinceKey{key: k}).hashes += n
	}
	for _, p := range ps.m {
		if !p.kept {
			slices.SortFunc(p.spans, func(a, b cacheSpan) int { return a.at.Compare(b.at) })
		}
	}
}

// joinSpans is the one span that stands for spans (in time order, at least one) wherever they
// stand among a prefix's spans: stateOf and cacheBreaks' state after them find the same with it in
// their place. It reads from the last span that read, if any; since is the first span from there
// on that wrote, fromSince its sums on.
func joinSpans(spans []cacheSpan) cacheSpan {
	j := cacheSpan{at: spans[0].at}
	last := -1
	for i := range spans {
		j.all.add(spans[i].all)
		j.reading.add(spans[i].reading)
		if spans[i].lastRead != nil {
			last = i
		}
	}
	from := 0
	if last >= 0 {
		j.lastRead, from = spans[last].lastRead, last
	}
	k := slices.IndexFunc(spans[from:], func(sp cacheSpan) bool { return sp.since != nil })
	if k < 0 {
		return j
	}
	k += from
	j.since, j.fromSince = spans[k].since, spans[k].fromSince
	for _, sp := range spans[k+1:] {
		j.fromSince.add(sp.all)
	}
	return j
}

// prefixSpanKey is one read of local days' summaries kept between reads: the project,
// whether per hash, the names f selects by (service, operation, provider, model), and the first
// and end day.
type prefixSpanKey struct {
	project  int64
	perHash  bool
	names    [4]string
	from, to date
}

// cachePrefixes reads the cache rollups over f's range [from, to) in one snapshot and adds them
// up per prefix: each model's cache use as a whole (hash "") and, when perHash, each prompt_hash of
// it, a model being its service, operation, provider and model, whichever shapes carry them. The
// local days that begin in [from, min(to, sumTo)) come from their summaries (rollup_cache_daily)
// up to their through, where those are up to date and end by min(to, sumTo) (today's, summed up
// to an hour before now, does), kept between reads (cacheDays); every other hour from
// rollup_cache_hourly. The incidents need the models only: with the hashes their hours took about
// a third longer (docs/performance.md).
//
// A day's summaries change only when it is summed again (today's about once an hour), so the
// summed days' prefixes are kept added up (s.prefixes) as of those days' versions: adding up a
// week's summaries, 50,000 rows at 10,000 tenants, took most of the cache report's time in Go. A
// read then adds the hours after them into copies of the prefixes they touch; the others it
// shares with the kept ones and does not change.
func (s *Service) cachePrefixes(ctx context.Context, f Filter, from, to, sumTo time.Time, perHash bool) (map[sinceKey]*cachePrefix, error) {
	var days []string
	if to.Before(sumTo) {
		sumTo = to
	}
	// The local days that begin in [from, sumTo): from the first midnight at or after from.
	for d := dateOf(from.Add(-time.Nanosecond), s.tz).addDays(1); d.start(s.tz).Before(sumTo); d = d.addDays(1) {
		days = append(days, d.String())
	}
	args := pgx.NamedArgs{"project": f.ProjectID, "per_hash": perHash, "days": days}
	ps := prefixSet{added: map[cacheKey]int64{}}
	err := s.readSnapshot(ctx, func(q queryFunc) error {
		// The hours not summed: the range less each summed day up to its through [lo, hi).
		var (
			sums     []summed
			day, thr time.Time
			xmin     int64
		)
		if len(days) > 0 {
			if err := q(cacheDaysSQL, args, []any{&day, &thr, &xmin}, func() error {
				d := date{day.Year(), day.Month(), day.Day()}
				if lo := d.start(s.tz); thr.After(lo) && !thr.After(sumTo) {
					sums = append(sums, summed{day: d, lo: lo, hi: thr, xmin: xmin})
				}
				return nil
			}); err != nil {
				return fmt.Errorf("cache days: %w", err)
			}
		}
		slices.SortFunc(sums, func(a, b summed) int { return a.lo.Compare(b.lo) })
		var los, his []time.Time
		at := from
		for _, sm := range sums {
			if at.Before(sm.lo) {
				los, his = append(los, at), append(his, sm.lo)
			}
			at = sm.hi
		}
		if at.Before(to) {
			los, his = append(los, at), append(his, to)
		}
		args["los"], args["his"] = los, his
		kept, err := s.keptPrefixes(q, f, perHash, sums)
		if err != nil {
			return err
		}
		ps.m = make(map[sinceKey]*cachePrefix, len(kept.value)+len(kept.value)/8)
		maps.Copy(ps.m, kept.value)
		if err := s.cacheHours(q, f, args, ps.get); err != nil {
			return err
		}
		return s.cacheDays(q, f, perHash, sums[kept.days:], ps.get)
	})
	if err != nil {
		return nil, fmt.Errorf("cache prefixes: %w", err)
	}
	ps.finish()
	return ps.m, nil
}

// keptSpan is the prefixes of a run of summed days, added up, and how many days they cover.
type keptSpan struct {
	value map[sinceKey]*cachePrefix
	days  int
}

// keptPrefixes gives the prefixes of the first days of sums (in time order) that follow one
// another (today's among them, summed up to its through): kept in s.prefixes as of their versions,
// or added up from their summaries (cacheDays) and kept. Their spans are in time order and their
// models count their hashes.
func (s *Service) keptPrefixes(q queryFunc, f Filter, perHash bool, sums []summed) (keptSpan, error) {
	n := 0
	for n < len(sums) && (n == 0 || sums[n].day == sums[n-1].day.addDays(1)) {
		n++
	}
	if n == 0 {
		return keptSpan{}, nil
	}
	key := prefixSpanKey{project: f.ProjectID, perHash: perHash, names: [4]string{f.Service, f.Operation, f.Provider, f.Model},
		from: sums[0].day, to: sums[n-1].day.addDays(1)}
	versions := make([]int64, 0, 2*n)
	for _, sm := range sums[:n] {
		v := sm.version()
		versions = append(versions, v.through, v.xmin)
	}
	if m, ok := s.prefixes.get(key, versions); ok {
		return keptSpan{value: m, days: n}, nil
	}
	ps := prefixSet{m: map[sinceKey]*cachePrefix{}, added: map[cacheKey]int64{}}
	if err := s.cacheDays(q, f, perHash, sums[:n], ps.get); err != nil {
		return keptSpan{}, err
	}
	ps.finish()
	for _, p := range ps.m {
		p.spans, p.kept = []cacheSpan{joinSpans(p.spans)}, true
	}
	s.prefixes.put(key, versions, ps.m, len(ps.m))
	return keptSpan{value: ps.m, days: n}, nil
}

// cacheHours reads the hours of cacheRowsSQL into the prefixes (prefix finds or adds one) of the
// shapes f selects (its project, service, operation, provider and model), each hour's rows added
// up and made a span.
func (s *Service) cacheHours(q queryFunc, f Filter, args pgx.NamedArgs, prefix func(sinceKey) *cachePrefix) error {
	// Keyed by shape while the rows are read, so no row's names are hashed.
	type key struct {
		shape    int64
		fallback bool
		hash     string
	}
	type read struct {
		hours     []cacheHour
		sums      []int64
		singleUse int64
	}
	var (
		byID      = map[key]*read{}
		k         key
		hash      *string
		at        time.Time
		n         = make([]int64, len(cacheCols))
		singleUse int64
	)
	dst := []any{&k.shape, &k.fallback, &hash, &at}
	for i := range n {
		dst = append(dst, &n[i])
	}
	dst = append(dst, &singleUse)
	err := q(cacheRowsSQL, args, dst, func() error {
		h := cacheHour{at: at, cacheSums: cacheSums{calls: n[kCalls], writes: n[kWriteCalls], reads: n[kReadCalls],
			cost: n[kCost], nocache: n[kNoCache], unpriced: n[kUnpriced]}}
		m := byID[key{k.shape, k.fallback, ""}]
		if m == nil {
			m = &read{}
			byID[key{k.shape, k.fallback, ""}] = m
		}
		m.hours, m.singleUse = append(m.hours, h), m.singleUse+singleUse
		if hash == nil || *hash == "" {
			return nil
		}
		hk := key{k.shape, k.fallback, *hash}
		p := byID[hk]
		if p == nil {
			p = &read{sums: make([]int64, len(cacheCols))}
			byID[hk] = p
		}
		p.hours = append(p.hours, h)
		for i, v := range n {
			p.sums[i] += v
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cache hours: %w", err)
	}
	var ids []int64
	for k := range byID {
		if k.hash == "" {
			ids = append(ids, k.shape)
		}
	}
	names, err := s.names(q, f.ProjectID, ids)
	if err != nil {
		return fmt.Errorf("cache hours: %w", err)
	}
	// The shapes of one model (the same names) added up into its prefix, those f selects; their
	// hours merged by hour (byHour) into the prefix's spans.
	hours := map[*cachePrefix][]cacheHour{}
	for k, r := range byID {
		key, ok := names[k.shape]
		if !ok || !f.selects(key) {
			continue
		}
		key.fallback = k.fallback
		p := prefix(sinceKey{key: key, hash: k.hash})
		if hs, ok := hours[p]; ok {
			hours[p] = append(hs, r.hours...)
		} else {
			hours[p] = r.hours
		}
		p.singleUse += r.singleUse
		for i, v := range r.sums {
			p.sums[i] += v
		}
	}
	for p, hs := range hours {
		for _, h := range byHour(hs) {
			p.spans = append(p.spans, spanOf(h))
		}
	}
	return nil
}

// selects tells whether f's service, operation, provider and model (those set) are k's, as
// seriesFilter does for a shape in SQL.
func (f Filter) selects(k cacheKey) bool {
	for _, c := range [][2]string{{f.Service, k.service}, {f.Operation, k.operation}, {f.Provider, k.provider}, {f.Model, k.model}} {
		if c[0] != "" && c[0] != c[1] {
			return false
		}
	}
	return true
}

// cacheWeek gives the report's hash rows (the prompt hashes with at least minCalls calls, and per
// model, hash nil, how many distinct hashes it saw and how many of them were used once in their
// month: see cacheScan), each with when its prefix broke, from the prefixes of f's range [from,
// to). The hashes with fewer calls get no row, so their breaks are not looked for.
func (s *Service) cacheWeek(ctx context.Context, f Filter, from, to time.Time, minCalls int) ([]cacheScan, error) {
	prefixes, err := s.cachePrefixes(ctx, f, from, to, to, true)
	if err != nil {
		return nil, err
	}
	var hashes []cacheScan
	for k, p := range prefixes {
		var c cacheScan
		if k.hash == "" {
			c = cacheScan{key: k.key, hashes: p.hashes + p.singleUse, singleUse: p.singleUse}
		} else if p.sums[kCalls] >= int64(minCalls) {
			hash := k.hash
			c = cacheScan{key: k.key, hash: &hash, n: p.sums}
		} else {
			continue
		}
		if b, ok := sinceOf(p.spans); ok {
			c.since = &b
		}
		hashes = append(hashes, c)
	}
	return hashes, nil
}

// sinceKey identifies a prefix: a model's cache use (hash "") or one prompt_hash of it.
type sinceKey struct {
	key  cacheKey
	hash string
}

// BrokenCaches counts the broken caches among rows: a model's broken cache once, whether its
// aggregate row, one of its prompt_hash rows or both show it.
func BrokenCaches(rows []CacheRow) int {
	seen := map[cacheKey]bool{}
	for _, r := range rows {
		if r.Broken {
			seen[cacheKey{r.Service, r.Operation, r.Provider, r.Model, r.Fallback}] = true
		}
	}
	return len(seen)
}
