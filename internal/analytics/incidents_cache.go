package analytics

import (
	"context"
	"fmt"
	"time"

	"github.com/ledgerd/ledgerd/money"
)

// cacheHoursSQL is each model's cache use per hour over [@from, @to) from rollup_cache_hourly,
// every prompt_hash together: a model's broken cache is one incident, whichever hashes show it.
// The rows are added up on the shapes' model_id (cacheShapesSQL, every shape) and the names joined
// to the sums: grouping the rows by the names of the series each joined took twice as long when
// the tenants are many (docs/performance.md). Ordered by model and hour, as model_id ranks the
// names.
const cacheHoursSQL = `WITH m AS MATERIALIZED (` + cacheShapesSQL + `), h AS (
		SELECT m.model_id, c.fallback, c.bucket, sum8(c.calls) AS calls, sum8(c.cache_write_calls) AS writes,
			sum8(c.cache_read_calls) AS reads, sum8(c.cost_nanos) AS cost, sum8(c.nocache_cost_nanos) AS nocache,
			sum8(c.unpriced_attempts) AS unpriced
		FROM rollup_cache_hourly c JOIN m ON m.id = c.series_id
		WHERE c.project_id = @project AND c.bucket >= @from AND c.bucket < @to
		GROUP BY 1, 2, 3
	)
	SELECT n.service, n.operation, n.provider, n.model, h.fallback, h.bucket, h.calls, h.writes, h.reads, h.cost,
		h.nocache, h.unpriced
	FROM h JOIN (SELECT DISTINCT model_id, service, operation, provider, model FROM m) n USING (model_id)
	ORDER BY h.model_id, h.fallback, h.bucket`

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
	var (
		k     cacheKey
		h     cacheHour
		keys  []cacheKey
		hours = map[cacheKey][]cacheHour{}
	)
	args := filterArgs(Filter{})
	args["project"], args["from"], args["to"] = project, readFrom, now.Add(time.Hour)
	err := s.read(ctx, cacheHoursSQL, args,
		[]any{&k.service, &k.operation, &k.provider, &k.model, &k.fallback, &h.at, &h.calls, &h.writes, &h.reads, &h.cost, &h.nocache, &h.unpriced},
		func() error {
			if hours[k] == nil {
				keys = append(keys, k)
			}
			hours[k] = append(hours[k], h)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("incidents: cache: %w", err)
	}
	var out []Incident
	for _, k := range keys {
		for _, in := range cacheBreaks(hours[k], p) {
			if !overlaps(in.StartedAt, in.EndedAt, from, to) {
				continue
			}
			in.Service, in.Operation, in.Provider, in.Model = k.service, k.operation, k.provider, k.model
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
