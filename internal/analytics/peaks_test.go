package analytics_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/server"
	"github.com/ledgerd/ledgerd/schema"
)

// burstLedger is the 9am question's ledger, on Monday 2026-11-23 in New York: org acme-prod, shared
// by support-bot and search, sends 40 calls a minute from 09:00 to 09:29 (20 each) but 480 in
// 09:14 (300 and 180), where 48 of support-bot's are refused with a 429; every call reports
// the org's limits, the lowest headroom being none of 500 requests (in 09:14) and 12,000 of
// 200,000 tokens. Org acme-eng (service review) sends 10 calls every minute, reporting 25 of 50
// requests left at worst; a call without an org comes at 12:00. On Tuesday acme-prod peaks at 100
// at 10:00.
func burstLedger(t *testing.T) (*ledger, int64, *time.Location) {
	t.Helper()
	tz := mustZone(t, "America/New_York")
	l := newLedger(t, tz)
	p := l.project("acme")
	monday := time.Date(2026, 11, 23, 9, 0, 0, 0, tz)
	call := func(at time.Time, service, org string, limits *schema.RateLimits) schema.Attempt {
		a := newRec(at, "claude-haiku-5-5").service(service, "answer").tokens(100, 10).done()
		a.Org, a.RateLimits = org, limits
		return a
	}
	limits := func(reqLeft, tokLeft int64) *schema.RateLimits {
		return &schema.RateLimits{Requests: schema.RateLimit{Limit: 500, Remaining: reqLeft},
			Tokens: schema.RateLimit{Limit: 200_000, Remaining: tokLeft}}
	}
	var recs []schema.Attempt
	for m := range 30 {
		at := monday.Add(time.Duration(m) * time.Minute)
		bot, search := 20, 20
		if m == 14 {
			bot, search = 300, 180
		}
		for i := range bot {
			a := call(at.Add(time.Duration(i)*100*time.Millisecond), "support-bot", "acme-prod", limits(480-int64(i), 150_000))
			if m == 14 && i >= 252 {
				a.Status, a.ErrorClass, a.HTTPStatus, a.InputTokens, a.OutputTokens = schema.StatusError, schema.ErrorRateLimited, 429, 0, 0
				a.RateLimits = limits(0, 12_000)
			}
			recs = append(recs, a)
		}
		for i := range search {
			recs = append(recs, call(at.Add(time.Duration(i)*150*time.Millisecond), "search", "acme-prod", limits(400, 90_000)))
		}
		for i := range 10 {
			eng := &schema.RateLimits{Requests: schema.RateLimit{Limit: 50, Remaining: 25 + int64(i)}}
			recs = append(recs, call(at.Add(time.Duration(i)*time.Second), "review", "acme-eng", eng))
		}
	}
	recs = append(recs, call(monday.Add(3*time.Hour), "search", "", nil))
	tuesday := monday.AddDate(0, 0, 1).Add(time.Hour)
	for i := range 100 {
		recs = append(recs, call(tuesday.Add(time.Duration(i)*100*time.Millisecond), "search", "acme-prod", limits(300, 100_000)))
	}
	l.add(p, recs...)
	return l, p, tz
}

func i64(n int64) *int64 { return &n }

// TestPeaks checks the 9am question's figures exactly: the busiest minute, its 429s, the share of
// each service in it, the lowest headroom reported, and how groupings, filters and days change
// them.
func TestPeaks(t *testing.T) {
	t.Parallel()
	l, project, tz := burstLedger(t)
	svc := l.service(time.Date(2026, 11, 25, 12, 0, 0, 0, tz))
	at := func(d, h, m int) time.Time { return time.Date(2026, 11, d, h, m, 0, 0, tz) }
	monday := analytics.PeakFilter{ProjectID: project, From: at(23, 0, 0), To: at(24, 0, 0)}
	both := analytics.PeakFilter{ProjectID: project, From: at(23, 0, 0), To: at(25, 0, 0)}
	prodHeadroom := analytics.Headrooms{Requests: &analytics.Headroom{Remaining: 0, Limit: 500, Share: 0},
		Tokens: &analytics.Headroom{Remaining: 12_000, Limit: 200_000, Share: 0.06}}
	burst := func(key analytics.PeakKey, services []analytics.PeakShare) analytics.PeakGroup {
		return analytics.PeakGroup{Key: key,
			Requests:     analytics.PeakMinute{Peak: 480, Minute: at(23, 9, 14), RateLimited: i64(48), RateLimitedShare: f64(1, 10)},
			InputTokens:  analytics.PeakMinute{Peak: 43_200, Minute: at(23, 9, 14)},
			OutputTokens: analytics.PeakMinute{Peak: 4_320, Minute: at(23, 9, 14)},
			Tokens:       analytics.PeakMinute{Peak: 47_520, Minute: at(23, 9, 14)},
			Headroom:     prodHeadroom, Services: services}
	}
	prodServices := []analytics.PeakShare{{Service: "support-bot", Requests: 300, Share: 0.625}, {Service: "search", Requests: 180, Share: 0.375}}
	eng := analytics.PeakGroup{Key: analytics.PeakKey{Day: "2026-11-23", Org: str("acme-eng")},
		// Every minute ties at 10: the first is the peak.
		Requests:     analytics.PeakMinute{Peak: 10, Minute: at(23, 9, 0), RateLimited: i64(0), RateLimitedShare: f64(0, 1)},
		InputTokens:  analytics.PeakMinute{Peak: 1000, Minute: at(23, 9, 0)},
		OutputTokens: analytics.PeakMinute{Peak: 100, Minute: at(23, 9, 0)},
		Tokens:       analytics.PeakMinute{Peak: 1100, Minute: at(23, 9, 0)},
		Headroom:     analytics.Headrooms{Requests: &analytics.Headroom{Remaining: 25, Limit: 50, Share: 0.5}},
		Services:     []analytics.PeakShare{{Service: "review", Requests: 10, Share: 1}}}
	noOrg := analytics.PeakGroup{Key: analytics.PeakKey{Day: "2026-11-23", Org: str("")},
		Requests:     analytics.PeakMinute{Peak: 1, Minute: at(23, 12, 0), RateLimited: i64(0), RateLimitedShare: f64(0, 1)},
		InputTokens:  analytics.PeakMinute{Peak: 100, Minute: at(23, 12, 0)},
		OutputTokens: analytics.PeakMinute{Peak: 10, Minute: at(23, 12, 0)},
		Tokens:       analytics.PeakMinute{Peak: 110, Minute: at(23, 12, 0)},
		Services:     []analytics.PeakShare{{Service: "search", Requests: 1, Share: 1}}}
	cases := []struct {
		name string
		f    analytics.PeakFilter
		dims []string
		want []analytics.PeakGroup
	}{
		{
			// The question itself: per org and day, the burst's minute with both services' shares.
			name: "by org and day", f: monday, dims: []string{"org", "day"},
			want: []analytics.PeakGroup{
				noOrg,
				eng,
				burst(analytics.PeakKey{Day: "2026-11-23", Org: str("acme-prod")}, prodServices),
			},
		},
		{
			// The sum of all orgs' minutes: acme-eng's 10 add to the burst's minute.
			name: "the project's minutes", f: monday, dims: nil,
			want: []analytics.PeakGroup{{
				Requests:     analytics.PeakMinute{Peak: 490, Minute: at(23, 9, 14), RateLimited: i64(48), RateLimitedShare: f64(48, 490)},
				InputTokens:  analytics.PeakMinute{Peak: 44_200, Minute: at(23, 9, 14)},
				OutputTokens: analytics.PeakMinute{Peak: 4_420, Minute: at(23, 9, 14)},
				Tokens:       analytics.PeakMinute{Peak: 48_620, Minute: at(23, 9, 14)},
				Headroom:     prodHeadroom,
				Services: []analytics.PeakShare{{Service: "support-bot", Requests: 300, Share: 300.0 / 490},
					{Service: "search", Requests: 180, Share: 180.0 / 490}, {Service: "review", Requests: 10, Share: 10.0 / 490}},
			}},
		},
		{
			// A filter keeps its column: acme-prod's minutes counting search alone.
			name: "one org, one service", f: analytics.PeakFilter{ProjectID: project, From: monday.From, To: monday.To, Org: "acme-prod", Service: "search"},
			dims: []string{"org"},
			want: []analytics.PeakGroup{{Key: analytics.PeakKey{Org: str("acme-prod")},
				Requests:     analytics.PeakMinute{Peak: 180, Minute: at(23, 9, 14), RateLimited: i64(0), RateLimitedShare: f64(0, 1)},
				InputTokens:  analytics.PeakMinute{Peak: 18_000, Minute: at(23, 9, 14)},
				OutputTokens: analytics.PeakMinute{Peak: 1_800, Minute: at(23, 9, 14)},
				Tokens:       analytics.PeakMinute{Peak: 19_800, Minute: at(23, 9, 14)},
				Headroom: analytics.Headrooms{Requests: &analytics.Headroom{Remaining: 400, Limit: 500, Share: 0.8},
					Tokens: &analytics.Headroom{Remaining: 90_000, Limit: 200_000, Share: 0.45}},
				Services: []analytics.PeakShare{{Service: "search", Requests: 180, Share: 1}}}},
		},
		{
			// Two days, not grouped by day: the range's busiest minute and lowest headroom.
			name: "by org over two days", f: both, dims: []string{"org"},
			want: []analytics.PeakGroup{
				func() analytics.PeakGroup { g := noOrg; g.Key.Day = ""; return g }(),
				func() analytics.PeakGroup { g := eng; g.Key.Day = ""; return g }(),
				burst(analytics.PeakKey{Org: str("acme-prod")}, prodServices),
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := svc.Peaks(context.Background(), c.f, c.dims...)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Groups) != len(c.want) {
				t.Fatalf("%d groups, want %d: %+v", len(got.Groups), len(c.want), got.Groups)
			}
			for i := range c.want {
				if g := got.Groups[i]; !reflect.DeepEqual(g, c.want[i]) {
					t.Errorf("group %d\n got %+v\nwant %+v", i, g, c.want[i])
				}
			}
		})
	}
	// Tuesday's peak is its own day's.
	tue, err := svc.Peaks(context.Background(), analytics.PeakFilter{ProjectID: project, From: at(24, 0, 0), To: at(25, 0, 0), Org: "acme-prod"}, "day")
	if err != nil {
		t.Fatal(err)
	}
	if len(tue.Groups) != 1 || tue.Groups[0].Requests.Peak != 100 || !tue.Groups[0].Requests.Minute.Equal(at(24, 10, 0)) {
		t.Errorf("Tuesday: %+v", tue.Groups)
	}
}

// TestLoadMinutes checks the Load chart's minutes: an org's requests summed over its services per
// minute, with the limit reported then.
func TestLoadMinutes(t *testing.T) {
	t.Parallel()
	l, project, tz := burstLedger(t)
	svc := l.service(time.Date(2026, 11, 25, 12, 0, 0, 0, tz))
	got, err := svc.LoadMinutes(context.Background(), analytics.PeakFilter{ProjectID: project, Org: "acme-prod"}, "2026-11-23")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 30 {
		t.Fatalf("%d minutes, want 30", len(got))
	}
	m := got[14]
	if !m.Minute.Equal(time.Date(2026, 11, 23, 9, 14, 0, 0, tz)) || m.Requests != 480 || m.RateLimited != 48 ||
		m.RequestsLimit != 500 || m.TokensLimit != 200_000 || m.ByService["support-bot"] != 300 || m.ByService["search"] != 180 {
		t.Errorf("09:14: %+v", m)
	}
	if got[0].Requests != 40 {
		t.Errorf("09:00: %+v", got[0])
	}
}

// TestPeaksHTTP checks GET /v1/peaks: the answer's shape, and a bad grouping named.
func TestPeaksHTTP(t *testing.T) {
	t.Parallel()
	l, _, tz := burstLedger(t)
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, tz)
	srv := server.New(server.Options{Store: l.st, Writer: l.w, Registry: prometheus.NewRegistry(), Now: func() time.Time { return now }})
	l.service(now).Mount(srv)
	hs := httptest.NewServer(srv.Echo)
	t.Cleanup(hs.Close)
	key, err := l.st.CreateKey(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodGet, hs.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, body
	}
	code, body := get("/v1/peaks?from=2026-11-23&to=2026-11-24&group_by=org,day&org=acme-prod")
	if code != http.StatusOK {
		t.Fatalf("status %d: %v", code, body)
	}
	g := body["groups"].([]any)[0].(map[string]any)
	rpm := g["requests_per_minute"].(map[string]any)
	if rpm["peak"] != 480.0 || rpm["minute"] != "2026-11-23T09:14:00-05:00" || rpm["rate_limited_share"] != 0.1 {
		t.Errorf("requests_per_minute %v", rpm)
	}
	if top := g["services"].([]any)[0].(map[string]any); top["service"] != "support-bot" || top["share"] != 0.625 {
		t.Errorf("top service %v", top)
	}
	if h := g["headroom"].(map[string]any)["requests"].(map[string]any); h["remaining"] != 0.0 || h["limit"] != 500.0 {
		t.Errorf("headroom %v", h)
	}
	for _, c := range []struct{ path, want string }{
		{"/v1/peaks?group_by=tenant", `group_by: "tenant" is not one of org, provider, model, service, day`},
		{"/v1/peaks?tenant=x", "tenant: unknown parameter"},
		{"/v1/peaks?from=yesterday", "from: want an RFC 3339 time or a YYYY-MM-DD date"},
	} {
		code, body := get(c.path)
		if msg, _ := body["error"].(string); code != http.StatusBadRequest || !strings.HasPrefix(msg, c.want) {
			t.Errorf("%s: %d %v, want 400 %q", c.path, code, body, c.want)
		}
	}
}
