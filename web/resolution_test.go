package web_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// chartJSON is what a page carries for its chart script: the fields this test reads.
type chartJSON struct {
	Step   int64   `json:"step"`
	From   int64   `json:"from"`
	To     int64   `json:"to"`
	X      []int64 `json:"x"`
	Series []struct {
		Values []any `json:"values"`
	} `json:"series"`
}

// pageCharts reads every chart's data from a page, by chart id.
func pageCharts(t *testing.T, doc *html.Node) map[string]chartJSON {
	t.Helper()
	out := map[string]chartJSON{}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "script" && attr(n, "type") == "application/json" {
			var c chartJSON
			if err := json.Unmarshal([]byte(text(n)), &c); err != nil {
				t.Fatalf("chart %s: %v", attr(n, "id"), err)
			}
			out[attr(n, "id")] = c
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(doc)
	return out
}

// TestChartResolution checks that every chart's step follows the range (minutes for the last
// hours, hours up to a few days, days beyond) and that its points and x-axis lie inside the range.
func TestChartResolution(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	utc := func(d, h, m int) time.Time { return time.Date(2026, 11, d, h, m, 0, 0, time.UTC) }
	cases := []struct {
		name, query string
		from, to    time.Time
		step        time.Duration
		points      int
	}{
		// "Today" is 24 hourly points, not one day (which drew the axis over years).
		{"today", "from=2026-11-20&to=2026-11-20", utc(20, 0, 0), utc(21, 0, 0), time.Hour, 24},
		// The last hour (now is 15:00) minute by minute.
		{"last hour", "last=1h", utc(20, 14, 0), utc(20, 15, 0), time.Minute, 60},
		{"last 6 hours", "last=6h", utc(20, 9, 0), utc(20, 15, 0), 5 * time.Minute, 72},
		{"last 24 hours", "last=24h", utc(19, 15, 0), utc(20, 15, 0), time.Hour, 24},
		// Three days are still hours; a week is days.
		{"three days", "from=2026-11-18&to=2026-11-20", utc(18, 0, 0), utc(21, 0, 0), time.Hour, 72},
		{"week", "from=2026-11-14&to=2026-11-20", utc(14, 0, 0), utc(21, 0, 0), 24 * time.Hour, 7},
	}
	for _, c := range cases {
		for _, page := range []string{"/", "/reliability", "/models", "/services"} {
			doc := s.get(t, s.keyAcme, page+"?"+c.query, http.StatusOK)
			for id, ch := range pageCharts(t, doc) {
				if id == "month-data" { // the month's chart is the month, whatever the range
					continue
				}
				if ch.Step != int64(c.step/time.Second) || len(ch.X) != c.points {
					t.Errorf("%s %s %s: step %d, %d points, want %v and %d", c.name, page, id, ch.Step, len(ch.X), c.step, c.points)
				}
				if ch.From != c.from.Unix() || ch.To != c.to.Unix() {
					t.Errorf("%s %s %s: axis [%v, %v), want [%v, %v)", c.name, page, id,
						time.Unix(ch.From, 0).UTC(), time.Unix(ch.To, 0).UTC(), c.from, c.to)
				}
				for _, x := range ch.X {
					if x < ch.From || x+ch.Step > ch.To {
						t.Errorf("%s %s %s: point %v outside the axis", c.name, page, id, time.Unix(x, 0).UTC())
					}
				}
			}
		}
	}
	// Today's two calls (10:00 and 11:00, $0.40 each) fall on their hours of the one-day range.
	spend := pageCharts(t, s.get(t, s.keyAcme, "/?from=2026-11-20&to=2026-11-20", http.StatusOK))["spend-data"]
	for i, v := range spend.Series[0].Values {
		want := "0.000000000"
		if i == 10 || i == 11 {
			want = "0.400000000"
		}
		if v != want {
			t.Errorf("spend at %02d:00 = %v, want %s", i, v, want)
		}
	}
}

// TestIncidentsPage checks the incidents page and the overview's open incidents on the known
// ledger: digest-mailer's cache, written 10 times on 11-18 from 08:00 and never read, is broken
// since then ($2.50 spent where no cache would cost $2.00), and still is.
func TestIncidentsPage(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	const key = "cache_broken:digest-mailer / weekly-digest · anthropic / claude-sonnet-5-5"
	for _, path := range []string{"/incidents", "/"} {
		doc := s.get(t, s.keyAcme, path, http.StatusOK)
		table := "incidents"
		if path == "/" {
			table = "open-incidents"
		}
		for col, want := range map[string]string{"started": "2026-11-18 08:00", "ended": "open", "calls": "10", "extra-spend": "$0.50"} {
			if got := cell(doc, table, key, col); got != want {
				t.Errorf("%s %s = %q, want %q", path, col, got, want)
			}
		}
	}
}
