package analytics

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ledgerd/ledgerd/money"
)

// cacheHour is one hour of a prefix's cache use: a model's or one prompt_hash's of it.
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
	prefixes, err := s.cachePrefixes(ctx, Filter{ProjectID: project}, readFrom, now.Add(time.Hour), false)
	if err != nil {
		return nil, fmt.Errorf("incidents: cache: %w", err)
	}
	// Each model's cache use as a whole (a model's broken cache is one incident, whichever hashes
	// show it), the models in the order of their names.
	var models []cacheKey
	for k := range prefixes {
		if k.hash == "" {
			models = append(models, k.key)
		}
	}
	slices.SortFunc(models, func(a, b cacheKey) int {
		return cmp.Or(strings.Compare(a.service, b.service), strings.Compare(a.operation, b.operation),
			strings.Compare(a.provider, b.provider), strings.Compare(a.model, b.model),
			cmp.Compare(boolInt(a.fallback), boolInt(b.fallback)))
	})
	var out []Incident
	for _, k := range models {
		for _, in := range cacheBreaks(prefixes[sinceKey{key: k}].hours, p) {
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
