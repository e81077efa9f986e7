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

// cacheRowsSQL reads what cacheWeek needs in one snapshot: a row per series shape the filter
// selects (kind 0: its id and names), and rollup_cache_hourly's rows of those shapes over
// [@from, @to) as stored (kind 1: shape id, fallback flag, prompt hash, hour, the columns of
// cacheCols and single_use). The rollup keys its rows by hour, shape, fallback flag and hash, so
// nothing is grouped here: cacheWeek adds them up in Go. In SQL, the hashes' totals and the
// windows over each prefix's hours that found its break took most of the cache report's time when
// the shapes are many, and read the same rows twice (docs/performance.md).
var cacheRowsSQL = func() string {
	zeros := strings.TrimSuffix(strings.Repeat("0::int8, ", len(cacheCols)+1), ", ")
	cols := make([]string, len(cacheCols))
	for i, c := range cacheCols {
		cols[i] = "c." + c
	}
	return `WITH m AS MATERIALIZED (` + cacheShapesSQL + `)
	SELECT 0, id, false, NULL::text, NULL::timestamptz, ` + zeros + `, service, operation, provider, model
	FROM m
	UNION ALL
	SELECT 1, c.series_id, c.fallback, c.prompt_hash, c.bucket, ` + strings.Join(cols, ", ") + `,
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

// sinceOf finds when the prefix of hours (in any order; an hour may come more than once, from
// several hashes or shapes) broke: ok is false when nothing wrote it since it was last read back.
func sinceOf(hours []cacheHour) (b brokenSince, ok bool) {
	if len(hours) == 0 {
		return b, false
	}
	merged := byHour(hours)
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

// cacheWeek reads rollup_cache_hourly over f's range [from, to) once and returns the hash rows of
// the report (the prompt hashes with at least minCalls calls, and per model, hash nil, how many
// distinct hashes it saw and how many of them were used once in their month: see cacheScan) and
// when each prefix broke, keyed by its model and hash: each model's cache use as a whole (hash "")
// and each prompt_hash of it, a model being its service, operation, provider and model, whichever
// shapes carry them. Hashes used once in their month have no rows of their own (they are counted
// on their shape's empty-hash row, see migration 00005).
func (s *Service) cacheWeek(ctx context.Context, f Filter, from, to time.Time, minCalls int) ([]cacheScan, map[sinceKey]brokenSince, error) {
	args := filterArgs(f)
	args["project"], args["from"], args["to"] = f.ProjectID, from, to
	// A prefix is keyed by a number standing for its model (or, while the rows are read, for its
	// shape: the shapes' names may come after their rows), so no row's names are hashed.
	type prefix struct {
		id       int64
		fallback bool
		hash     string
	}
	type totals struct {
		hours     []cacheHour
		sums      []int64 // cacheCols, of a hash
		singleUse int64
	}
	var (
		byShape                             = map[prefix]*totals{}
		kind                                int
		shape                               int64
		fallback                            bool
		hash                                *string
		bucket                              *time.Time
		n                                   = make([]int64, len(cacheCols))
		singleUse                           int64
		service, operation, provider, model *string
		names                               = map[int64]cacheKey{}
	)
	of := func(m map[prefix]*totals, k prefix) (t *totals, added bool) {
		if t = m[k]; t == nil {
			t, added = &totals{}, true
			if k.hash != "" {
				t.sums = make([]int64, len(cacheCols))
			}
			m[k] = t
		}
		return t, added
	}
	dst := []any{&kind, &shape, &fallback, &hash, &bucket}
	for i := range n {
		dst = append(dst, &n[i])
	}
	dst = append(dst, &singleUse, &service, &operation, &provider, &model)
	err := s.read(ctx, cacheRowsSQL, args, dst, func() error {
		if kind == 0 {
			names[shape] = cacheKey{service: *service, operation: *operation, provider: *provider, model: *model}
			return nil
		}
		h := cacheHour{at: *bucket, calls: n[kCalls], writes: n[kWriteCalls], reads: n[kReadCalls],
			cost: n[kCost], nocache: n[kNoCache], unpriced: n[kUnpriced]}
		t, _ := of(byShape, prefix{id: shape, fallback: fallback})
		t.hours, t.singleUse = append(t.hours, h), t.singleUse+singleUse
		if hash != nil && *hash != "" {
			t, _ = of(byShape, prefix{shape, fallback, *hash})
			t.hours = append(t.hours, h)
			for i, v := range n {
				t.sums[i] += v
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("cache prompts: %w", err)
	}
	// The shapes' prefixes added up per model (shapes that differ only in what the report does not
	// show, such as the model a fallback stands in for, are one model), counting its distinct hashes.
	var (
		models   []cacheKey
		number   = map[cacheKey]int64{}
		prefixes = map[prefix]*totals{}
		distinct = map[prefix]int64{}
	)
	for k, st := range byShape {
		name := names[k.id]
		id, ok := number[name]
		if !ok {
			id = int64(len(models))
			number[name] = id
			models = append(models, name)
		}
		t, added := of(prefixes, prefix{id, k.fallback, k.hash})
		if added && k.hash != "" {
			distinct[prefix{id: id, fallback: k.fallback}]++
		}
		t.hours, t.singleUse = append(t.hours, st.hours...), t.singleUse+st.singleUse
		for i, v := range st.sums {
			t.sums[i] += v
		}
	}
	var hashes []cacheScan
	since := map[sinceKey]brokenSince{}
	for k, t := range prefixes {
		key := models[k.id]
		key.fallback = k.fallback
		if k.hash == "" {
			hashes = append(hashes, cacheScan{key: key, hashes: distinct[k] + t.singleUse, singleUse: t.singleUse,
				n: make([]int64, len(cacheCols))})
		} else if t.sums[kCalls] >= int64(minCalls) {
			hashes = append(hashes, cacheScan{key: key, hash: &k.hash, n: t.sums})
		}
		if b, ok := sinceOf(t.hours); ok {
			since[sinceKey{key: key, hash: k.hash}] = b
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
