package alerts

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerd/ledgerd/internal/numfmt"
	"github.com/ledgerd/ledgerd/internal/rollup"
)

// headroomSQL reads the load rollup's minutes that start in [$2, $3): per minute and key, the
// requests and tokens sent and the lowest headroom reported per limit (rollup.LoadLimits order).
var headroomSQL = fmt.Sprintf(`
SELECT bucket, org, provider, model, service, requests, input_tokens, output_tokens, %s
FROM rollup_load_minute WHERE project_id = $1 AND bucket >= $2 AND bucket < $3`, strings.Join(rollup.LoadPairCols, ", "))

// loadMinute is one minute of one scope: what it sent and the lowest headroom of each limit.
type loadMinute struct {
	at       time.Time
	requests int64
	input    int64
	output   int64
	services map[string]bool
	lowest   [4]rollup.Headroom // rollup.LoadLimits order: requests, tokens, input_tokens, output_tokens
}

// loads are the figures each limit compares: requests, all tokens, input and output tokens.
func (m *loadMinute) loads() [4]int64 {
	return [4]int64{m.requests, m.input + m.output, m.input, m.output}
}

// breach is what made a minute fire: a reported headroom below min_headroom, or a load at
// max_load of the limit.
type breach struct {
	minute   *loadMinute
	limit    int // index in rollup.LoadLimits
	headroom bool
	share    *big.Rat // the remaining share, or the load's share of the limit
}

// worse tells whether b should be named before o: a headroom breach before a load one, the lower
// headroom or the higher load first, then the earlier minute.
func (b breach) worse(o breach) bool {
	if b.headroom != o.headroom {
		return b.headroom
	}
	if c := b.share.Cmp(o.share); c != 0 {
		return (c < 0) == b.headroom
	}
	return b.minute.at.Before(o.minute.at)
}

// evalHeadroom finds the scopes that ran close to a reported rate limit on some minute of the
// window: a remaining share below MinHeadroom, or a minute's load at MaxLoad of the limit.
func evalHeadroom(ctx context.Context, ec evalContext, r *Rule) ([]sample, error) {
	rows, err := ec.pool.Query(ctx, headroomSQL, ec.project.ID, ec.now.Add(-r.Window), ec.now)
	if err != nil {
		return nil, fmt.Errorf("read load minutes: %w", err)
	}
	type scope struct {
		labels  map[string]string
		minutes map[time.Time]*loadMinute
	}
	scopes := map[string]*scope{}
	var order []string
	var at time.Time
	var f seriesFields
	var req, in, out int64
	var rem, lim [4]*int64
	_, err = pgx.ForEachRow(rows, []any{&at, &f.org, &f.provider, &f.model, &f.service, &req, &in, &out,
		&rem[0], &lim[0], &rem[1], &lim[1], &rem[2], &lim[2], &rem[3], &lim[3]}, func() error {
		key, labels := groupOf(r.GroupBy, f)
		s := scopes[key]
		if s == nil {
			s = &scope{labels: labels, minutes: map[time.Time]*loadMinute{}}
			scopes[key] = s
			order = append(order, key)
		}
		m := s.minutes[at]
		if m == nil {
			m = &loadMinute{at: at, services: map[string]bool{}}
			s.minutes[at] = m
		}
		m.requests += req
		m.input += in
		m.output += out
		m.services[f.service] = true
		for i := range rem {
			if lim[i] != nil {
				if p := (rollup.Headroom{Remaining: *rem[i], Limit: *lim[i]}); p.Below(m.lowest[i]) {
					m.lowest[i] = p
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read load minutes: %w", err)
	}
	slices.Sort(order)
	var samples []sample
	for _, key := range order {
		s := scopes[key]
		var worst *breach
		for _, m := range s.minutes {
			for i, p := range m.lowest {
				if p.Limit == 0 {
					continue
				}
				candidates := []breach{
					{minute: m, limit: i, headroom: true, share: big.NewRat(p.Remaining, p.Limit)},
					{minute: m, limit: i, share: big.NewRat(m.loads()[i], p.Limit)},
				}
				for _, b := range candidates {
					fires := b.share.Cmp(r.MinHeadroom) < 0
					if !b.headroom {
						fires = b.share.Cmp(r.MaxLoad) >= 0
					}
					if fires && (worst == nil || b.worse(*worst)) {
						worst = &b
					}
				}
			}
		}
		if worst != nil {
			samples = append(samples, headroomSample(r, ec, s.labels, *worst))
		}
	}
	return samples, nil
}

// limitNames are how a person reads each limit of rollup.LoadLimits.
var limitNames = []string{"requests", "tokens", "input tokens", "output tokens"}

func headroomSample(r *Rule, ec evalContext, labels map[string]string, b breach) sample {
	m, p := b.minute, b.minute.lowest[b.limit]
	name := limitNames[b.limit]
	scope := scopeText(labels)
	if scope == "" {
		scope = "project " + ec.project.Name
	}
	local := m.at.In(ec.tz).Format("15:04")
	figures := map[string]string{
		"minute":           m.at.UTC().Format(time.RFC3339),
		"limit":            rollup.LoadLimits[b.limit],
		"limit_per_minute": strconv.FormatInt(p.Limit, 10),
		"load":             strconv.FormatInt(m.loads()[b.limit], 10),
		"load_share":       pct(big.NewRat(m.loads()[b.limit], p.Limit)),
		"requests":         strconv.FormatInt(m.requests, 10),
		"tokens":           strconv.FormatInt(m.input+m.output, 10),
		"services":         strconv.Itoa(len(m.services)),
		"window":           human(r.Window),
		"min_headroom":     pct(r.MinHeadroom),
		"max_load":         pct(r.MaxLoad),
	}
	var summary string
	var d strings.Builder
	if b.headroom {
		figures["remaining"] = strconv.FormatInt(p.Remaining, 10)
		figures["headroom"] = pct(b.share)
		summary = fmt.Sprintf("%s had %s of its %s limit left at %s (%s a minute)", scope, pct(b.share), name, local, numfmt.Count(p.Limit))
		fmt.Fprintf(&d, "At %s (%s) the provider reported %s of %s %s a minute left for %s: %s of the limit, under the %s this rule allows.",
			local, ec.tz, numfmt.Count(p.Remaining), numfmt.Count(p.Limit), name, scope, pct(b.share), pct(r.MinHeadroom))
	} else {
		summary = fmt.Sprintf("%s sent %s %s in the minute %s, %s of its limit of %s a minute", scope,
			numfmt.Count(m.loads()[b.limit]), name, local, pct(b.share), numfmt.Count(p.Limit))
		fmt.Fprintf(&d, "In the minute %s (%s) %s sent %s %s against a reported limit of %s a minute: %s of it, at or over the %s this rule allows.",
			local, ec.tz, scope, numfmt.Count(m.loads()[b.limit]), name, numfmt.Count(p.Limit), pct(b.share), pct(r.MaxLoad))
	}
	if n := len(m.services); n > 1 {
		fmt.Fprintf(&d, " %d services drew on this limit in that minute: the keys of one organization share it, so failing over"+
			" between them adds no capacity.", n)
	}
	d.WriteString(" Spread the load (queue, smooth bursts, one shared rate limiter instead of one per worker), or ask the provider" +
		" for a higher limit, before requests are refused with 429s.")
	return sample{group: labels, figures: figures, summary: summary, description: d.String()}
}

// pct writes a share as a percentage with up to one decimal: 0.06 is "6%", 0.125 "12.5%".
func pct(r *big.Rat) string {
	s := new(big.Rat).Mul(r, big.NewRat(100, 1)).FloatString(1)
	return strings.TrimSuffix(s, ".0") + "%"
}
