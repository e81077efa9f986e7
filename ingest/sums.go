package ingest

import (
	"math"
	"time"

	"github.com/ledgerd/ledgerd/internal/rollup"
)

// The fast path sums the rollups of a batch in Go: every column of rollup.Sums and
// rollup.CacheSums is a sum over attempts of a per-row contribution (Sum.Add), the twin of its
// SQL expression; the twin test checks that both paths write identical rollups.

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

// groupKey identifies one pending rollup row: bucket is the Unix second of the UTC hour; day, of
// the local date at UTC midnight, and minute, the first of the row's 5 minutes of the hour, are set
// for the hourly rows (the fold sums them into the daily rollups and rollup_minute5 by them);
// status and class are empty for the cache groups, and hash only set there.
type groupKey struct {
	project, bucket, day, series int64
	minute                       int16
	fallback                     bool
	status, class, hash          string
}

type group struct {
	sums []int64
	hist hist
}

// groups sums a batch's rows into the rows of one pending table, in first-seen order.
type groups struct {
	width int // sum columns
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

// attempt is what the rollup sums read of row i (rollup.Sum.Add): the hourly, cache and load
// groups all sum the same value.
func (b *batch) attempt(i int) rollup.Attempt {
	a := rollup.Attempt{AttemptNo: b.attemptNo[i], LatencyMS: b.latency[i], Input: b.input[i], Output: b.output[i],
		CacheWrite: b.cw[i], CacheWrite1h: b.cw1h[i], CacheRead: b.cr[i], Reasoning: b.reasoning[i],
		Cost: b.cost[i], NoCache: b.nocache[i], ClientCost: b.clientCost[i], UsageUnknown: b.usageUnknown[i],
		ErrorClass: b.class[i], Status: b.status[i]}
	if s := b.httpStatus[i]; s != nil {
		a.HTTPStatus = *s
	}
	return a
}

// localDays are the local dates of the batch's rows in tz, as Unix seconds of their UTC midnight:
// Go's t.In(tz) date equals PostgreSQL's (t AT TIME ZONE tz)::date for the same zone rules. The
// hourly and the load groups both key rows by them; they are worked out once a batch.
func localDays(b *batch, tz *time.Location) []int64 {
	days := make([]int64, b.n)
	for i := range b.n {
		y, m, d := b.started[i].In(tz).Date()
		days[i] = time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix()
	}
	return days
}

// rollupGroups sums a batch (all rows new) into pending rollup rows, per UTC 5 minutes and local day
// (days: localDays), and into cache groups.
func rollupGroups(b *batch, days []int64) (hourly, cache *groups) {
	hourly, cache = newGroups(len(rollup.Sums)), newGroups(len(rollup.CacheSums))
	// A row's contributions and latency bucket are worked out once, then added to its groups.
	rc, cc := make([]int64, len(rollup.Sums)), make([]int64, len(rollup.CacheSums))
	var a rollup.Attempt
	for i := range b.n {
		a = b.attempt(i)
		for c, s := range rollup.Sums {
			rc[c] = s.Add(&a)
		}
		t := b.started[i]
		hour := t.Truncate(time.Hour).Unix()
		hourly.add(groupKey{project: b.project[i], bucket: hour, day: days[i], minute: int16(t.UTC().Minute() / 5 * 5),
			series: b.series[i], fallback: b.fallback[i], status: b.status[i], class: b.class[i]},
			rc, latencyBucket(b.latency[i]))
		if b.cw[i] > 0 || b.cr[i] > 0 || b.promptHash[i] != nil {
			for c, s := range rollup.CacheSums {
				cc[c] = s.Add(&a)
			}
			ck := groupKey{project: b.project[i], bucket: hour, series: b.series[i], fallback: b.fallback[i]}
			if p := b.promptHash[i]; p != nil {
				ck.hash = *p
			}
			cache.add(ck, cc, -1)
		}
	}
	return hourly, cache
}
