package alerts_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/alerts"
	"github.com/ledgerd/ledgerd/alerts/notify"
	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/schema"
)

// testPrice prices tokens simply so expected figures are easy to state: input 1,000 nano-dollars
// a token, output 5,000, cache writes 1.25x input and cache reads 0.1x; without caching every
// input token costs the input price. Model "free-model" has no price.
func testPrice(a *schema.Attempt) ingest.Costing {
	if a.Model == "free-model" {
		return ingest.Costing{}
	}
	out := money.Nanos(a.OutputTokens * 5000)
	cost := money.Nanos(a.InputTokens*1000+a.CacheWriteTokens*1250+a.CacheReadTokens*100) + out
	nocache := money.Nanos((a.InputTokens+a.CacheWriteTokens+a.CacheReadTokens)*1000) + out
	return ingest.Costing{Cost: cost, NoCache: nocache, Priced: true,
		Version: store.PriceVersion{Key: "test/" + a.Model, Provider: a.Provider, Model: a.Model,
			EffectiveFrom: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
}

// clock is an injectable clock tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// ledger is a test database with a writer and one project.
type ledger struct {
	st      *store.Store
	w       *ingest.Writer
	project store.Project
	tz      *time.Location
	seq     int
}

func newLedger(t testing.TB, tz *time.Location) *ledger {
	t.Helper()
	st := store.New(dbtest.New(t))
	w := ingest.NewWriter(st, testPrice, ingest.Options{Timezone: tz, Registerer: prometheus.NewRegistry()})
	p, err := st.EnsureProject(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	l := &ledger{st: st, w: w, project: p, tz: tz}
	t.Cleanup(func() { _ = l.w.Close(context.Background()) })
	return l
}

// reset empties the ledger of attempts, rollups and alerts (keeping projects and the series
// dictionary, whose ids the store caches) and gives it a writer counting days in tz.
func (l *ledger) reset(t testing.TB, tz *time.Location) {
	t.Helper()
	ctx := context.Background()
	if err := l.w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.st.Pool.Exec(ctx, `TRUNCATE attempts, rollup_hourly, rollup_daily, rollup_cache_hourly,
		rollup_load_minute, rollup_load_peaks, alert_state, alert_notifications, alert_history, alert_receivers`); err != nil {
		t.Fatal(err)
	}
	if _, err := l.st.Pool.Exec(ctx, `UPDATE projects SET monthly_budget_nanos = NULL`); err != nil {
		t.Fatal(err)
	}
	l.w = ingest.NewWriter(l.st, testPrice, ingest.Options{Timezone: tz, Registerer: prometheus.NewRegistry()})
	l.tz = tz
}

// call describes one logical call: its attempts share a request id and are numbered from 1.
type call struct {
	at         time.Time
	service    string
	operation  string
	model      string
	attempts   int               // attempts made (1 when zero); all but the last fail with class
	class      schema.ErrorClass // error class of failed attempts (rate_limited when empty)
	input      int64
	output     int64
	cacheWrite int64
	cacheRead  int64
	promptHash string
	tenant     string
	org        string
	limits     *schema.RateLimits // reported on every attempt
	fail       bool               // the last attempt fails too
}

// add submits calls through the real writer, into project p (the ledger's own when zero).
func (l *ledger) add(t testing.TB, p store.Project, calls ...call) {
	t.Helper()
	if p.ID == 0 {
		p = l.project
	}
	var recs []schema.Attempt
	for _, c := range calls {
		n := max(c.attempts, 1)
		for i := 1; i <= n; i++ {
			l.seq++
			a := schema.Attempt{AttemptID: fmt.Sprintf("a%d", l.seq), RequestID: fmt.Sprintf("r%d", l.seq-i+1),
				AttemptNo: i, StartedAt: c.at.Add(time.Duration(i-1) * time.Second), LatencyMS: 100,
				Provider: "anthropic", Model: or(c.model, "claude-haiku-5-5"), Service: or(c.service, "router"),
				Operation: or(c.operation, "classify"), Tenant: c.tenant, Status: schema.StatusOK,
				InputTokens: c.input, OutputTokens: c.output, CacheWriteTokens: c.cacheWrite,
				CacheReadTokens: c.cacheRead, PromptHash: c.promptHash, Org: c.org, RateLimits: c.limits}
			if i < n || c.fail {
				a.Status, a.ErrorClass = schema.StatusError, c.class
				if a.ErrorClass == "" {
					a.ErrorClass = schema.ErrorRateLimited
				}
				a.InputTokens, a.OutputTokens, a.CacheWriteTokens, a.CacheReadTokens = 0, 0, 0, 0
			}
			recs = append(recs, a)
		}
	}
	res, err := l.w.Submit(context.Background(), p.ID, recs)
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != len(recs) {
		t.Fatalf("writer accepted %d of %d records", res.Accepted, len(recs))
	}
	if err := l.w.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// hook is a webhook receiver that records what it gets. fail, when set, picks the status code of
// each request (0 means 200).
type hook struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  []notify.Alert
	fail func(n int) int
	n    int
}

func newHook(t *testing.T) *hook {
	t.Helper()
	h := &hook{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.n++
		code := 0
		if h.fail != nil {
			code = h.fail(h.n)
		}
		h.mu.Unlock()
		if code != 0 && code != 200 {
			w.WriteHeader(code)
			return
		}
		var a notify.Alert
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &a); err != nil {
			t.Errorf("webhook body %q: %v", body, err)
		}
		h.mu.Lock()
		h.got = append(h.got, a)
		h.mu.Unlock()
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) alerts() []notify.Alert {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]notify.Alert(nil), h.got...)
}

// statuses lists "rule:status" of every notification received, in order.
func (h *hook) statuses() []string {
	var out []string
	for _, a := range h.alerts() {
		out = append(out, a.Rule+":"+string(a.Status))
	}
	return out
}

// evaluator parses cfg (with %s replaced by the hook's URL), builds and starts an evaluator on the
// ledger with the clock. Its own loop is inert (interval 1h): tests evaluate by hand.
func (l *ledger) evaluator(t testing.TB, cfg string, clk *clock, opts ...func(*alerts.Options)) *alerts.Evaluator {
	t.Helper()
	c, err := alerts.Parse([]byte(cfg))
	if err != nil {
		t.Fatalf("parse config: %v", err)
	}
	opt := alerts.Options{Pool: l.st.Pool, Timezone: l.tz, Now: clk.Now, Registerer: prometheus.NewRegistry()}
	for _, o := range opts {
		o(&opt)
	}
	ev := alerts.New(c, opt)
	ctx, cancel := context.WithCancel(context.Background())
	ev.Start(ctx)
	t.Cleanup(func() {
		cancel()
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		ev.Stop(sctx)
	})
	return ev
}

// run evaluates once as leader and waits for the notifications to go out.
func run(t *testing.T, ev *alerts.Evaluator) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	led, err := ev.Evaluate(ctx)
	if err != nil {
		t.Fatalf("evaluate: %v", err)
	}
	if !led {
		t.Fatal("evaluator did not lead")
	}
	if err := ev.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cfgWith fills each %s in cfg with url.
func cfgWith(cfg, url string) string { return strings.ReplaceAll(cfg, "%s", url) }
