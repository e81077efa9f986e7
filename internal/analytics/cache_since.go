package analytics

import (
	"context"
	"fmt"
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

// cacheSinceSQL reads rollup_cache_hourly over [@from, @to) per hour, for each prompt hash and for
// each model as a whole (prompt_hash NULL: every hash and the single-use row together), and
// returns per prefix whose tail since its last read (or since its first hour) holds writes: the
// hour it broke, the last hour it was read back (NULL: never), and the calls, cache-writing calls,
// cost, no-cache cost and unpriced calls since it broke, with the calls, cost and unpriced calls
// of the hours before in which it was read back. Prefixes are keyed as cacheHashSQL keys them.
var cacheSinceSQL = func() string {
	sums := func(filter string) string {
		var out []string
		for _, c := range []string{"calls", "cache_write_calls", "cost_nanos", "nocache_cost_nanos", "unpriced_attempts"} {
			out = append(out, fmt.Sprintf("sum8(%s) FILTER (WHERE %s)", c, filter))
		}
		return strings.Join(out, ", ")
	}
	cols := "calls, cache_write_calls, cache_read_calls, cost_nanos, nocache_cost_nanos, unpriced_attempts"
	var summed []string
	for _, c := range strings.Split(cols, ", ") {
		summed = append(summed, fmt.Sprintf("sum8(%[1]s) AS %[1]s", c))
	}
	return `WITH m AS (` + cacheShapesSQL + `), h AS MATERIALIZED (
		SELECT m.model_id, c.fallback, c.prompt_hash, c.bucket, ` + strings.Join(summed, ", ") + `
		FROM rollup_cache_hourly c JOIN m ON m.id = c.series_id
		WHERE c.project_id = @project AND c.bucket >= @from AND c.bucket < @to
		GROUP BY 1, 2, 3, 4
	), g AS (
		SELECT model_id, fallback, prompt_hash AS hash, bucket, ` + cols + ` FROM h WHERE prompt_hash <> ''
		UNION ALL
		SELECT model_id, fallback, NULL, bucket, ` + strings.Join(summed, ", ") + ` FROM h GROUP BY 1, 2, 4
	), l AS (
		SELECT g.*, max(bucket) FILTER (WHERE cache_read_calls > 0) OVER w AS last_read, min(bucket) OVER w AS first
		FROM g WINDOW w AS (PARTITION BY model_id, fallback, hash)
	), b AS (
		SELECT l.*, CASE WHEN last_read IS NULL THEN first
			ELSE min(bucket) FILTER (WHERE cache_write_calls > 0 AND bucket > last_read) OVER (PARTITION BY model_id, fallback, hash) END AS since
		FROM l
	), s AS (
		SELECT model_id, fallback, hash, since, last_read, ` + sums("bucket >= since") + `,
			sum8(calls) FILTER (WHERE bucket < since AND cache_read_calls > 0),
			sum8(cost_nanos) FILTER (WHERE bucket < since AND cache_read_calls > 0),
			sum8(unpriced_attempts) FILTER (WHERE bucket < since AND cache_read_calls > 0)
		FROM b WHERE since IS NOT NULL GROUP BY 1, 2, 3, 4, 5
	)
	SELECT n.service, n.operation, n.provider, n.model, s.*
	FROM s JOIN (SELECT DISTINCT model_id, service, operation, provider, model FROM m) n USING (model_id)`
}()

// brokenSince is one row of cacheSinceSQL.
type brokenSince struct {
	since, lastRead                         *time.Time
	calls, writes, cost, nocache, unpriced  int64
	callsBefore, costBefore, unpricedBefore int64
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

// cacheSince reads when each prefix of f's range [from, to) broke, keyed by its model and hash.
func (s *Service) cacheSince(ctx context.Context, f Filter, from, to time.Time) (map[sinceKey]brokenSince, error) {
	args := filterArgs(f)
	args["project"], args["from"], args["to"] = f.ProjectID, from, to
	var (
		key     cacheKey
		hash    *string
		modelID int64
		b       brokenSince
		nulls   [8]*int64
	)
	out := map[sinceKey]brokenSince{}
	dst := []any{&key.service, &key.operation, &key.provider, &key.model, &modelID, &key.fallback, &hash, &b.since, &b.lastRead}
	for i := range nulls {
		dst = append(dst, &nulls[i])
	}
	err := s.read(ctx, cacheSinceSQL, args, dst, func() error {
		r := b
		for i, p := range []*int64{&r.calls, &r.writes, &r.cost, &r.nocache, &r.unpriced, &r.callsBefore, &r.costBefore, &r.unpricedBefore} {
			*p = 0
			if nulls[i] != nil {
				*p = *nulls[i]
			}
		}
		k := sinceKey{key: key}
		if hash != nil {
			k.hash = *hash
		}
		out[k] = r
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cache broken since: %w", err)
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
