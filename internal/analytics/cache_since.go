package analytics

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ledgerd/ledgerd/money"
)

// When a cache broke. A prefix (a model's cache use, or one prompt_hash of it) is broken since the
// first hour it wrote without reads after the last hour it was read back in the range, or since its
// first hour when it was never read back; it counts as broken once at least the minimum of calls
// wrote it since then. Its extra cost is what the calls since then cost beyond what as many calls
// cost while the cache worked (the calls of the hours before that one in which it was read back,
// at their mean cost, rounded down to the nano-dollar); never read back, beyond what they would
// have cost without caching.

// cacheRowsSQL reads rollup_cache_hourly over [@from, @to) for the shapes the filter selects, in
// one snapshot: each model's names once (kind 0: model_id and names, cacheShapesSQL), and the
// rollup's rows as stored (kind 1: the model_id of the row's shape, fallback flag, prompt hash
// when @per_hash, hour, the columns of cacheCols and single_use), in no order. The rollup keys its rows by hour,
// shape, fallback flag and hash, so nothing is grouped here: cachePrefixes adds them up in Go.
// Grouping them in SQL, per hash for the report's totals, per prefix and hour with windows for
// its breaks, and per model and hour for the incidents, took most of those reads' time when the
// shapes are many (docs/performance.md).
var cacheRowsSQL = func() string {
	zeros := strings.TrimSuffix(strings.Repeat("0::int8, ", len(cacheCols)+1), ", ")
	cols := make([]string, len(cacheCols))
	for i, c := range cacheCols {
		cols[i] = "c." + c
	}
	return `WITH m AS MATERIALIZED (` + cacheShapesSQL + `)
	SELECT DISTINCT 0, model_id, false, NULL::text, NULL::timestamptz, ` + zeros + `, service, operation, provider, model
	FROM m
	UNION ALL
	SELECT 1, m.model_id, c.fallback, CASE WHEN @per_hash THEN c.prompt_hash END, c.bucket, ` + strings.Join(cols, ", ") + `,
		c.single_use, NULL, NULL, NULL, NULL
	FROM rollup_cache_hourly c JOIN m ON m.id = c.series_id
	WHERE c.project_id = @project AND c.bucket >= @from AND c.bucket < @to`
}()

// add adds the hour o of another hash or shape to h.
func (h *cacheHour) add(o cacheHour) {
	h.calls, h.writes, h.reads = h.calls+o.calls, h.writes+o.writes, h.reads+o.reads
	h.cost, h.nocache, h.unpriced = h.cost+o.cost, h.nocache+o.nocache, h.unpriced+o.unpriced
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
			last.add(h)
		} else {
			merged = append(merged, h)
		}
	}
	return merged
}

// brokenSince is when a prefix broke and what it cost since (see the top of this file).
type brokenSince struct {
	since, lastRead                         *time.Time
	calls, writes, cost, nocache, unpriced  int64
	callsBefore, costBefore, unpricedBefore int64
}

// sinceOf finds when the prefix of hours (in time order, one per hour, as cachePrefixes gives
// them) broke: ok is false when nothing wrote it since it was last read back.
func sinceOf(merged []cacheHour) (b brokenSince, ok bool) {
	if len(merged) == 0 {
		return b, false
	}
	var since *time.Time
	for i := range merged {
		if merged[i].reads > 0 {
			b.lastRead = &merged[i].at
		}
	}
	if b.lastRead == nil {
		since = &merged[0].at
	} else {
		for i := range merged {
			if merged[i].writes > 0 && merged[i].at.After(*b.lastRead) {
				since = &merged[i].at
				break
			}
		}
	}
	if since == nil {
		return b, false
	}
	b.since = since
	for _, h := range merged {
		switch {
		case !h.at.Before(*since):
			b.calls, b.writes, b.cost, b.nocache, b.unpriced = b.calls+h.calls, b.writes+h.writes, b.cost+h.cost, b.nocache+h.nocache, b.unpriced+h.unpriced
		case h.reads > 0:
			b.callsBefore, b.costBefore, b.unpricedBefore = b.callsBefore+h.calls, b.costBefore+h.cost, b.unpricedBefore+h.unpriced
		}
	}
	return b, true
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

// cachePrefix is what rollup_cache_hourly holds of one prefix over a range: its hours, in time
// order and one per hour; of a hash, its totals (the columns of cacheCols); of a model, the calls
// of hashes used once in their month (counted on their shape's empty-hash row, see migration
// 00005) and how many distinct hashes have rows of their own.
type cachePrefix struct {
	hours             []cacheHour
	sums              []int64
	singleUse, hashes int64
}

// cachePrefixes reads rollup_cache_hourly over f's range [from, to) once (cacheRowsSQL) and adds
// it up per prefix: each model's cache use as a whole (hash "") and, when perHash, each
// prompt_hash of it, a model being its service, operation, provider and model, whichever shapes
// carry them. The incidents need the models only: with the hashes their read took about a third
// longer (docs/performance.md).
func (s *Service) cachePrefixes(ctx context.Context, f Filter, from, to time.Time, perHash bool) (map[sinceKey]*cachePrefix, error) {
	args := filterArgs(f)
	args["project"], args["from"], args["to"], args["per_hash"] = f.ProjectID, from, to, perHash
	// Keyed by model_id while the rows are read, so no row's names are hashed; the names may come
	// after their rows.
	type prefix struct {
		model    int64
		fallback bool
		hash     string
	}
	var (
		byID                                = map[prefix]*cachePrefix{}
		names                               = map[int64]cacheKey{}
		kind                                int
		k                                   prefix
		hash                                *string
		at                                  *time.Time
		n                                   = make([]int64, len(cacheCols))
		singleUse                           int64
		service, operation, provider, model *string
	)
	dst := []any{&kind, &k.model, &k.fallback, &hash, &at}
	for i := range n {
		dst = append(dst, &n[i])
	}
	dst = append(dst, &singleUse, &service, &operation, &provider, &model)
	err := s.read(ctx, cacheRowsSQL, args, dst, func() error {
		if kind == 0 {
			names[k.model] = cacheKey{service: *service, operation: *operation, provider: *provider, model: *model}
			return nil
		}
		h := cacheHour{at: *at, calls: n[kCalls], writes: n[kWriteCalls], reads: n[kReadCalls],
			cost: n[kCost], nocache: n[kNoCache], unpriced: n[kUnpriced]}
		m := byID[k]
		if m == nil {
			m = &cachePrefix{}
			byID[k] = m
		}
		m.hours, m.singleUse = append(m.hours, h), m.singleUse+singleUse
		if hash == nil || *hash == "" {
			return nil
		}
		hk := prefix{k.model, k.fallback, *hash}
		p := byID[hk]
		if p == nil {
			p = &cachePrefix{sums: make([]int64, len(cacheCols))}
			byID[hk] = p
			m.hashes++
		}
		p.hours = append(p.hours, h)
		for i, v := range n {
			p.sums[i] += v
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cache prefixes: %w", err)
	}
	out := make(map[sinceKey]*cachePrefix, len(byID))
	for k, p := range byID {
		key := names[k.model]
		key.fallback = k.fallback
		p.hours = byHour(p.hours)
		out[sinceKey{key: key, hash: k.hash}] = p
	}
	return out, nil
}

// cacheWeek gives the report's hash rows (the prompt hashes with at least minCalls calls, and per
// model, hash nil, how many distinct hashes it saw and how many of them were used once in their
// month: see cacheScan) and when each prefix broke, from the prefixes of f's range [from, to).
func (s *Service) cacheWeek(ctx context.Context, f Filter, from, to time.Time, minCalls int) ([]cacheScan, map[sinceKey]brokenSince, error) {
	prefixes, err := s.cachePrefixes(ctx, f, from, to, true)
	if err != nil {
		return nil, nil, err
	}
	var hashes []cacheScan
	since := map[sinceKey]brokenSince{}
	for k, p := range prefixes {
		if k.hash == "" {
			hashes = append(hashes, cacheScan{key: k.key, hashes: p.hashes + p.singleUse, singleUse: p.singleUse,
				n: make([]int64, len(cacheCols))})
		} else if p.sums[kCalls] >= int64(minCalls) {
			hash := k.hash
			hashes = append(hashes, cacheScan{key: k.key, hash: &hash, n: p.sums})
		}
		if b, ok := sinceOf(p.hours); ok {
			since[k] = b
		}
	}
	return hashes, since, nil
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
