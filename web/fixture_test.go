package web_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/html"

	"github.com/ledgerd/ledgerd/alerts"
	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/server"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/pricing"
	"github.com/ledgerd/ledgerd/schema"
	"github.com/ledgerd/ledgerd/web"
)

// now is the clock of every test: Friday 2026-11-20, 15:00 UTC. The default range of a page is
// then 2026-10-22 to 2026-11-20.
var now = time.Date(2026, 11, 20, 15, 0, 0, 0, time.UTC)

// clock is a settable test clock.
type clock struct{ t atomic.Int64 }

func newClock(t time.Time) *clock { c := &clock{}; c.set(t); return c }
func (c *clock) set(t time.Time)  { c.t.Store(t.UnixNano()) }
func (c *clock) Now() time.Time   { return time.Unix(0, c.t.Load()).UTC() }

// call returns an answered attempt of a logical call, priced by the embedded catalog:
// claude-sonnet-5-5 costs $2 input, $10 output, $2.50 cache write (5m) and $0.10 cache read per
// million tokens (from 2026-10-07, with no long-context tier); gpt-4o $2.50 input and $10 output.
func call(req string, no int, at, service, op, tenant, model string, in, out int64) schema.Attempt {
	provider := "anthropic"
	switch {
	case strings.HasPrefix(model, "gpt"):
		provider = "openai"
	case strings.HasPrefix(model, "acme"):
		provider = "acme"
	}
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		panic(err)
	}
	return schema.Attempt{AttemptID: fmt.Sprintf("%s-%d", req, no), RequestID: req, AttemptNo: no, StartedAt: t,
		LatencyMS: 800, Provider: provider, Model: model, Service: service, Operation: op, Tenant: tenant,
		Status: schema.StatusOK, HTTPStatus: 200, InputTokens: in, OutputTokens: out}
}

func failed(a schema.Attempt, class schema.ErrorClass, status int) schema.Attempt {
	a.Status, a.ErrorClass, a.HTTPStatus, a.LatencyMS = schema.StatusError, class, status, 120
	return a
}

const sonnet = "claude-sonnet-5-5"

// ledger is the known ledger of project "acme" the page tests read. Its figures:
//
//   - today (11-20): support-bot two calls of 100k in, 20k out at $0.40          = $0.80
//     (billed to org acme-prod, whose reported limits are 50 requests and 40,000 tokens a minute)
//   - 11-10: support-bot one call, a 429 then an answer at $0.40                  = $0.40
//   - 11-15: support-bot one call: sonnet fails (500) after billing 100k input ($0.20 wasted),
//     gpt-4o answers as its fallback (100k in, 10k out)                          = $0.35 + $0.20
//   - 11-17: search writes 100k tokens to the cache once ($0.25), reads them 9 times ($0.01
//     each)                                                      = $0.34, $1.66 saved of $2.00
//   - 11-18: digest-mailer writes 100k tokens to the cache on 10 calls, never reads:
//     $2.50 where no cache would cost $2.00, $0.50 lost
//   - 11-19: labs-agent 3 calls on a model no catalog prices                      = unpriced (3)
//   - 10-25: support-bot one call at $0.60 (200k in, 20k out), last month but inside the
//     30-day range
//
// Month to date $4.59, range $5.19 + 3 unpriced; 30 attempts for 28 calls; 1 of 28 answers by a
// fallback; cache: 900k tokens read of 2,703,000 input tokens; wasted $0.20.
func ledger() []schema.Attempt {
	recs := []schema.Attempt{
		call("a1", 1, "2026-11-20T10:00:00Z", "support-bot", "answer", "globex", sonnet, 100_000, 20_000),
		call("a2", 1, "2026-11-20T11:00:00Z", "support-bot", "answer", "globex", sonnet, 100_000, 20_000),
		failed(call("b1", 1, "2026-11-10T09:00:00Z", "support-bot", "answer", "initech", sonnet, 0, 0), schema.ErrorRateLimited, 429),
		call("b1", 2, "2026-11-10T09:00:02Z", "support-bot", "answer", "initech", sonnet, 100_000, 20_000),
		failed(call("f1", 1, "2026-11-15T14:00:00Z", "support-bot", "answer", "globex", sonnet, 100_000, 0), schema.ErrorServer, 500),
		call("c3", 1, "2026-10-25T12:00:00Z", "support-bot", "answer", "globex", sonnet, 200_000, 20_000),
	}
	// support-bot's Anthropic key bills to acme-prod, whose limits leave 3 of 50 requests at 11:00
	// today, and none at the 429 of 11-10.
	limits := func(reqLeft, tokLeft int64) *schema.RateLimits {
		return &schema.RateLimits{Requests: schema.RateLimit{Limit: 50, Remaining: reqLeft},
			Tokens: schema.RateLimit{Limit: 40_000, Remaining: tokLeft}}
	}
	for i, l := range []*schema.RateLimits{limits(48, 20_000), limits(3, 30_000), limits(0, 40_000), limits(49, 39_000)} {
		recs[i].Org, recs[i].RateLimits = "acme-prod", l
	}
	fb := call("f1", 2, "2026-11-15T14:00:01Z", "support-bot", "answer", "globex", "gpt-4o", 100_000, 10_000)
	fb.Fallback, fb.FallbackFrom = true, sonnet
	recs = append(recs, fb)
	for i := range 3 {
		recs = append(recs, call(fmt.Sprintf("u%d", i), 1, fmt.Sprintf("2026-11-19T12:0%d:00Z", i), "labs-agent", "plan", "", "acme-llm-2-preview", 1000, 100))
	}
	for i := range 10 {
		a := call(fmt.Sprintf("d%d", i), 1, fmt.Sprintf("2026-11-18T08:%02d:00Z", i), "digest-mailer", "weekly-digest", "", sonnet, 0, 0)
		a.CacheWriteTokens, a.PromptHash = 100_000, "digest-v2"
		recs = append(recs, a)
	}
	for i := range 10 {
		a := call(fmt.Sprintf("s%d", i), 1, fmt.Sprintf("2026-11-17T09:%02d:00Z", i), "search", "summarize", "hooli", sonnet, 0, 0)
		a.PromptHash = "search-v7"
		if i == 0 {
			a.CacheWriteTokens = 100_000
		} else {
			a.CacheReadTokens = 100_000
		}
		recs = append(recs, a)
	}
	return recs
}

// otherLedger belongs to project "other" ($10.00 today): nothing of it may ever show on acme's
// pages.
func otherLedger() []schema.Attempt {
	return []schema.Attempt{call("x1", 1, "2026-11-20T09:00:00Z", "secret-svc", "leak", "zzz-other-tenant", sonnet, 5_000_000, 0)}
}

// site is the dashboard on a test database, without the rest of ledgerd.
type site struct {
	URL     string
	st      *store.Store
	w       *ingest.Writer
	alerts  *alerts.Evaluator
	keyAcme string
	keyOth  string
	clock   *clock
}

// viewerToken is the viewer token every test site accepts, for project acme.
const viewerToken = "let-me-look-0123456789"

// newSite serves the dashboard over the known ledgers, priced by the embedded catalog.
func newSite(t *testing.T) *site {
	t.Helper()
	ctx := context.Background()
	s := &site{st: store.New(dbtest.New(t)), clock: newClock(now)}
	s.URL, s.w, s.alerts = serve(t, s.st, s.clock, viewerToken)
	var err error
	if s.keyAcme, err = s.st.CreateKey(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if s.keyOth, err = s.st.CreateKey(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct {
		project string
		recs    []schema.Attempt
	}{{"acme", ledger()}, {"other", otherLedger()}} {
		p, err := s.st.ProjectByName(ctx, l.project)
		if err != nil {
			t.Fatal(err)
		}
		s.submit(t, p.ID, l.recs)
	}
	return s
}

// submit commits records for a project through the ingest writer.
func (s *site) submit(t *testing.T, projectID int64, recs []schema.Attempt) {
	t.Helper()
	for i := range recs {
		if ferr := recs[i].Validate(s.clock.Now()); ferr != nil {
			t.Fatalf("record %d: %v", i, ferr)
		}
	}
	if _, err := s.w.Submit(context.Background(), projectID, recs); err != nil {
		t.Fatal(err)
	}
}

// mountSiteOn starts another dashboard on the site's database, as another replica (or the same one
// restarted) would, with the given viewer token; it returns its URL.
func mountSiteOn(t *testing.T, s *site, viewer string) string {
	t.Helper()
	u, _, _ := serve(t, s.st, s.clock, viewer)
	return u
}

// serve starts the HTTP front with the dashboard on st and returns its URL, its ingest writer and
// its alert evaluator (default rules, no receivers; it evaluates when a test says so).
func serve(t testing.TB, st *store.Store, clk *clock, viewer string) (string, *ingest.Writer, *alerts.Evaluator) {
	t.Helper()
	catalog, err := pricing.Load("")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	w := ingest.NewWriter(st, ingest.CatalogPrice(catalog), ingest.Options{Registerer: reg})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	srv := server.New(server.Options{Store: st, Writer: w, Registry: reg, Now: clk.Now})
	cfg, err := alerts.Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := alerts.New(cfg, alerts.Options{Pool: st.Pool, Now: clk.Now, Sync: w.Sync})
	h, err := web.New(context.Background(), web.Options{Store: st,
		Analytics: analytics.New(analytics.Options{Pool: st.Pool, Timezone: time.UTC, Now: clk.Now, Catalog: catalog}), Catalog: catalog, Alerts: ev, AlertRules: cfg.Rules,
		Timezone: time.UTC, Now: clk.Now, ViewerToken: viewer, ViewerProject: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	h.Mount(srv)
	hs := httptest.NewServer(srv.Echo)
	t.Cleanup(hs.Close)
	return hs.URL, w, ev
}

// get fetches a page with a Bearer key and parses it; it fails the test on any status but want.
func (s *site) get(t *testing.T, key, path string, want int) *html.Node {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: status %d, want %d: %.300s", path, resp.StatusCode, want, body)
	}
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return doc
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// browserClient is a client with a cookie jar that does not follow redirects, like a person's
// browser seen one request at a time.
func browserClient(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// login logs a cookie-jar client in through the form, as a person would.
func (s *site) login(t *testing.T, c *http.Client, secret string) *http.Response {
	t.Helper()
	doc := s.fetch(t, c, "/login", http.StatusOK)
	token := attr(find(doc, byAttr("name", "csrf")), "value")
	resp, err := c.PostForm(s.URL+"/login", url.Values{"key": {secret}, "csrf": {token}, "next": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// readDoc parses a response's body.
func readDoc(t *testing.T, resp *http.Response) *html.Node {
	t.Helper()
	doc, err := html.Parse(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// fetch GETs a page with a client and parses it.
func (s *site) fetch(t *testing.T, c *http.Client, path string, want int) *html.Node {
	t.Helper()
	resp, err := c.Get(s.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: status %d, want %d (Location %q): %.300s", path, resp.StatusCode, want, resp.Header.Get("Location"), body)
	}
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// byAttr matches elements with the attribute set to value.
func byAttr(name, value string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Type == html.ElementNode && attr(n, name) == value }
}

// byTag matches elements by name.
func byTag(name string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Type == html.ElementNode && n.Data == name }
}

// byTestID matches the element with data-testid id.
func byTestID(id string) func(*html.Node) bool { return byAttr("data-testid", id) }

// find returns the first node under n that matches, or nil.
func find(n *html.Node, match func(*html.Node) bool) *html.Node {
	if n == nil {
		return nil
	}
	if match(n) {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if f := find(c, match); f != nil {
			return f
		}
	}
	return nil
}

// findAll returns every node under n that matches, in document order.
func findAll(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	if n == nil {
		return nil
	}
	if match(n) {
		out = append(out, n)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		out = append(out, findAll(c, match)...)
	}
	return out
}

func attr(n *html.Node, name string) string {
	if n == nil {
		return ""
	}
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

// text is the text under n, a space between text nodes (cells of a row, say), with runs of white
// space made one space.
func text(n *html.Node) string {
	if n == nil {
		return "<missing>"
	}
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data + " ")
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// testText is the text of the element with data-testid id.
func testText(doc *html.Node, id string) string { return text(find(doc, byTestID(id))) }

// cell is the text of a table's row (data-key) and column (data-col).
func cell(doc *html.Node, table, row, col string) string {
	r := find(find(doc, byTestID(table)), byAttr("data-key", row))
	if r == nil {
		return "<no row " + row + ">"
	}
	return text(find(r, byAttr("data-col", col)))
}
