package analytics

import (
	"context"
	"fmt"
	"slices"
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

// cacheRowsSQL reads what cacheSince needs in one snapshot: a row per series shape the filter
// selects (kind 0: its id and names), and rollup_cache_hourly's rows of those shapes over
// [@from, @to) as stored (kind 1: shape id, fallback flag, prompt hash, hour and the sums
// cacheSince adds up). The rollup keys its rows by hour, shape, fallback flag and hash, so nothing
// is grouped here: adding the hours up per prefix with a window over each, in SQL, took most of
// the cache report's time when the shapes are many (docs/performance.md).
const cacheRowsSQL = `WITH m AS MATERIALIZED (
		SELECT s.id, s.service, s.operation, s.provider, s.model
		FROM series s WHERE s.project_id = @project AND s.id = s.shape_id AND ` + seriesFilter + `
	)
	SELECT 0, id, false, NULL::text, NULL::timestamptz, 0::int8, 0::int8, 0::int8, 0::int8, 0::int8, 0::int8,
		service, operation, provider, model
	FROM m
	UNION ALL
	SELECT 1, c.series_id, c.fallback, c.prompt_hash, c.bucket, c.calls, c.cache_write_calls, c.cache_read_calls,
		c.cost_nanos, c.nocache_cost_nanos, c.unpriced_attempts, NULL, NULL, NULL, NULL
	FROM rollup_cache_hourly c JOIN m ON m.id = c.series_id
	WHERE c.project_id = @project AND c.bucket >= @from AND c.bucket < @to`

func (h *cacheHour) add(o cacheHour) {
	h.calls, h.writes, h.reads = h.calls+o.calls, h.writes+o.writes, h.reads+o.reads
	h.cost, h.nocache, h.unpriced = h.cost+o.cost, h.nocache+o.nocache, h.unpriced+o.unpriced
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
	slices.SortFunc(hours, func(x, y cacheHour) int { return x.at.Compare(y.at) })
	merged := hours[:1]
	for _, h := range hours[1:] {
		if last := &merged[len(merged)-1]; last.at.Equal(h.at) {
			last.add(h)
		} else {
			merged = append(merged, h)
		}
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

// cacheSince reads when each prefix of f's range [from, to) broke, keyed by its model and hash:
// each model's cache use as a whole (hash "") and each prompt_hash of it, as cacheHashSQL keys
// them (a model being its service, operation, provider and model, whichever shapes carry them).
func (s *Service) cacheSince(ctx context.Context, f Filter, from, to time.Time) (map[sinceKey]brokenSince, error) {
	args := filterArgs(f)
	args["project"], args["from"], args["to"] = f.ProjectID, from, to
	type shapeHour struct {
		shape    int64
		fallback bool
		hash     string
		h        cacheHour
	}
	var (
		kind                                int
		shape                               int64
		fallback                            bool
		hash                                *string
		bucket                              *time.Time
		h                                   cacheHour
		service, operation, provider, model *string
		names                               = map[int64]cacheKey{}
		rows                                []shapeHour
	)
	dst := []any{&kind, &shape, &fallback, &hash, &bucket, &h.calls, &h.writes, &h.reads, &h.cost, &h.nocache, &h.unpriced,
		&service, &operation, &provider, &model}
	err := s.read(ctx, cacheRowsSQL, args, dst, func() error {
		if kind == 0 {
			names[shape] = cacheKey{service: *service, operation: *operation, provider: *provider, model: *model}
			return nil
		}
		r := shapeHour{shape: shape, fallback: fallback, h: h}
		r.h.at = *bucket
		if hash != nil {
			r.hash = *hash
		}
		rows = append(rows, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cache broken since: %w", err)
	}
	// The hours of each prefix: a model's under hash "", and again under their hash if they have
	// one. Models are numbered, so a row's prefix is found without hashing its names.
	type prefix struct {
		model    int
		fallback bool
		hash     string
	}
	var (
		models   []cacheKey
		number   = map[cacheKey]int{}
		modelOf  = make(map[int64]int, len(names))
		prefixes = map[prefix][]cacheHour{}
	)
	for shape, k := range names {
		n, ok := number[k]
		if !ok {
			n = len(models)
			number[k] = n
			models = append(models, k)
		}
		modelOf[shape] = n
	}
	for _, r := range rows {
		k := prefix{model: modelOf[r.shape], fallback: r.fallback}
		prefixes[k] = append(prefixes[k], r.h)
		if r.hash != "" {
			k.hash = r.hash
			prefixes[k] = append(prefixes[k], r.h)
		}
	}
	out := map[sinceKey]brokenSince{}
	for k, hours := range prefixes {
		if b, ok := sinceOf(hours); ok {
			key := models[k.model]
			key.fallback = k.fallback
			out[sinceKey{key: key, hash: k.hash}] = b
		}
	}
	return out, nil
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
