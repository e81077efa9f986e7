package analytics

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ledgerd/ledgerd/money"
)

// cacheHoursSQL reads each model's cache use over [@from, @to) from rollup_cache_hourly: each
// model's names once (kind 0), and the rollup's rows as stored (kind 1), each with the model_id of
// its shape (cacheShapesSQL, every shape), in no order; cacheIncidents adds every prompt_hash and
// shape of a model's hour together (a model's broken cache is one incident, whichever hashes show
// it). With many tenants, grouping the rows in SQL, by names or by model_id, took most of the
// open incidents' time (docs/performance.md).
const cacheHoursSQL = `WITH m AS MATERIALIZED (` + cacheShapesSQL + `)
	SELECT DISTINCT 0, model_id, false, NULL::timestamptz, 0::int8, 0::int8, 0::int8, 0::int8, 0::int8, 0::int8,
		service, operation, provider, model
	FROM m
	UNION ALL
	SELECT 1, m.model_id, c.fallback, c.bucket, c.calls, c.cache_write_calls, c.cache_read_calls,
		c.cost_nanos, c.nocache_cost_nanos, c.unpriced_attempts, NULL, NULL, NULL, NULL
	FROM rollup_cache_hourly c JOIN m ON m.id = c.series_id
	WHERE c.project_id = @project AND c.bucket >= @from AND c.bucket < @to`

// cacheHour is one hour of a model's cache use.
type cacheHour struct {
	at                                            time.Time
	calls, writes, reads, cost, nocache, unpriced int64
}

// cacheIncidents finds the broken caches that overlap [from, to): per model, from the first hour
// that wrote without reads after an hour that read (or from its first hour, when it never read)
// to the next hour that read, with at least CacheMinCalls writing calls; open while no hour up to
// now read. Hours from SpendDays before from are read, for the hours the cache worked in.
func (s *Service) cacheIncidents(ctx context.Context, project int64, from, to, now time.Time, p IncidentParams) ([]Incident, error) {
	readFrom := from.AddDate(0, 0, -p.SpendDays)
	type modelKey struct {
		id       int64
		fallback bool
	}
	var (
		kind                                int
		k                                   modelKey
		at                                  *time.Time
		h                                   cacheHour
		service, operation, provider, model *string
		names                               = map[int64]cacheKey{}
		hours                               = map[modelKey][]cacheHour{}
	)
	args := filterArgs(Filter{})
	args["project"], args["from"], args["to"] = project, readFrom, now.Add(time.Hour)
	err := s.read(ctx, cacheHoursSQL, args,
		[]any{&kind, &k.id, &k.fallback, &at, &h.calls, &h.writes, &h.reads, &h.cost, &h.nocache, &h.unpriced,
			&service, &operation, &provider, &model},
		func() error {
			if kind == 0 {
				names[k.id] = cacheKey{service: *service, operation: *operation, provider: *provider, model: *model}
				return nil
			}
			h.at = *at
			hours[k] = append(hours[k], h)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("incidents: cache: %w", err)
	}
	// Models in the order of their names (model_id ranks them), each one's hours in time order.
	keys := slices.SortedFunc(maps.Keys(hours), func(a, b modelKey) int {
		return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(boolInt(a.fallback), boolInt(b.fallback)))
	})
	var out []Incident
	for _, k := range keys {
		for _, in := range cacheBreaks(byHour(hours[k]), p) {
			if !overlaps(in.StartedAt, in.EndedAt, from, to) {
				continue
			}
			n := names[k.id]
			in.Service, in.Operation, in.Provider, in.Model = n.service, n.operation, n.provider, n.model
			out = append(out, in)
		}
	}
	return out, nil
}

// cacheBreaks lists the breaks of one model's cache in its hours (in order): each from the first
// hour that wrote and did not read after an hour that read (or the first hour, when none read
// before) to the next hour that read (EndedAt nil when none did).
func cacheBreaks(hours []cacheHour, p IncidentParams) []Incident {
	var (
		out                                    []Incident
		workCalls, workCost, workUnpriced      int64
		readOnce, broken                       bool
		start                                  time.Time
		calls, writes, cost, nocache, unpriced int64
	)
	flush := func(end *time.Time) {
		if !broken {
			return
		}
		broken = false
		if writes < p.CacheMinCalls {
			return
		}
		in := Incident{Kind: KindCacheBroken, StartedAt: start, EndedAt: end, CallsAffected: calls}
		if priced := calls - unpriced; priced > 0 {
			var e money.Nanos
			switch before := workCalls - workUnpriced; {
			case readOnce && before > 0:
				e = money.Nanos(cost - priced*workCost/before)
				in.ExtraUSD = &e
			case !readOnce:
				e = money.Nanos(cost - nocache)
				in.ExtraUSD = &e
			}
		}
		out = append(out, in)
	}
	for i, h := range hours {
		switch {
		case h.reads > 0:
			at := h.at
			flush(&at)
			readOnce = true
			workCalls += h.calls
			workCost += h.cost
			workUnpriced += h.unpriced
			continue
		case !broken && (h.writes > 0 || (!readOnce && i == 0)):
			broken, start = true, h.at
			calls, writes, cost, nocache, unpriced = 0, 0, 0, 0, 0
		case !broken:
			continue
		}
		calls += h.calls
		writes += h.writes
		cost += h.cost
		nocache += h.nocache
		unpriced += h.unpriced
	}
	flush(nil)
	return out
}
