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

// cacheIncidents finds the broken caches that overlap [from, to): per model, from the first hour
// that wrote without reads after an hour that read (or from its first hour, when it never read)
// to the next hour that read, with at least CacheMinCalls writing calls; open while no hour up to
// now read. The SpendDays local days before from's day are read too, for the hours the cache
// worked in: as their summaries (rollup_cache_daily) where those are up to date, which hide no
// break that ends at or after from. When open, only the breaks still open now are listed, and
// from's day and those after it are read as summaries too, where those are up to date: where a
// cache stands now is all an open break needs of the hours before it.
func (s *Service) cacheIncidents(ctx context.Context, project int64, from, to, now time.Time, p IncidentParams, open bool) ([]Incident, error) {
	readTo := now.Add(time.Hour)
	sumTo := dateOf(from, s.tz).start(s.tz)
	if open {
		sumTo = readTo
	}
	readFrom := dateOf(from, s.tz).addDays(-p.SpendDays).start(s.tz)
	prefixes, err := s.cachePrefixes(ctx, Filter{ProjectID: project}, readFrom, readTo, sumTo, false)
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
		spans := prefixes[sinceKey{key: k}].spans
		// The spans before sumTo (from's day, or all of them when open) only lead up to the hours
		// after them: the breaks among them that end before are not listed.
		i, _ := slices.BinarySearchFunc(spans, sumTo, func(sp cacheSpan, t time.Time) int { return sp.at.Compare(t) })
		for _, in := range cacheBreaks(spans[:i], spans[i:], p) {
			if !overlaps(in.StartedAt, in.EndedAt, from, to) {
				continue
			}
			in.Service, in.Operation, in.Provider, in.Model = k.service, k.operation, k.provider, k.model
			out = append(out, in)
		}
	}
	return out, nil
}

// cacheBreaks lists the breaks of one model's cache in its hours (in order, each a span of one
// hour), after the spans before them (in order; summed days too): each from the first hour that
// wrote and did not read after an hour that read (or the first hour, when none read before) to
// the next hour that read (EndedAt nil when none did). The breaks that end among the spans before
// are not listed.
func cacheBreaks(before, hours []cacheSpan, p IncidentParams) []Incident {
	st := stateOf(before)
	var (
		out      []Incident
		work     = st.reading
		readOnce = st.lastRead != nil
		broken   = st.since != nil
		start    time.Time
		since    = st.fromSince
	)
	if broken {
		start = *st.since
	}
	flush := func(end *time.Time) {
		if !broken {
			return
		}
		broken = false
		if since.writes < p.CacheMinCalls {
			return
		}
		in := Incident{Kind: KindCacheBroken, StartedAt: start, EndedAt: end, CallsAffected: since.calls}
		if priced := since.calls - since.unpriced; priced > 0 {
			var e money.Nanos
			switch before := work.calls - work.unpriced; {
			case readOnce && before > 0:
				e = money.Nanos(since.cost - priced*work.cost/before)
				in.ExtraUSD = &e
			case !readOnce:
				e = money.Nanos(since.cost - since.nocache)
				in.ExtraUSD = &e
			}
		}
		out = append(out, in)
	}
	for i, sp := range hours {
		h := sp.all
		switch {
		case h.reads > 0:
			at := sp.at
			flush(&at)
			readOnce = true
			work.add(h)
			continue
		case !broken && (h.writes > 0 || (!readOnce && i == 0 && len(before) == 0)):
			broken, start, since = true, sp.at, cacheSums{}
		case !broken:
			continue
		}
		since.add(h)
	}
	flush(nil)
	return out
}
