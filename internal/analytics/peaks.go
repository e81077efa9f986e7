package analytics

import (
	"cmp"
	"context"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/ledgerd/ledgerd/internal/server"
	"github.com/ledgerd/ledgerd/schema"
)

// The peak-load questions: how busy was each organization's busiest minute, when, how close to the
// provider's limits did it run, and who sent the load. They are answered from the load rollup
// (internal/rollup, load.go): each local day's peak per group is kept as attempts arrive, so a
// month of peaks reads a few hundred rows; the minutes of one day come from the per-minute rows.

// The dimensions Peaks groups by, besides day (ByDay): org, provider, model, service.
const ByOrg = "org"

// peakDims are the columns Peaks may group and filter by, with their bit in the load rollup's keep
// mask (internal/rollup: org 8, provider 4, model 2, service 1).
var peakDims = []struct {
	name string
	bit  int16
}{{ByOrg, 8}, {ByProvider, 4}, {ByModel, 2}, {ByService, 1}}

// PeakFilter selects the peaks a question is about: one project, the local days of [From, To)
// (rounded outward to whole days), and optionally one org, provider, model and service ("" matches
// any). A filtered column is kept in the groups: an org's peak for one service counts that
// service's load alone.
type PeakFilter struct {
	ProjectID int64
	From, To  time.Time
	Org       string
	Provider  string
	Model     string
	Service   string
}

func (f PeakFilter) values() []string { return []string{f.Org, f.Provider, f.Model, f.Service} }

// Peaks is the answer of GET /v1/peaks: per group (and day, when grouped by day) the busiest
// minute of requests and of tokens, and the lowest rate-limit headroom reported.
type Peaks struct {
	From     time.Time   `json:"from"`
	To       time.Time   `json:"to"`
	Timezone string      `json:"timezone"`
	GroupBy  []string    `json:"group_by"`
	Groups   []PeakGroup `json:"groups"`
}

// PeakGroup is one group's peaks. The minutes are the first of their day's (or range's) busiest,
// where several tie.
type PeakGroup struct {
	Key          PeakKey     `json:"key"`
	Requests     PeakMinute  `json:"requests_per_minute"`
	InputTokens  PeakMinute  `json:"input_tokens_per_minute"`
	OutputTokens PeakMinute  `json:"output_tokens_per_minute"`
	Tokens       PeakMinute  `json:"tokens_per_minute"`
	Headroom     Headrooms   `json:"headroom"`
	Services     []PeakShare `json:"services"`
}

// PeakKey identifies a group by the dimensions it was grouped by; the others are nil. Org is ""
// for the attempts that named no org.
type PeakKey struct {
	Day      string  `json:"day,omitempty"`
	Org      *string `json:"org,omitempty"`
	Provider *string `json:"provider,omitempty"`
	Model    *string `json:"model,omitempty"`
	Service  *string `json:"service,omitempty"`
}

// PeakMinute is a busiest minute: its count and when it began. For requests, RateLimited is how
// many of that minute's attempts were refused with a 429, and RateLimitedShare their share.
type PeakMinute struct {
	Peak             int64     `json:"peak"`
	Minute           time.Time `json:"minute"`
	RateLimited      *int64    `json:"rate_limited,omitempty"`
	RateLimitedShare *float64  `json:"rate_limited_share,omitempty"`
}

// Headrooms are the lowest headroom the provider reported for each limit; nil where it reported
// none.
type Headrooms struct {
	Requests     *Headroom `json:"requests"`
	Tokens       *Headroom `json:"tokens"`
	InputTokens  *Headroom `json:"input_tokens"`
	OutputTokens *Headroom `json:"output_tokens"`
}

// Headroom is a reported limit per minute and what remained of it, at the lowest share remaining.
type Headroom struct {
	Remaining int64   `json:"remaining"`
	Limit     int64   `json:"limit"`
	Share     float64 `json:"share"`
}

// PeakShare is one service's part of the group's busiest requests minute; Services lists them
// largest first, so the first took the largest share.
type PeakShare struct {
	Service  string  `json:"service"`
	Requests int64   `json:"requests"`
	Share    float64 `json:"share"`
}

// parsePeakGroupBy checks a peaks grouping: any of org, provider, model, service and day, each once.
func parsePeakGroupBy(dims []string) error {
	seen := map[string]bool{}
	for _, d := range dims {
		ok := d == ByDay
		for _, p := range peakDims {
			ok = ok || d == p.name
		}
		if !ok {
			return badParam("group_by", "%q is not one of org, provider, model, service, day", truncate(d))
		}
		if seen[d] {
			return badParam("group_by", "%q is listed twice", d)
		}
		seen[d] = true
	}
	return nil
}

// peaksSQL reads the peaks of one grouping (keep, $2) over the local days [$3, $4), narrowed to
// the filter's values $5 to $8 ("" matches any).
const peaksSQL = `
SELECT day, org, provider, model, service, requests, requests_at, rate_limited, input_tokens, input_tokens_at,
	output_tokens, output_tokens_at, tokens, tokens_at, requests_remaining, requests_limit, tokens_remaining,
	tokens_limit, input_tokens_remaining, input_tokens_limit, output_tokens_remaining, output_tokens_limit
FROM rollup_load_peaks
WHERE project_id = $1 AND keep = $2 AND day >= $3 AND day < $4 AND ($5 = '' OR org = $5)
	AND ($6 = '' OR provider = $6) AND ($7 = '' OR model = $7) AND ($8 = '' OR service = $8)`

// peakServicesSQL sums per service the requests of each group's busiest minute: row i of the
// arrays ($2: the minute, $3 to $6 the group's org, provider, model and service) under the keep
// mask $7.
const peakServicesSQL = `
SELECT x.i, m.service, sum8(m.requests)
FROM unnest($2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS x(at, org, provider, model, service, i)
JOIN rollup_load_minute m ON m.project_id = $1 AND m.bucket = x.at
WHERE ($7 & 8 = 0 OR m.org = x.org) AND ($7 & 4 = 0 OR m.provider = x.provider)
	AND ($7 & 2 = 0 OR m.model = x.model) AND ($7 & 1 = 0 OR m.service = x.service)
GROUP BY 1, 2`

// peakRow is a group's peaks of one day as read, before the days are merged.
type peakRow struct {
	day                       date
	key                       [4]string // org, provider, model, service
	req, rl, in, out, tok     int64
	reqAt, inAt, outAt, tokAt time.Time
	remaining, limit          [4]*int64    // per limit: requests, tokens, input and output tokens
	headroom                  [4]*Headroom // the same, as answered
}

// Peaks answers the peak-load question for f, grouped by dims (any of org, provider, model, service
// and day).
func (s *Service) Peaks(ctx context.Context, f PeakFilter, dims ...string) (Peaks, error) {
	if err := parsePeakGroupBy(dims); err != nil {
		return Peaks{}, err
	}
	from, to, err := s.window(f.From, f.To, false)
	if err != nil {
		return Peaks{}, err
	}
	first, last := s.localDays(from, to)
	var keep int16
	for i, p := range peakDims {
		if slices.Contains(dims, p.name) || f.values()[i] != "" {
			keep |= p.bit
		}
	}
	conn, err := s.reads.Acquire(ctx)
	if err != nil {
		return Peaks{}, fmt.Errorf("read peaks: %w", err)
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, peaksSQL, f.ProjectID, keep, first.civil(), last.civil(),
		f.Org, f.Provider, f.Model, f.Service)
	if err != nil {
		return Peaks{}, fmt.Errorf("read peaks: %w", err)
	}
	var got []peakRow
	var r peakRow
	var day time.Time
	_, err = pgx.ForEachRow(rows, []any{&day, &r.key[0], &r.key[1], &r.key[2], &r.key[3], &r.req, &r.reqAt, &r.rl,
		&r.in, &r.inAt, &r.out, &r.outAt, &r.tok, &r.tokAt, &r.remaining[0], &r.limit[0], &r.remaining[1],
		&r.limit[1], &r.remaining[2], &r.limit[2], &r.remaining[3], &r.limit[3]}, func() error {
		r.day = date{day.Year(), day.Month(), day.Day()}
		for i := range r.headroom {
			r.headroom[i] = nil
			if r.limit[i] != nil {
				h := Headroom{Remaining: *r.remaining[i], Limit: *r.limit[i]}
				h.Share = float64(h.Remaining) / float64(h.Limit)
				r.headroom[i] = &h
			}
		}
		got = append(got, r)
		return nil
	})
	if err != nil {
		return Peaks{}, fmt.Errorf("read peaks: %w", err)
	}
	groups := s.mergePeaks(got, dims)
	if err := s.peakServices(ctx, f.ProjectID, keep, groups); err != nil {
		return Peaks{}, err
	}
	out := Peaks{From: first.start(s.tz), To: last.start(s.tz), Timezone: s.tz.String(), GroupBy: dims, Groups: []PeakGroup{}}
	if out.GroupBy == nil {
		out.GroupBy = []string{}
	}
	for _, g := range groups {
		out.Groups = append(out.Groups, g.group)
	}
	return out, nil
}

// mergedPeak is a group being merged across days, with its key columns.
type mergedPeak struct {
	key   [4]string
	group PeakGroup
}

// mergePeaks folds the rows into one group per key under dims: per day when grouped by day, else
// the range's busiest minute (the largest, then the earliest) and lowest headroom.
func (s *Service) mergePeaks(rows []peakRow, dims []string) []*mergedPeak {
	byDay := slices.Contains(dims, ByDay)
	index := map[string]*mergedPeak{}
	var out []*mergedPeak
	minute := func(dst *PeakMinute, n int64, at time.Time) bool {
		if dst.Minute.IsZero() || n > dst.Peak || n == dst.Peak && at.Before(dst.Minute) {
			dst.Peak, dst.Minute = n, at.In(s.tz)
			return true
		}
		return false
	}
	for _, r := range rows {
		id := strings.Join(r.key[:], "\x00")
		if byDay {
			id += "\x00" + r.day.String()
		}
		g := index[id]
		if g == nil {
			g = &mergedPeak{key: r.key}
			if byDay {
				g.group.Key.Day = r.day.String()
			}
			for i, p := range peakDims {
				if slices.Contains(dims, p.name) {
					v := r.key[i]
					switch p.name {
					case ByOrg:
						g.group.Key.Org = &v
					case ByProvider:
						g.group.Key.Provider = &v
					case ByModel:
						g.group.Key.Model = &v
					case ByService:
						g.group.Key.Service = &v
					}
				}
			}
			index[id] = g
			out = append(out, g)
		}
		pg := &g.group
		if minute(&pg.Requests, r.req, r.reqAt) {
			rl := r.rl
			pg.Requests.RateLimited = &rl
		}
		minute(&pg.InputTokens, r.in, r.inAt)
		minute(&pg.OutputTokens, r.out, r.outAt)
		minute(&pg.Tokens, r.tok, r.tokAt)
		for i, dst := range []**Headroom{&pg.Headroom.Requests, &pg.Headroom.Tokens, &pg.Headroom.InputTokens, &pg.Headroom.OutputTokens} {
			if h := r.headroom[i]; h != nil && (*dst == nil || lowerHeadroom(*h, **dst)) {
				*dst = h
			}
		}
	}
	for _, g := range out {
		if rl := g.group.Requests.RateLimited; rl != nil && g.group.Requests.Peak > 0 {
			share := float64(*rl) / float64(g.group.Requests.Peak)
			g.group.Requests.RateLimitedShare = &share
		}
	}
	slices.SortFunc(out, func(a, b *mergedPeak) int {
		return cmp.Or(cmp.Compare(a.group.Key.Day, b.group.Key.Day), slices.Compare(a.key[:], b.key[:]))
	})
	return out
}

// lowerHeadroom is SQL headroom_below: the smaller share remaining, or of equal shares the larger
// limit. The shares are compared as exact fractions.
func lowerHeadroom(a, b Headroom) bool {
	x := new(big.Int).Mul(big.NewInt(a.Remaining), big.NewInt(b.Limit))
	y := new(big.Int).Mul(big.NewInt(b.Remaining), big.NewInt(a.Limit))
	if c := x.Cmp(y); c != 0 {
		return c < 0
	}
	return a.Limit > b.Limit
}

// peakServices fills each group's Services: the requests of its busiest minute by service.
func (s *Service) peakServices(ctx context.Context, project int64, keep int16, groups []*mergedPeak) error {
	if len(groups) == 0 {
		return nil
	}
	at := make([]time.Time, len(groups))
	cols := make([][]string, 4)
	for i, g := range groups {
		at[i] = g.group.Requests.Minute
		for c := range cols {
			cols[c] = append(cols[c], g.key[c])
		}
	}
	conn, err := s.reads.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("read the services of peak minutes: %w", err)
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, peakServicesSQL, project, at, cols[0], cols[1], cols[2], cols[3], keep)
	if err != nil {
		return fmt.Errorf("read the services of peak minutes: %w", err)
	}
	var i int64
	var svc string
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&i, &svc, &n}, func() error {
		g := &groups[i-1].group
		g.Services = append(g.Services, PeakShare{Service: svc, Requests: n})
		return nil
	})
	if err != nil {
		return fmt.Errorf("read the services of peak minutes: %w", err)
	}
	for _, m := range groups {
		g := &m.group
		if g.Services == nil {
			g.Services = []PeakShare{}
		}
		for j := range g.Services {
			if g.Requests.Peak > 0 {
				g.Services[j].Share = float64(g.Services[j].Requests) / float64(g.Requests.Peak)
			}
		}
		slices.SortFunc(g.Services, func(a, b PeakShare) int {
			return cmp.Or(cmp.Compare(b.Requests, a.Requests), cmp.Compare(a.Service, b.Service))
		})
	}
	return nil
}

// LoadMinute is one minute of an org's (or any group's) load on one day, for the Load chart:
// requests and tokens summed over the services, and the limits the provider reported then.
type LoadMinute struct {
	Minute       time.Time
	Requests     int64
	RateLimited  int64
	InputTokens  int64
	OutputTokens int64
	// RequestsLimit and TokensLimit are the limits reported in the minute (the ones of its lowest
	// headroom), 0 when none was.
	RequestsLimit, TokensLimit int64
	// ByService is the minute's requests per service.
	ByService map[string]int64
}

// loadMinutesSQL reads the minutes of [$2, $3) narrowed to the filter $4 to $7, per service.
const loadMinutesSQL = `
SELECT bucket, service, sum8(requests), sum8(rate_limited), sum8(input_tokens), sum8(output_tokens),
	max(requests_limit), max(tokens_limit)
FROM rollup_load_minute
WHERE project_id = $1 AND bucket >= $2 AND bucket < $3 AND ($4 = '' OR org = $4)
	AND ($5 = '' OR provider = $5) AND ($6 = '' OR model = $6) AND ($7 = '' OR service = $7)
GROUP BY 1, 2 ORDER BY 1, 2`

// LoadMinutes returns the minutes with load of the local day d (YYYY-MM-DD) for the filter's org,
// provider, model and service, in order. A minute's limits are the largest reported in it over
// the models it sums (a limit is per model: filter by one to draw it against its own).
func (s *Service) LoadMinutes(ctx context.Context, f PeakFilter, d string) ([]LoadMinute, error) {
	t, err := parseTime("day", d, s.tz)
	if err != nil {
		return nil, err
	}
	day := dateOf(t, s.tz)
	conn, err := s.reads.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("read load minutes: %w", err)
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, loadMinutesSQL, f.ProjectID, day.start(s.tz), day.addDays(1).start(s.tz),
		f.Org, f.Provider, f.Model, f.Service)
	if err != nil {
		return nil, fmt.Errorf("read load minutes: %w", err)
	}
	var out []LoadMinute
	var m LoadMinute
	var svc string
	var n int64
	var reqLim, tokLim *int64
	_, err = pgx.ForEachRow(rows, []any{&m.Minute, &svc, &n, &m.RateLimited, &m.InputTokens, &m.OutputTokens, &reqLim, &tokLim}, func() error {
		if len(out) == 0 || !out[len(out)-1].Minute.Equal(m.Minute) {
			out = append(out, LoadMinute{Minute: m.Minute.In(s.tz), ByService: map[string]int64{}})
		}
		cur := &out[len(out)-1]
		cur.Requests += n
		cur.RateLimited += m.RateLimited
		cur.InputTokens += m.InputTokens
		cur.OutputTokens += m.OutputTokens
		cur.ByService[svc] += n
		if reqLim != nil {
			cur.RequestsLimit = max(cur.RequestsLimit, *reqLim)
		}
		if tokLim != nil {
			cur.TokensLimit = max(cur.TokensLimit, *tokLim)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read load minutes: %w", err)
	}
	return out, nil
}

// peakParams are the query parameters GET /v1/peaks takes.
var peakParams = []string{"from", "to", "group_by", "org", "provider", "model", "service"}

// getPeaks is GET /v1/peaks?from=&to=&group_by=&org=&provider=&model=&service=.
func (s *Service) getPeaks(c echo.Context) error {
	var bad paramErrors
	q := bad.queryParams(c.QueryParams(), peakParams)
	f := PeakFilter{ProjectID: server.ProjectOf(c).ID, Org: q["org"], Provider: q["provider"], Model: q["model"], Service: q["service"]}
	for i, p := range peakDims {
		if len(f.values()[i]) > schema.MaxNameLen {
			bad.add(badParam(p.name, "longer than %d bytes", schema.MaxNameLen))
		}
	}
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if v, ok := q[t.name]; ok {
			var err error
			*t.dst, err = parseTime(t.name, v, s.tz)
			bad.add(err)
		}
	}
	if err := bad.err(); err != nil {
		return fail(err)
	}
	var dims []string
	if v := strings.TrimSpace(q["group_by"]); v != "" {
		for _, d := range strings.Split(v, ",") {
			dims = append(dims, strings.TrimSpace(d))
		}
	}
	p, err := s.Peaks(c.Request().Context(), f, dims...)
	if err != nil {
		return fail(err)
	}
	return c.JSON(http.StatusOK, p)
}
