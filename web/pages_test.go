package web_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/schema"
)

// TestPageFigures checks the figures each page renders for the known ledger (see ledger), found by
// their data-testid: the sums are worked out by hand from the catalog's prices.
func TestPageFigures(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	// A latency of 800 ms falls in histogram bucket 155, reported as its midpoint 2^(154.5/16).
	p50 := strconv.FormatFloat(math.Pow(2, 154.5/16), 'f', 0, 64) + " ms"
	cases := []struct {
		name, path string
		// testid names an element; or table, row and col name a cell.
		testid, table, row, col string
		want                    string
	}{
		// Overview: today and the month to date come from today's month; the rest from the range.
		{name: "today's spend", path: "/", testid: "today", want: "$0.80"},
		{name: "month to date leaves out last month and counts unpriced apart", path: "/", testid: "month-to-date", want: "$4.59 + 3 unpriced attempts"},
		{name: "range spend with unpriced attempts apart", path: "/", testid: "range-spend", want: "$5.19 + 3 unpriced"},
		{name: "cache hit ratio and savings", path: "/", testid: "cache-hit-ratio", want: "33.3% $1.16 saved"},
		{name: "attempts per call", path: "/", testid: "attempts-per-call", want: "1.07"},
		{name: "fallback share of answers", path: "/", testid: "fallback-share", want: "3.6%"},
		{name: "wasted spend on failed attempts", path: "/", testid: "wasted", want: "$0.20 (priced attempts only)"},
		{name: "no budget", path: "/", testid: "budget", want: "No budget set"},
		{name: "top services, biggest first", path: "/", testid: "top-services",
			want: "Top services by spend Service Spend Calls Cost per call digest-mailer $2.50 10 $0.25 support-bot $2.35 5 $0.47 search $0.34 10 $0.034 labs-agent unpriced (3) 3 unpriced"},
		{name: "no alert firing", path: "/", testid: "firing-alerts", want: "No alert is firing."},

		// Models: fallback traffic in its own row, unpriced models never at $0.
		{name: "model spend", path: "/models", table: "models", row: "anthropic / claude-sonnet-5-5", col: "spend", want: "$4.84"},
		{name: "model calls", path: "/models", table: "models", row: "anthropic / claude-sonnet-5-5", col: "calls", want: "25"},
		{name: "model attempts", path: "/models", table: "models", row: "anthropic / claude-sonnet-5-5", col: "attempts", want: "26"},
		{name: "model cost per call", path: "/models", table: "models", row: "anthropic / claude-sonnet-5-5", col: "cost-per-call", want: "$0.1936"},
		{name: "input tokens", path: "/models", table: "models", row: "anthropic / claude-sonnet-5-5", col: "input", want: "600,000"},
		{name: "output tokens", path: "/models", table: "models", row: "anthropic / claude-sonnet-5-5", col: "output", want: "80,000"},
		{name: "cache write tokens", path: "/models", table: "models", row: "anthropic / claude-sonnet-5-5", col: "cache-write", want: "1,100,000"},
		{name: "cache read tokens", path: "/models", table: "models", row: "anthropic / claude-sonnet-5-5", col: "cache-read", want: "900,000"},
		{name: "latency p50", path: "/models", table: "models", row: "anthropic / claude-sonnet-5-5", col: "p50", want: p50},
		{name: "model error rate", path: "/models", table: "models", row: "anthropic / claude-sonnet-5-5", col: "error-rate", want: "7.7%"},
		{name: "fallback model spend apart", path: "/models", table: "models", row: "openai / gpt-4o", col: "spend", want: "$0.35"},
		{name: "fallback has no calls of its own", path: "/models", table: "models", row: "openai / gpt-4o", col: "cost-per-call", want: "–"},
		// a fallback row says where its calls are counted, rather than "0" beside its attempts
		{name: "fallback calls are the primary's", path: "/models", table: "models", row: "openai / gpt-4o", col: "calls", want: "– counted on the primary"},
		{name: "unpriced model is unpriced, not $0", path: "/models", table: "models", row: "acme / acme-llm-2-preview", col: "spend", want: "unpriced (3)"},
		{name: "unpriced model has no cost per call", path: "/models", table: "models", row: "acme / acme-llm-2-preview", col: "cost-per-call", want: "unpriced"},
		// partly unpriced: the priced attempts' cost per call, a lower bound, and said to be one
		{name: "partly unpriced cost per call is a lower bound", path: "/models", testid: "total-cost-per-call", want: "at least $0.1854 (priced attempts only)"},

		// Services and their drill-down to operations and tenants.
		{name: "service spend", path: "/services", table: "services", row: "support-bot", col: "spend", want: "$2.35"},
		{name: "unpriced service", path: "/services", table: "services", row: "labs-agent", col: "spend", want: "unpriced (3)"},
		{name: "operation of a service", path: "/services?service=support-bot", table: "operations", row: "answer", col: "spend", want: "$2.35"},
		{name: "tenant of a service", path: "/services?service=support-bot", table: "tenants", row: "globex", col: "spend", want: "$1.95"},
		{name: "other tenant of a service", path: "/services?service=support-bot", table: "tenants", row: "initech", col: "attempts", want: "2"},
		{name: "drill-down totals", path: "/services?service=support-bot&operation=answer", testid: "total-spend", want: "$2.35"},

		// Cache: broken first, in red, explained.
		{name: "broken cache lost money", path: "/cache", table: "caches", row: "digest-mailer/weekly-digest/claude-sonnet-5-5", col: "savings", want: "$0.50 lost"},
		{name: "broken cache never read", path: "/cache", table: "caches", row: "digest-mailer/weekly-digest/claude-sonnet-5-5/digest-v2", col: "reads", want: "0"},
		{name: "healthy cache saved", path: "/cache", table: "caches", row: "search/summarize/claude-sonnet-5-5/search-v7", col: "savings", want: "$1.66 saved"},
		{name: "healthy cache hit ratio", path: "/cache", table: "caches", row: "search/summarize/claude-sonnet-5-5", col: "hit-ratio", want: "90.0%"},
		{name: "healthy cache status", path: "/cache", table: "caches", row: "search/summarize/claude-sonnet-5-5", col: "status", want: "reading"},
		// digest-mailer's broken cache shows on its model's row and its hash's: one broken cache.
		{name: "broken count", path: "/cache", testid: "broken-count", want: "1"},
		{name: "broken since", path: "/cache", table: "caches", row: "digest-mailer/weekly-digest/claude-sonnet-5-5/digest-v2", col: "broken-since", want: "2026-11-18 08:00"},
		{name: "extra cost since broken", path: "/cache", table: "caches", row: "digest-mailer/weekly-digest/claude-sonnet-5-5", col: "extra-cost", want: "$0.50"},
		{name: "broken cache explained", path: "/cache", table: "caches", row: "digest-mailer/weekly-digest/claude-sonnet-5-5", col: "status", want: "broken"},

		// Calls by attempts: b1 (a 429, then an answer) and f1 (sonnet fails, gpt-4o answers) took two.
		{name: "calls by attempts", path: "/reliability", table: "calls-by-attempts", row: "2", col: "calls", want: "2"},
		{name: "single-attempt calls", path: "/reliability", table: "calls-by-attempts", row: "1", col: "calls", want: "26"},

		// Reliability: fallback answers kept apart from the primary model.
		{name: "error rate", path: "/reliability", testid: "error-rate", want: "6.7%"},
		{name: "429 share", path: "/reliability", testid: "rate-limited-share", want: "3.3%"},
		{name: "primary attempts per call", path: "/reliability", table: "primary", row: "anthropic/claude-sonnet-5-5", col: "attempts-per-call", want: "1.04"},
		{name: "primary error mix", path: "/reliability", table: "primary", row: "anthropic/claude-sonnet-5-5", col: "errors", want: "rate_limited 1, server_error 1"},
		{name: "primary wasted", path: "/reliability", table: "primary", row: "anthropic/claude-sonnet-5-5", col: "wasted", want: "$0.20"},
		{name: "fallback answers apart", path: "/reliability", table: "fallbacks", row: "openai/gpt-4o/claude-sonnet-5-5", col: "succeeded", want: "1"},
		{name: "no fallback row among primaries", path: "/reliability", table: "primary", row: "openai/gpt-4o", col: "attempts", want: "<no row openai/gpt-4o>"},

		// Load: one org's bucket, its peak minute against the limits reported.
		{name: "peak minute", path: loadPage("2026-11-20"), testid: "peak-requests", want: "1 at Fri 20 Nov 10:00"},
		{name: "top service of the peak minute", path: loadPage("2026-11-20"), testid: "top-service", want: "support-bot (1, 100.0%)"},
		{name: "lowest requests headroom", path: loadPage("2026-11-20"), testid: "headroom-requests", want: "3 of 50 left (6.0%)"},
		{name: "lowest tokens headroom", path: loadPage("2026-11-20"), testid: "headroom-tokens", want: "20,000 of 40,000 left (50.0%)"},
		{name: "429s of the peak minute", path: loadPage("2026-11-10"), testid: "peak-rate-limited", want: "50.0%"},
		{name: "headroom at the 429", path: loadPage("2026-11-10"), testid: "headroom-requests", want: "0 of 50 left (0.0%)"},
		{name: "bucket of the week", path: loadPage("2026-11-20"), table: "buckets", row: "acme-prod · anthropic / claude-sonnet-5-5", col: "headroom-requests", want: "3 of 50 left (6.0%)"},
		{name: "bucket without an org", path: loadPage("2026-11-20"), table: "buckets", row: "(no org) · anthropic / claude-sonnet-5-5", col: "peak", want: "1"},
		{name: "a week without load", path: "/load?day=2026-01-10", testid: "bucket", want: "No load in the week to 2026-01-10"},
		{name: "the week's busiest bucket when none is chosen", path: "/load?day=2026-11-20", testid: "bucket", want: "(no org) · acme / acme-llm-2-preview on 2026-11-20"},

		// Prices: catalog in force and unpriced models seen.
		{name: "unpriced model seen", path: "/prices", table: "unpriced-models", row: "acme/acme-llm-2-preview", col: "attempts", want: "3"},
		{name: "catalog input price", path: "/prices", table: "catalog", row: "anthropic/claude-sonnet-5-5", col: "input", want: "$2.00"},
		{name: "catalog output price", path: "/prices", table: "catalog", row: "anthropic/claude-sonnet-5-5", col: "output", want: "$10.00"},

		// The project is the logged-in one: acme never sees project other's service.
		{name: "another project's service is not there", path: "/services?service=secret-svc", table: "services", row: "secret-svc", col: "spend", want: "<no row secret-svc>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			doc := s.get(t, s.keyAcme, c.path, http.StatusOK)
			var got string
			if c.testid != "" {
				got = testText(doc, c.testid)
			} else {
				got = cell(doc, c.table, c.row, c.col)
			}
			if got != c.want {
				t.Errorf("GET %s: got %q, want %q", c.path, got, c.want)
			}
		})
	}
	t.Run("broken caches come first, in red, explained", func(t *testing.T) {
		t.Parallel()
		doc := s.get(t, s.keyAcme, "/cache", http.StatusOK)
		rows := findAll(find(find(doc, byTestID("caches")), byTag("tbody")), byTag("tr"))
		var order []string
		for _, r := range rows {
			if k := attr(r, "data-key"); k != "" {
				order = append(order, attr(r, "data-broken")+" "+k)
				if (attr(r, "data-broken") == "true") != strings.Contains(attr(r, "class"), "bad") {
					t.Errorf("row %s: broken %s but class %q", k, attr(r, "data-broken"), attr(r, "class"))
				}
			}
		}
		want := []string{
			"true digest-mailer/weekly-digest/claude-sonnet-5-5",
			"true digest-mailer/weekly-digest/claude-sonnet-5-5/digest-v2",
			"false search/summarize/claude-sonnet-5-5",
			"false search/summarize/claude-sonnet-5-5/search-v7",
		}
		if strings.Join(order, "\n") != strings.Join(want, "\n") {
			t.Errorf("cache rows in order:\n%s\nwant:\n%s", strings.Join(order, "\n"), strings.Join(want, "\n"))
		}
		why := text(find(doc, byAttr("data-explains", "digest-mailer/weekly-digest/claude-sonnet-5-5")))
		if !strings.HasPrefix(why, "10 calls wrote 1,000,000 tokens to the cache and none was read back") {
			t.Errorf("explanation: %q", why)
		}
	})
	t.Run("projection is the analytics projection", func(t *testing.T) {
		t.Parallel()
		p, err := analytics.New(analytics.Options{Pool: s.st.Pool, Timezone: time.UTC, Now: s.clock.Now}).Projection(context.Background(), projectID(t, s, "acme"), now, "")
		if err != nil {
			t.Fatal(err)
		}
		doc := s.get(t, s.keyAcme, "/", http.StatusOK)
		want := p.ProjectedUSD.USD() + " " + p.ProjectedLowUSD.USD() + " to " + p.ProjectedHighUSD.USD() +
			" month to date + the mean of the last 7 complete days × " + strconv.FormatFloat(p.DaysRemaining, 'f', 1, 64) +
			" days left (costcalc ledger scales its window instead) No budget set"
		if got := strings.Join(strings.Fields(strings.ReplaceAll(testText(doc, "projected"), "( ", "(")), " "); got != want {
			t.Errorf("projected: got %q, want %q", got, want)
		}
	})
	t.Run("no page shows another project", func(t *testing.T) {
		t.Parallel()
		for _, path := range []string{"/", "/models", "/services", "/cache", "/reliability", "/alerts", "/prices",
			"/services?service=secret-svc", "/models?tenant=zzz-other-tenant"} {
			got := figures(s.get(t, s.keyAcme, path, http.StatusOK))
			for _, leak := range []string{"secret-svc", "zzz-other-tenant", "leak"} {
				if strings.Contains(got, leak) {
					t.Errorf("GET %s shows %q of project other", path, leak)
				}
			}
		}
		// And the other project sees its own ledger only.
		doc := s.get(t, s.keyOth, "/", http.StatusOK)
		if got := testText(doc, "range-spend"); got != "$10.00" {
			t.Errorf("other's range spend %q, want $10.00", got)
		}
		if strings.Contains(figures(doc), "support-bot") {
			t.Error("project other sees acme's support-bot")
		}
	})
}

// figures is the text of a page's figures: its table cells, headline cards and chart data
// (headings and captions may echo the filter the URL asked for).
func figures(doc *html.Node) string {
	var b strings.Builder
	for _, n := range findAll(doc, func(n *html.Node) bool {
		return n.Type == html.ElementNode && (n.Data == "tbody" || n.Data == "dl" || attr(n, "type") == "application/json")
	}) {
		b.WriteString(text(n) + "\n")
	}
	return b.String()
}

func projectID(t *testing.T, s *site, name string) int64 {
	t.Helper()
	p, err := s.st.ProjectByName(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return p.ID
}

// TestAlertsShown checks that an alert the evaluator fires shows on the overview and on the alerts
// page, with the rules in force.
func TestAlertsShown(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	// In the last hour, digest-mailer wrote its prefix to the cache on 10 calls and read it on none.
	var recs []schema.Attempt
	for i := range 10 {
		a := call(fmt.Sprintf("h%d", i), 1, fmt.Sprintf("2026-11-20T14:%02d:00Z", 10+i), "digest-mailer", "weekly-digest", "", sonnet, 0, 0)
		a.CacheWriteTokens = 100_000
		recs = append(recs, a)
	}
	s.submit(t, projectID(t, s, "acme"), recs)
	if led, err := s.alerts.Evaluate(context.Background()); !led || err != nil {
		t.Fatalf("evaluate: led %v, %v", led, err)
	}
	overview := s.get(t, s.keyAcme, "/", http.StatusOK)
	// The alert links to its incident: digest-mailer's cache, broken since 11-18.
	const want = "warning cache-broken : Prompt cache written 10 times and never read on digest-mailer/weekly-digest on claude-sonnet-5-5 incident"
	if got := testText(overview, "firing-alerts"); got != want {
		t.Errorf("overview's firing alerts: %q", got)
	}
	if href := attr(find(overview, byTestID("alert-incident")), "href"); !strings.HasPrefix(href, "/incidents#cache_broken-") ||
		!strings.HasSuffix(href, "/digest-mailer/weekly-digest") {
		t.Errorf("the alert links to %q, want digest-mailer's broken cache", href)
	}
	page := s.get(t, s.keyAcme, "/alerts", http.StatusOK)
	firing := findAll(find(page, byTestID("alerts")), byAttr("data-state", "firing"))
	if len(firing) != 1 || !strings.Contains(text(firing[0]), "model claude-sonnet-5-5 · service digest-mailer · operation weekly-digest") {
		t.Errorf("alerts table: %d firing rows: %q", len(firing), text(find(page, byTestID("alerts"))))
	} else if href := attr(find(firing[0], byTestID("alert-incident")), "href"); !strings.HasPrefix(href, "/incidents#cache_broken-") {
		t.Errorf("the firing alert's row links to %q, want its incident", href)
	}
	if got := len(findAll(find(find(page, byTestID("rules")), byTag("tbody")), byTag("tr"))); got != 3 {
		t.Errorf("rules table lists %d rules, want the 3 default ones", got)
	}
	// The other project has no alert.
	if got := testText(s.get(t, s.keyOth, "/", http.StatusOK), "firing-alerts"); got != "No alert is firing." {
		t.Errorf("other project's firing alerts: %q", got)
	}
}

// TestBudget checks the projected month against the project's budget: over it, heading over it,
// or within it.
func TestBudget(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	ctx := context.Background()
	cases := []struct {
		name   string
		budget money.Nanos
		want   string
		bad    bool
	}{
		// Month to date is $4.59; the spend reached $4 with today's calls.
		{"spent past it", 4 * money.PerDollar, "Over the $4.00 budget since 2026-11-20", true},
		// The projection ($9.61) passes $5 on the day analytics says.
		{"heading past it", 5 * money.PerDollar, "Reaches the $5.00 budget on ", true},
		// Far above even the high projection.
		{"within it", 100 * money.PerDollar, "Budget $100.00", false},
	}
	for _, c := range cases {
		if err := analytics.SetBudget(ctx, s.st, "acme", &c.budget); err != nil {
			t.Fatal(err)
		}
		want := c.want
		if strings.HasSuffix(want, " on ") {
			p, err := analytics.New(analytics.Options{Pool: s.st.Pool, Timezone: time.UTC, Now: s.clock.Now}).Projection(ctx, projectID(t, s, "acme"), now, "")
			if err != nil || p.BudgetCrossedOn == nil {
				t.Fatalf("%s: projection %+v, %v", c.name, p, err)
			}
			want += *p.BudgetCrossedOn
		}
		doc := s.get(t, s.keyAcme, "/", http.StatusOK)
		if got := testText(doc, "budget"); got != want {
			t.Errorf("%s: budget %q, want %q", c.name, got, want)
		}
		card := find(doc, byTestID("projected")).Parent
		if got := strings.Contains(attr(card, "class"), "bad"); got != c.bad {
			t.Errorf("%s: projected card marked bad %v, want %v", c.name, got, c.bad)
		}
	}
}

// loadPage is the Load page of acme-prod's bucket on claude-sonnet-5-5 on day.
func loadPage(day string) string {
	return "/load?day=" + day + "&org=acme-prod&provider=anthropic&model=claude-sonnet-5-5"
}
