package analytics_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/internal/analytics"
)

// rawPeak is the peak question of one org and local day answered from the raw attempts: the
// busiest minute by requests (the earliest of equals) with its 429s, the busiest by tokens, and the
// lowest requests headroom reported (the smallest share, of equal shares the larger limit).
type rawPeak struct {
	requests, rateLimited, tokens int64
	requestsAt, tokensAt          time.Time
	remaining, limit              *int64
}

// rawPeaksSQL answers the peak question per org and local day ($4: the timezone) over a project's
// attempts of [$2, $3), by GROUP BY per minute over the raw table.
const rawPeaksSQL = `
WITH m AS (
	SELECT coalesce(org, '') AS org, date_trunc('minute', started_at, 'UTC') AS minute, count(*) AS n,
		count(*) FILTER (WHERE http_status = 429 OR error_class = 'rate_limited') AS rl,
		sum(input_tokens + cache_write_tokens + cache_read_tokens + output_tokens)::int8 AS tok
	FROM attempts WHERE project_id = $1 AND started_at >= $2 AND started_at < $3 GROUP BY 1, 2
), d AS (
	SELECT org, (minute AT TIME ZONE $4)::date AS day, minute, n, rl, tok FROM m
), r AS (
	SELECT DISTINCT ON (org, day) org, day, n, minute, rl FROM d ORDER BY org, day, n DESC, minute
), t AS (
	SELECT DISTINCT ON (org, day) org, day, tok, minute FROM d ORDER BY org, day, tok DESC, minute
), h AS (
	SELECT DISTINCT ON (org, day) coalesce(org, '') AS org, (started_at AT TIME ZONE $4)::date AS day,
		ratelimit_remaining_requests AS rem, ratelimit_limit_requests AS lim
	FROM attempts WHERE project_id = $1 AND started_at >= $2 AND started_at < $3 AND ratelimit_limit_requests IS NOT NULL
	ORDER BY 1, 2, ratelimit_remaining_requests::numeric / ratelimit_limit_requests, ratelimit_limit_requests DESC
)
SELECT r.org, r.day, r.n, r.minute, r.rl, t.tok, t.minute, h.rem, h.lim
FROM r JOIN t USING (org, day) LEFT JOIN h USING (org, day)`

func rawPeaks(ctx context.Context, pool *pgxpool.Pool, project int64, from, to time.Time, tz *time.Location) (map[string]rawPeak, error) {
	rows, err := pool.Query(ctx, rawPeaksSQL, project, from, to, tz.String())
	if err != nil {
		return nil, err
	}
	out := map[string]rawPeak{}
	var org string
	var day time.Time
	var p rawPeak
	_, err = pgx.ForEachRow(rows, []any{&org, &day, &p.requests, &p.requestsAt, &p.rateLimited, &p.tokens, &p.tokensAt,
		&p.remaining, &p.limit}, func() error {
		out[org+"|"+day.Format(time.DateOnly)] = p
		return nil
	})
	return out, err
}

// TestPeaksMatchRaw checks, on a synthetic month with orgs, reported limits and the demo's Monday
// rush, that every org's daily peak the load rollup gives equals the one GROUP BY per minute over
// the raw attempts gives.
func TestPeaksMatchRaw(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 11, 4, 15, 30, 0, 0, mustZone(t, "America/New_York"))
	l := loadSynth(t, 20_000, now)
	got, err := l.svc.Peaks(ctx, analytics.PeakFilter{ProjectID: l.project, From: now.AddDate(0, 0, -30), To: now}, "org", "day")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rawPeaks(ctx, l.st.Pool, l.project, got.From, got.To, l.tz)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Groups) != len(raw) || len(raw) < 60 {
		t.Fatalf("%d groups, raw %d", len(got.Groups), len(raw))
	}
	limited := 0
	for _, g := range got.Groups {
		k := *g.Key.Org + "|" + g.Key.Day
		r := raw[k]
		if g.Requests.Peak != r.requests || !g.Requests.Minute.Equal(r.requestsAt) || *g.Requests.RateLimited != r.rateLimited ||
			g.Tokens.Peak != r.tokens || !g.Tokens.Minute.Equal(r.tokensAt) {
			t.Errorf("%s: rollup %+v %+v, raw %+v", k, g.Requests, g.Tokens, r)
		}
		h := g.Headroom.Requests
		switch {
		case (h == nil) != (r.limit == nil):
			t.Errorf("%s: headroom %+v, raw %v/%v", k, h, r.remaining, r.limit)
		case h != nil && (h.Remaining != *r.remaining || h.Limit != *r.limit):
			t.Errorf("%s: headroom %+v, raw %d/%d", k, h, *r.remaining, *r.limit)
		}
		if r.rateLimited > 0 {
			limited++
		}
	}
	if limited == 0 {
		t.Error("no day's busiest minute saw a 429: the rush did not show")
	}
}
