package analytics

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/ledgerd/ledgerd/internal/numfmt"
	"github.com/ledgerd/ledgerd/internal/rollup"
	"github.com/ledgerd/ledgerd/money"
)

// DefaultMinCalls is the default number of cache-writing calls without a single read that marks a
// cache as broken, and the fewest calls a prompt_hash needs to be listed on its own.
const DefaultMinCalls = 10

// CacheRow is the prompt-cache record of one (service, operation, provider, model) — the aggregate
// row, PromptHash nil — or of one prompt_hash of it. A fallback model's calls form rows of their
// own (Fallback true).
//
// Calls counts attempts: every attempt of the model on the aggregate row, the attempts naming the
// hash on a hash row. PromptHashes counts the distinct hashes of the aggregate row's calls;
// SingleUseHashes those of them used by one call in their UTC month, which get no row of their
// own. Hit ratio is read / (input + written + read) tokens; savings_usd is nocache_cost_usd -
// cost_usd over priced attempts (negative: caching cost money); the amounts are nil when every
// call was unpriced. Broken means that since the last hour the prefix was read back (or since its
// first hour, when it never was) at least the minimum of calls wrote it and none read it;
// BrokenSince is then the first of those hours that wrote, and ExtraCostUSD what the calls since
// cost beyond what as many cost while the cache worked (cache_since.go); Explanation says what
// that usually means.
type CacheRow struct {
	Service          string       `json:"service"`
	Operation        string       `json:"operation"`
	Provider         string       `json:"provider"`
	Model            string       `json:"model"`
	Fallback         bool         `json:"fallback"`
	PromptHash       *string      `json:"prompt_hash"`
	PromptHashes     int64        `json:"prompt_hashes"`
	SingleUseHashes  int64        `json:"single_use_hashes"`
	Calls            int64        `json:"calls"`
	CacheWriteCalls  int64        `json:"cache_write_calls"`
	CacheReadCalls   int64        `json:"cache_read_calls"`
	InputTokens      int64        `json:"input_tokens"`
	CacheWriteTokens int64        `json:"cache_write_tokens"`
	CacheReadTokens  int64        `json:"cache_read_tokens"`
	HitRatio         *float64     `json:"hit_ratio"`
	CostUSD          *money.Nanos `json:"cost_usd"`
	NoCacheCostUSD   *money.Nanos `json:"nocache_cost_usd"`
	SavingsUSD       *money.Nanos `json:"savings_usd"`
	UnpricedCalls    int64        `json:"unpriced_calls"`
	Broken           bool         `json:"broken"`
	BrokenSince      *time.Time   `json:"broken_since"`
	ExtraCostUSD     *money.Nanos `json:"extra_cost_usd"`
	Explanation      string       `json:"explanation,omitempty"`
	// readUntil is the last hour a broken prefix was read back, nil when never.
	readUntil *time.Time
}

// cacheCols are the columns of rollup_cache_hourly a cache row adds up (rollup.CacheSums, calls
// first), in the order cacheScan.n holds them.
var cacheCols = rollup.Cols(rollup.CacheSums)

// cacheShapes lists the series shapes the filter and the condition where select, with their
// names (service, operation, provider, model): rollup_cache_hourly keys its rows by shape
// (migration 00011), so the cache queries read only the shapes, not every tenant's series; the
// partial index series_shapes (migration 00033) finds them without reading the others. Shapes
// that differ only in what the reports do not show (such as the model a fallback stands in for)
// share their names, and their rows are added up by them.
func cacheShapes(where string) string {
	return `
		SELECT s.id, s.service, s.operation, s.provider, s.model
		FROM series s WHERE s.project_id = @project AND s.id = s.shape_id AND ` + where + ` AND ` + seriesFilter + `
	`
}

type cacheKey struct {
	service, operation, provider, model string
	fallback                            bool
}

// Cache reports prompt-cache use and what it saved or cost over f's range, broken caches first:
// one aggregate row per model that used the cache and one row per prompt_hash with at least
// minCalls calls (DefaultMinCalls when minCalls < 1). A cache is broken when it has at least
// minCalls cache-writing calls and no read. The aggregate row catches a broken cache whose
// prompt_hash changes on every call (a timestamp in the prompt), which no hash row can show. It
// takes no tenant: the cache rollup keeps series shapes (migration 00011).
func (s *Service) Cache(ctx context.Context, f Filter, minCalls int) ([]CacheRow, error) {
	if minCalls < 1 {
		minCalls = DefaultMinCalls
	}
	if f.Tenant != "" {
		return nil, badParam("tenant", "the cache report is by service, model and prompt: the cache rollup keeps no tenants")
	}
	from, to, err := s.window(f.From, f.To, true)
	if err != nil {
		return nil, err
	}
	key := cacheAnswerKey{project: f.ProjectID, names: [4]string{f.Service, f.Operation, f.Provider, f.Model},
		minCalls: minCalls, from: from.UnixMicro(), to: to.UnixMicro()}
	days, versions, err := s.cacheVersions(ctx, f.ProjectID, from, to)
	if err != nil {
		return nil, fmt.Errorf("cache: %w", err)
	}
	if rows, ok := s.answers.get(key, versions); ok {
		return slices.Clone(rows), nil
	}
	// The models' totals (from the main rollups), and the hashes and when each prefix broke (from
	// the cache rollup), are read at once, on two connections.
	var models, hashes []cacheScan
	eg, ectx := errgroup.WithContext(ctx)
	eg.Go(func() (err error) {
		hashes, err = s.cacheWeek(ectx, f, from, to, minCalls)
		return err
	})
	eg.Go(func() (err error) {
		models, err = s.cacheModels(ectx, f, from, to, days)
		return err
	})
	if err := eg.Wait(); err != nil {
		return nil, err
	}

	// broke marks r broken when its prefix broke (b, nil when it did not) with enough writes since;
	// the row's hash counts are set before, as its explanation reads them.
	broke := func(r *CacheRow, b *brokenSince) {
		if b != nil && b.writes >= int64(minCalls) {
			at := b.since.In(s.tz)
			r.Broken, r.BrokenSince, r.ExtraCostUSD, r.readUntil = true, &at, b.extra(), b.lastRead
			r.Explanation = explain(r)
		}
	}
	out := make([]CacheRow, 0, len(models)+len(hashes))
	byModel := make(map[cacheKey]int, len(models))
	for _, m := range models {
		byModel[m.key] = len(out)
		out = append(out, m.row())
	}
	for _, h := range hashes {
		if h.hash != nil {
			out = append(out, h.row())
			broke(&out[len(out)-1], h.since)
		} else if i, ok := byModel[h.key]; ok {
			out[i].PromptHashes, out[i].SingleUseHashes = h.hashes, h.singleUse
			broke(&out[i], h.since)
		}
	}
	// Sorted by reference, then copied once in order: thousands of rows of some 300 bytes each
	// cost the sort more in moving them than in comparing them.
	order := make([]*CacheRow, len(out))
	for i := range out {
		order[i] = &out[i]
	}
	slices.SortFunc(order, compareCacheRows)
	sorted := make([]CacheRow, len(out))
	for i, r := range order {
		sorted[i] = *r
	}
	s.answers.put(key, versions, sorted, len(sorted))
	return slices.Clone(sorted), nil
}

// A cache report's answer changes only when the rows it reads do, and every statement that
// writes them writes again a row of its local day that says so: rollup_days for the main rollups
// (internal/rollup/days.go: a fold, a reprice, a rebuild), cache_days_dirty for the cache rollup's
// hours (a fold's or a reprice's markCacheDaysSQL) and rollup_cache_days for a day's summary (a
// summing, a rebuild). So the Service keeps each answer with the xmins of those rows over its
// days, read before it is worked out, and answers again from it while none has changed: at
// 10,000 tenants an answer is some 9,500 rows worked out from 60,000 prefixes, most of the
// report's time on a quiet ledger (docs/performance.md). While calls come in, each fold changes
// today's rows, and the answer is worked out again.

// cacheAnswerKey is one cache report's question: the project, the filter's names, the minimum of
// calls and the effective range.
type cacheAnswerKey struct {
	project  int64
	names    [4]string
	minCalls int
	from, to int64
}

// cacheDayVersionsSQL lists the local days [@day_from, @day_to) with a row of rollup_cache_days
// or cache_days_dirty, with the xmins of those rows (0 for a row not there).
const cacheDayVersionsSQL = `SELECT bucket::timestamp, coalesce(c.v, 0), coalesce(x.v, 0)
	FROM (SELECT bucket, xmin::text::int8 AS v FROM rollup_cache_days
		WHERE project_id = @project AND bucket >= @day_from AND bucket < @day_to) c
	FULL JOIN (SELECT bucket, xmin::text::int8 AS v FROM cache_days_dirty
		WHERE project_id = @project AND bucket >= @day_from AND bucket < @day_to) x USING (bucket)`

// cacheVersions reads, in one transaction, the versions of the local days [from, to) touches:
// their rows of rollup_days (readDayVersions, which the models' kept days are kept by) and of
// rollup_cache_days and cache_days_dirty (cacheDayVersionsSQL). It returns the first by day, and
// all three as one list (versionsOf of each table's, in turn).
func (s *Service) cacheVersions(ctx context.Context, project int64, from, to time.Time) (map[date]int64, []int64, error) {
	d0, d1 := s.localDays(from, to)
	var days map[date]int64
	summed, dirty := map[date]int64{}, map[date]int64{}
	err := s.readTx(ctx, pgx.ReadCommitted, func(q queryFunc) (err error) {
		if days, err = readDayVersions(q, project, d0, d1); err != nil {
			return err
		}
		var (
			day  time.Time
			c, x int64
		)
		return q(cacheDayVersionsSQL, pgx.NamedArgs{"project": project, "day_from": d0.civil(), "day_to": d1.civil()},
			[]any{&day, &c, &x}, func() error {
				d := date{day.Year(), day.Month(), day.Day()}
				summed[d], dirty[d] = c, x
				return nil
			})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("versions: %w", err)
	}
	return days, slices.Concat(versionsOf(days, d0, d1), versionsOf(summed, d0, d1), versionsOf(dirty, d0, d1)), nil
}

// cacheScan is one row of the report before it is priced: a model's (cacheModels) or a hash's
// (cacheWeek).
type cacheScan struct {
	key               cacheKey
	hash              *string
	hashes, singleUse int64
	n                 []int64 // the columns of cacheCols
	// since is when the prefix broke (cacheWeek's rows only), nil when it did not.
	since *brokenSince
}

// The columns of cacheCols a cache row reads, by position.
var (
	kCalls      = rollup.Index(rollup.CacheSums, "calls")
	kWriteCalls = rollup.Index(rollup.CacheSums, "cache_write_calls")
	kReadCalls  = rollup.Index(rollup.CacheSums, "cache_read_calls")
	kInput      = rollup.Index(rollup.CacheSums, "input_tokens")
	kWritten    = rollup.Index(rollup.CacheSums, "cache_write_tokens")
	kRead       = rollup.Index(rollup.CacheSums, "cache_read_tokens")
	kCost       = rollup.Index(rollup.CacheSums, "cost_nanos")
	kNoCache    = rollup.Index(rollup.CacheSums, "nocache_cost_nanos")
	kUnpriced   = rollup.Index(rollup.CacheSums, "unpriced_attempts")
)

func (c *cacheScan) row() CacheRow {
	n := c.n
	r := CacheRow{Service: c.key.service, Operation: c.key.operation, Provider: c.key.provider, Model: c.key.model,
		Fallback: c.key.fallback, PromptHash: c.hash, Calls: n[kCalls], CacheWriteCalls: n[kWriteCalls],
		CacheReadCalls: n[kReadCalls], InputTokens: n[kInput], CacheWriteTokens: n[kWritten],
		CacheReadTokens: n[kRead], UnpricedCalls: n[kUnpriced]}
	if c.hash != nil {
		r.PromptHashes = 1
	}
	r.HitRatio = ratio(n[kRead], n[kInput]+n[kWritten]+n[kRead])
	r.CostUSD = amount(money.Nanos(n[kCost]), n[kCalls], n[kUnpriced])
	r.NoCacheCostUSD = amount(money.Nanos(n[kNoCache]), n[kCalls], n[kUnpriced])
	r.SavingsUSD = amount(money.Nanos(n[kNoCache]-n[kCost]), n[kCalls], n[kUnpriced])
	return r
}

// explain says what a broken cache row means and what it cost.
func explain(r *CacheRow) string {
	var b strings.Builder
	switch {
	case r.PromptHash != nil:
		fmt.Fprintf(&b, "prompt_hash %s was written to the cache by %s calls and never read back: the provider sees a different prefix every time, so something that changes on every call (a timestamp, a request id) sits before the cached part of the prompt, outside what the hash covers, or calls come further apart than the cache lifetime.",
			*r.PromptHash, numfmt.Count(r.CacheWriteCalls))
	case r.PromptHashes*10 >= r.Calls*9:
		fmt.Fprintf(&b, "%s calls wrote %s tokens to the cache and none was read back, and the calls carried %s different prompt_hash values: something that changes on every call (a timestamp, a request id, a user name) sits before the cached part of the prompt. Move it after the cache breakpoint.",
			numfmt.Count(r.CacheWriteCalls), numfmt.Count(r.CacheWriteTokens), numfmt.Count(r.PromptHashes))
	default:
		fmt.Fprintf(&b, "%s calls wrote %s tokens to the cache and none was read back: something that changes on every call (a timestamp, a request id) sits before the cached part of the prompt, or calls come further apart than the cache lifetime.",
			numfmt.Count(r.CacheWriteCalls), numfmt.Count(r.CacheWriteTokens))
	}
	if r.readUntil != nil {
		fmt.Fprintf(&b, " It was read back until %s UTC and broke at %s UTC.", r.readUntil.UTC().Format("2006-01-02 15:04"),
			r.BrokenSince.UTC().Format("2006-01-02 15:04"))
	}
	if r.SavingsUSD != nil && *r.SavingsUSD < 0 {
		fmt.Fprintf(&b, " Caching cost %s more than not caching.", (-*r.SavingsUSD).USDFine())
	}
	return b.String()
}

// compareCacheRows puts broken rows first, then the largest losses, then the busiest rows.
func compareCacheRows(a, b *CacheRow) int {
	if a.Broken != b.Broken {
		if a.Broken {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(savingsOrder(a), savingsOrder(b)); c != 0 {
		return c
	}
	if c := cmp.Compare(b.Calls, a.Calls); c != 0 {
		return c
	}
	return cmp.Or(strings.Compare(a.Service, b.Service), strings.Compare(a.Operation, b.Operation),
		strings.Compare(a.Provider, b.Provider), strings.Compare(a.Model, b.Model),
		cmp.Compare(boolInt(a.Fallback), boolInt(b.Fallback)), strings.Compare(hashOrder(a), hashOrder(b)))
}

func savingsOrder(r *CacheRow) int64 {
	if r.SavingsUSD == nil {
		return 1 << 62
	}
	return int64(*r.SavingsUSD)
}

// hashOrder puts the aggregate row (no hash) before the rows of its hashes, which are never "".
func hashOrder(r *CacheRow) string {
	if r.PromptHash == nil {
		return ""
	}
	return *r.PromptHash
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
