package ingest

import (
	"slices"
	"time"

	"github.com/ledgerd/ledgerd/internal/rollup"
	"github.com/ledgerd/ledgerd/internal/store"
)

// The fast path sums a batch's load deltas (rollup.LoadSums and the lowest headroom of each of
// rollup.LoadLimits) in Go, per minute and key, and COPYs them into pending_load_minute; the exact
// path counts them in SQL (rollup.PendingFrom). The twin test checks both write the same rows.

// pendingLoadCopySQL COPYs load groups: key, the local day, then rollup.LoadCols.
var pendingLoadCopySQL = copyStmt("pending_load_minute", slices.Concat(rollup.LoadKey, []string{"day"}, rollup.LoadCols))

// loadKey identifies one pending load row: minute is the Unix second of the UTC minute, day of the
// local date at UTC midnight.
type loadKey struct {
	project, minute, day                        int64
	org, provider, model, service, fallbackFrom string
	fallback                                    bool
}

// loadRow is the sums of one pending load row: rollup.LoadSums' columns in order, and the lowest
// headroom of each of rollup.LoadLimits.
type loadRow struct {
	sums   []int64
	lowest [4]rollup.Headroom
}

// loadGroups sums a batch's rows into pending load rows, in first-seen order.
type loadGroups struct {
	index map[loadKey]int
	keys  []loadKey
	rows  []loadRow
}

// loadOf sums b (all rows new) per UTC minute and load key, with local days days (localDays).
func loadOf(b *batch, days []int64) *loadGroups {
	g := &loadGroups{index: map[loadKey]int{}}
	var a rollup.Attempt
	for i := range b.n {
		k := loadKey{project: b.project[i], minute: b.started[i].Truncate(time.Minute).Unix(), day: days[i],
			provider: b.key[i].Provider, model: b.key[i].Model, service: b.key[i].Service, fallback: b.fallback[i],
			fallbackFrom: b.key[i].FallbackFrom}
		if o := b.org[i]; o != nil {
			k.org = *o
		}
		n, ok := g.index[k]
		if !ok {
			n = len(g.keys)
			g.index[k] = n
			g.keys = append(g.keys, k)
			g.rows = append(g.rows, loadRow{sums: make([]int64, len(rollup.LoadSums))})
		}
		r := &g.rows[n]
		a = b.attempt(i)
		for c, s := range rollup.LoadSums {
			r.sums[c] += s.Add(&a)
		}
		if rl := b.limits[i]; rl != nil {
			for j, l := range limitsOf(rl) {
				if h := (rollup.Headroom{Remaining: l.Remaining, Limit: l.Limit}); l.Reported() && h.Below(r.lowest[j]) {
					r.lowest[j] = h
				}
			}
		}
	}
	return g
}

// appendCopy appends the groups to msg as the data of pendingLoadCopySQL.
func (g *loadGroups) appendCopy(msg []byte) []byte {
	c := startCopy(msg)
	for i, k := range g.keys {
		c.row(len(rollup.LoadKey) + 1 + len(rollup.LoadCols))
		c.i8(k.project)
		c.timestamp(k.minute * 1e6)
		c.text(k.org)
		c.text(k.provider)
		c.text(k.model)
		c.text(k.service)
		c.boolean(k.fallback)
		c.text(k.fallbackFrom)
		c.date(k.day)
		r := &g.rows[i]
		for _, v := range r.sums {
			c.i8(v)
		}
		for _, h := range r.lowest {
			if h.Limit == 0 {
				c.null()
				c.null()
				continue
			}
			c.i8(h.Remaining)
			c.i8(h.Limit)
		}
	}
	return c.end()
}

// seriesKeys lists the series keys of rows, for the load rollup's provider, model and service.
func seriesKeys(rows []*row) []*store.SeriesKey {
	out := make([]*store.SeriesKey, len(rows))
	for i, r := range rows {
		out[i] = &r.series
	}
	return out
}
