package ingest

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerd/ledgerd/store"
)

// The fast path sums the rollups of a batch in Go. Every column of RollupSums and CacheSums is a
// sum over attempts of a per-row contribution (count(*) adds 1, a FILTER adds 0 or 1, a
// coalesce(sum(x), 0) adds x or 0); contributions gives each column's, by name. The SQL
// expressions stay the one definition (analytics' rebuild and reprice use them); the twin test
// checks that both paths write identical rollups.
var contributions = map[string]func(b *batch, i int) int64{
	"attempts":              func(*batch, int) int64 { return 1 },
	"calls":                 func(*batch, int) int64 { return 1 },
	"requests":              func(b *batch, i int) int64 { return flag(b.attemptNo[i] == 1) },
	"input_tokens":          func(b *batch, i int) int64 { return b.input[i] },
	"output_tokens":         func(b *batch, i int) int64 { return b.output[i] },
	"cache_write_tokens":    func(b *batch, i int) int64 { return b.cw[i] },
	"cache_write_1h_tokens": func(b *batch, i int) int64 { return b.cw1h[i] },
	"cache_read_tokens":     func(b *batch, i int) int64 { return b.cr[i] },
	"reasoning_tokens":      func(b *batch, i int) int64 { return b.reasoning[i] },
	"cache_write_calls":     func(b *batch, i int) int64 { return flag(b.cw[i] > 0) },
	"cache_read_calls":      func(b *batch, i int) int64 { return flag(b.cr[i] > 0) },
	"cost_nanos":            func(b *batch, i int) int64 { return orZero(b.cost[i]) },
	"nocache_cost_nanos":    func(b *batch, i int) int64 { return orZero(b.nocache[i]) },
	"unpriced_attempts":     func(b *batch, i int) int64 { return flag(b.cost[i] == nil) },
	"client_cost_nanos":     func(b *batch, i int) int64 { return orZero(b.clientCost[i]) },
	"cost_mismatch_attempts": func(b *batch, i int) int64 {
		client, cost := b.clientCost[i], b.cost[i]
		return flag(client != nil && cost != nil && abs(*client-*cost)*100 > *cost)
	},
	"latency_sum_ms": func(b *batch, i int) int64 { return int64(b.latency[i]) },
}

// rollupFuncs and cacheFuncs are the contributions in the column order of RollupSums and
// CacheSums, resolved once at start-up.
var (
	rollupFuncs = sumFuncs(RollupSums)
	cacheFuncs  = sumFuncs(CacheSums)
)

func sumFuncs(sums []Sum) []func(*batch, int) int64 {
	fs := make([]func(*batch, int) int64, len(sums))
	for i, s := range sums {
		f, ok := contributions[s.Col]
		if !ok {
			panic(fmt.Sprintf("ingest: rollup column %q has no Go contribution", s.Col))
		}
		fs[i] = f
	}
	return fs
}

func flag(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func orZero(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// latencyBucket is SQL latency_bucket: the schema-4 native-histogram bucket of a latency in ms.
func latencyBucket(ms int32) int {
	if ms <= 1 {
		return 0
	}
	return int(math.Ceil(16*math.Log(float64(ms))/math.Log(2) - 1e-9))
}

// hist is a latency histogram as rollups store it: counts[i] attempts in bucket lo+i.
type hist struct {
	lo     int
	counts []int64
}

func (h *hist) add(bucket int) {
	switch {
	case len(h.counts) == 0:
		h.lo, h.counts = bucket, []int64{0}
	case bucket < h.lo:
		grown := make([]int64, h.lo-bucket+len(h.counts))
		copy(grown[h.lo-bucket:], h.counts)
		h.lo, h.counts = bucket, grown
	case bucket >= h.lo+len(h.counts):
		h.counts = append(h.counts, make([]int64, bucket-h.lo-len(h.counts)+1)...)
	}
	h.counts[bucket-h.lo]++
}

// text renders the histogram as an int8[] literal whose lower bound is its first bucket, such as
// '[37:40]={1,0,2,5}'.
func (h *hist) text() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "[%d:%d]={", h.lo, h.lo+len(h.counts)-1)
	for i, c := range h.counts {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.FormatInt(c, 10))
	}
	sb.WriteByte('}')
	return sb.String()
}

// groupKey identifies one rollup row: bucket is the Unix second of the UTC hour (hourly, cache) or
// of the local date at UTC midnight (daily ones); status and class are empty for the cache rollup,
// and hash only set there; in a narrow daily rollup series is zero and keep holds the kept series
// columns.
type groupKey struct {
	project, bucket, series int64
	fallback                bool
	status, class, hash     string
	keep                    [maxKeep]string
}

// maxKeep is the most series columns a narrow rollup keeps.
const maxKeep = 3

// seriesCols reads each series column a narrow rollup may keep from a series key.
var seriesCols = map[string]func(store.SeriesKey) string{
	"tenant": func(k store.SeriesKey) string { return k.Tenant }, "service": func(k store.SeriesKey) string { return k.Service },
	"operation": func(k store.SeriesKey) string { return k.Operation }, "provider": func(k store.SeriesKey) string { return k.Provider },
	"model": func(k store.SeriesKey) string { return k.Model }, "fallback_from": func(k store.SeriesKey) string { return k.FallbackFrom },
}

// narrowKeep are, per narrow rollup of DailyBy, the readers of its kept columns, resolved once at
// start-up.
var narrowKeep = func() [][]func(store.SeriesKey) string {
	out := make([][]func(store.SeriesKey) string, len(DailyBy))
	for i, d := range DailyBy {
		if len(d.Keep) > maxKeep {
			panic(fmt.Sprintf("ingest: %s keeps more than %d series columns", d.Table, maxKeep))
		}
		for _, c := range d.Keep {
			f, ok := seriesCols[c]
			if !ok {
				panic(fmt.Sprintf("ingest: %s keeps %q, not a series column", d.Table, c))
			}
			out[i] = append(out[i], f)
		}
	}
	return out
}()

type group struct {
	sums []int64
	hist hist
}

// groups sums a batch's rows into the rows of one rollup table, in first-seen order.
type groups struct {
	width int // sum columns
	kept  int // series columns kept, in a narrow rollup
	index map[groupKey]int
	keys  []groupKey
	vals  []group
}

func newGroups(width int) *groups {
	return &groups{width: width, index: map[groupKey]int{}}
}

// add adds one row's contributions to its group, and its latency to the group's histogram unless
// bucket is negative.
func (g *groups) add(k groupKey, contrib []int64, bucket int) {
	n, ok := g.index[k]
	if !ok {
		n = len(g.keys)
		g.index[k] = n
		g.keys = append(g.keys, k)
		g.vals = append(g.vals, group{sums: make([]int64, g.width)})
	}
	v := &g.vals[n]
	for c, x := range contrib {
		v.sums[c] += x
	}
	if bucket >= 0 {
		v.hist.add(bucket)
	}
}

// keyLayout is which key columns a pending insert takes, in its key order: rollupKeyCols, cacheKeyCols,
// or a narrow rollup's keyCols.
type keyLayout int

const (
	seriesKeys keyLayout = iota
	cacheKeys
	narrowKeys
)

// args returns the arrays a pending insert of buildPendingSQL takes: keys in the layout's
// order, sums, histograms. Buckets go as UTC times, which PostgreSQL reads as the hour
// (timestamptz) or the date.
func (g *groups) args(layout keyLayout, hist bool) []any {
	n := len(g.keys)
	project, buckets, series, fallback := make([]int64, n), make([]time.Time, n), make([]int64, n), make([]bool, n)
	status, class, hash := make([]string, n), make([]string, n), make([]string, n)
	var keep [maxKeep][]string
	for c := range keep {
		keep[c] = make([]string, n)
	}
	for i, k := range g.keys {
		project[i], buckets[i], series[i], fallback[i] = k.project, time.Unix(k.bucket, 0).UTC(), k.series, k.fallback
		status[i], class[i], hash[i] = k.status, k.class, k.hash
		for c := range keep {
			keep[c][i] = k.keep[c]
		}
	}
	var args []any
	switch layout {
	case seriesKeys:
		args = []any{project, buckets, series, fallback, status, class}
	case cacheKeys:
		args = []any{project, buckets, series, fallback, hash}
	case narrowKeys:
		args = []any{project, buckets}
		for c := range g.kept {
			args = append(args, keep[c])
		}
		args = append(args, fallback, status, class)
	}
	for c := range g.width {
		col := make([]int64, n)
		for i := range g.vals {
			col[i] = g.vals[i].sums[c]
		}
		args = append(args, col)
	}
	if hist {
		h := make([]string, n)
		for i := range g.vals {
			h[i] = g.vals[i].hist.text()
		}
		args = append(args, h)
	}
	return args
}

// rollupBatch sums a batch (all rows new) into rollup rows and queues their inserts into the
// pending tables, in rollupTables order. Daily buckets
// are local dates in tz: Go's t.In(tz) date equals PostgreSQL's (t AT TIME ZONE tz)::date for the
// same zone rules.
func rollupBatch(b *batch, tz *time.Location) *pgx.Batch {
	hourly, daily, cache := newGroups(len(rollupFuncs)), newGroups(len(rollupFuncs)), newGroups(len(cacheFuncs))
	narrow := make([]*groups, len(DailyBy))
	for n := range narrow {
		narrow[n] = newGroups(len(rollupFuncs))
		narrow[n].kept = len(DailyBy[n].Keep)
	}
	// A row's contributions and latency bucket are worked out once, then added to each rollup.
	rc, cc := make([]int64, len(rollupFuncs)), make([]int64, len(cacheFuncs))
	for i := range b.n {
		for c, f := range rollupFuncs {
			rc[c] = f(b, i)
		}
		bucket := latencyBucket(b.latency[i])
		t := b.started[i]
		hour := t.Truncate(time.Hour).Unix()
		y, m, d := t.In(tz).Date()
		day := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix()
		k := groupKey{project: b.project[i], bucket: hour, series: b.series[i], fallback: b.fallback[i],
			status: b.status[i], class: b.class[i]}
		hourly.add(k, rc, bucket)
		k.bucket = day
		daily.add(k, rc, bucket)
		k.series = 0
		for n, keep := range narrowKeep {
			k.keep = [maxKeep]string{}
			for c, f := range keep {
				k.keep[c] = f(b.seriesKey[i])
			}
			narrow[n].add(k, rc, bucket)
		}
		if b.cw[i] > 0 || b.cr[i] > 0 || b.promptHash[i] != nil {
			for c, f := range cacheFuncs {
				cc[c] = f(b, i)
			}
			ck := groupKey{project: b.project[i], bucket: hour, series: b.series[i], fallback: b.fallback[i]}
			if p := b.promptHash[i]; p != nil {
				ck.hash = *p
			}
			cache.add(ck, cc, -1)
		}
	}
	q := &pgx.Batch{}
	q.Queue(pendingSQL[0], hourly.args(seriesKeys, true)...)
	q.Queue(pendingSQL[1], daily.args(seriesKeys, true)...)
	for n, g := range narrow {
		q.Queue(pendingSQL[2+n], g.args(narrowKeys, true)...)
	}
	if len(cache.keys) > 0 {
		q.Queue(pendingCacheSQL, cache.args(cacheKeys, false)...)
	}
	return q
}
