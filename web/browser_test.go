package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/internal/app"
	"github.com/ledgerd/ledgerd/internal/apptest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/schema"
)

// startLedgerd runs the whole service in-process on 127.0.0.1:0 with the test clock, posts the
// known ledgers through POST /v1/attempts, and returns its base URL and acme's key.
func startLedgerd(t *testing.T) (string, string) {
	t.Helper()
	dbURL := dbtest.NewURL(t)
	ctx := t.Context()
	base := apptest.Start(t, app.Options{DatabaseURL: dbURL, Now: newClock(now).Now, ViewerToken: viewerToken,
		ViewerProject: "acme"})
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	st := store.New(pool)
	keys := map[string]string{}
	for project, recs := range map[string][]schema.Attempt{"acme": ledger(), "other": otherLedger()} {
		if keys[project], err = st.CreateKey(ctx, project); err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(recs)
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/attempts", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+keys[project])
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("post %s's ledger: status %d", project, resp.StatusCode)
		}
	}
	return base, keys["acme"]
}

// chromium finds the browser; the test fails without one, since CI installs it
// (scripts/install-deps.sh).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: install it (bash scripts/install-deps.sh chromium); the page tests need a real browser")
	return ""
}

// artifactDir is where screenshots go: $ARTIFACTS_DIR, or artifacts/screenshots at the
// repository's root (ignored by git).
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ARTIFACTS_DIR")
	if dir == "" {
		root, err := filepath.Abs("..")
		if err != nil {
			t.Fatal(err)
		}
		dir = filepath.Join(root, "artifacts", "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// console collects what the page reports as going wrong: console.error and console.assert calls,
// uncaught exceptions, and error entries of the browser log (a failed load, a refused script).
type console struct {
	mu   sync.Mutex
	errs []string
}

func (c *console) listen(ev any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			c.errs = append(c.errs, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		c.errs = append(c.errs, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, msg))
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError {
			c.errs = append(c.errs, fmt.Sprintf("browser log: %s %s", ev.Entry.Text, ev.Entry.URL))
		}
	}
}

func (c *console) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.errs
	c.errs = nil
	return out
}

// chartState is what a chart looks like in the browser.
type chartState struct {
	ID     string `json:"id"`
	Drawn  string `json:"drawn"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
}

const chartsJS = `[...document.querySelectorAll('.plot[data-chart]')].map(e => {
	const c = e.querySelector('canvas');
	return {id: e.dataset.chart, drawn: e.dataset.drawn || '', width: c ? c.width : 0, height: c ? c.height : 0};
})`

// tablesFitJS lists what a person could not reach on the page as shown: a page wider than the
// screen, a table outside a scrolling box, a box that does not fit the screen, or a box that
// does not scroll to its table's last column.
const tablesFitJS = `(() => {
	const vw = document.documentElement.clientWidth, bad = [];
	if (document.documentElement.scrollWidth > vw) bad.push('the page is ' + document.documentElement.scrollWidth + ' px wide');
	for (const t of document.querySelectorAll('main table:not(figure table)')) {
		const name = t.dataset.testid || 'a table', w = t.closest('.table-wrap');
		if (!w) { bad.push(name + ' is not in a scrolling box'); continue; }
		const r = w.getBoundingClientRect();
		if (r.left < -1 || r.right > vw + 1) bad.push(name + ': its box runs from ' + Math.round(r.left) + ' to ' + Math.round(r.right) + ' px');
		const ox = getComputedStyle(w).overflowX;
		if (t.getBoundingClientRect().width > w.clientWidth + 1 && ox !== 'auto' && ox !== 'scroll') bad.push(name + ' is clipped');
		for (const c of t.querySelectorAll('th, td')) {
			const cr = c.getBoundingClientRect();
			if (cr.width > 0 && c.scrollWidth > c.clientWidth + 1 && getComputedStyle(c).overflow !== 'visible') { bad.push(name + ': cell "' + c.textContent.trim().slice(0, 40) + '" is cut'); break; }
		}
	}
	return bad;
})()`

// chartAxes is what a chart drew: its points, the bounds of its axes and its largest value.
type chartAxes struct {
	ID     string  `json:"id"`
	Points int     `json:"points"`
	XMin   float64 `json:"xMin"`
	XMax   float64 `json:"xMax"`
	YMax   float64 `json:"yMax"`
	Top    float64 `json:"top"`
}

const axesJS = `[...document.querySelectorAll('.plot[data-chart]')].filter(e => e.dataset.drawn === 'true').map(e => ({
	id: e.dataset.chart, points: +e.dataset.points, xMin: +e.dataset.xMin, xMax: +e.dataset.xMax,
	yMax: +e.dataset.yMax, top: +e.dataset.top}))`

// TestBrowser opens every page in headless Chromium as a person would: logs in through the form,
// reads the figures shown, checks that the charts drew and that the console stayed clean, and
// keeps a screenshot of each page.
func TestBrowser(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	base, key := startLedgerd(t)
	shots := artifactDir(t)

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelTab := chromedp.NewContext(actx)
	defer cancelTab()
	ctx, cancelTime := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelTime()

	var cons console
	if err := chromedp.Do(ctx); err != nil { // starts the browser and opens the tab
		t.Fatalf("start chromium: %v", err)
	}
	if err := chromedp.Listen(ctx, cons.listen); err != nil {
		t.Fatal(err)
	}

	// A visitor lands on the login page, types the key and is taken to the page they asked for.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/models"),
		chromedp.WaitVisible(chromedp.ID("key")),
		chromedp.SendKeys(chromedp.ID("key"), key),
		chromedp.Submit(chromedp.ID("key")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="models"]`)),
	); err != nil {
		t.Fatalf("log in: %v", err)
	}
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || loc != base+"/models" {
		t.Fatalf("after login at %q (%v), want %s/models", loc, err, base)
	}

	pages := []struct {
		name, path string
		charts     int
		// figures maps a CSS selector to the text a person sees there.
		figures map[string]string
	}{
		{"overview", "/", 2, map[string]string{
			`[data-testid="project"]`:           "acme",
			`[data-testid="today"]`:             "$0.80",
			`[data-testid="month-to-date"]`:     "$4.59 + 3 unpriced attempts",
			`[data-testid="range-spend"]`:       "$5.19 + 3 unpriced",
			`[data-testid="attempts-per-call"]`: "1.07",
			`[data-testid="fallback-share"]`:    "3.6%",
		}},
		{"models", "/models", 2, map[string]string{
			`[data-testid="models"] tr[data-key="anthropic / claude-sonnet-5-5"] [data-col="spend"]`: "$4.84",
			`[data-testid="models"] tr[data-key="acme / acme-llm-2-preview"] [data-col="spend"]`:     "unpriced (3)",
		}},
		{"services", "/services?service=support-bot", 2, map[string]string{
			`[data-testid="tenants"] tr[data-key="globex"] [data-col="spend"]`: "$1.95",
		}},
		{"cache", "/cache", 0, map[string]string{
			`[data-testid="caches"] tbody tr:first-child [data-col="status"] .badge`: "broken",
			`[data-testid="broken-count"]`:                                           "1",
		}},
		{"reliability", "/reliability", 3, map[string]string{
			`[data-testid="rate-limited-share"]`: "3.3%",
			`[data-testid="fallbacks"] tr[data-key="openai/gpt-4o/claude-sonnet-5-5"] [data-col="succeeded"]`: "1",
		}},
		{"load", "/load?day=2026-11-20&org=acme-prod&provider=anthropic&model=claude-sonnet-5-5", 3, map[string]string{
			`[data-testid="peak-requests"]`:     "1 at Fri 20 Nov 10:00",
			`[data-testid="headroom-requests"]`: "3 of 50 left (6.0%)",
		}},
		{"incidents", "/incidents", 0, map[string]string{
			`[data-testid="incidents"] tbody tr:first-child th`:                       "cache_broken",
			`[data-testid="incidents"] tbody tr:first-child [data-col="extra-spend"]`: "$0.50",
		}},
		{"alerts", "/alerts", 0, map[string]string{`[data-testid="rules"] tbody tr:first-child th`: "cache-broken"}},
		{"prices", "/prices", 0, map[string]string{
			`[data-testid="unpriced-models"] tr[data-key="acme/acme-llm-2-preview"] [data-col="attempts"]`: "3",
		}},
	}
	for _, p := range pages {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+p.path), chromedp.WaitReady(chromedp.CSS("footer"))); err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		// Charts draw once the deferred scripts ran.
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`[...document.querySelectorAll('.plot[data-chart]')].every(e => e.dataset.drawn)`,
			chromedp.WithPollingTimeout(20*time.Second))); err != nil {
			t.Errorf("%s: charts did not draw: %v", p.name, err)
		}
		charts, err := chromedp.Run(ctx, chromedp.Evaluate[[]chartState](chartsJS))
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		if len(charts) != p.charts {
			t.Errorf("%s: %d charts, want %d", p.name, len(charts), p.charts)
		}
		for _, c := range charts {
			if c.Drawn != "true" || c.Width == 0 || c.Height == 0 {
				t.Errorf("%s: chart %s not drawn: %+v", p.name, c.ID, c)
			}
		}
		for sel, want := range p.figures {
			got, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
			if err != nil {
				t.Errorf("%s: %s: %v", p.name, sel, err)
				continue
			}
			if got = strings.Join(strings.Fields(got), " "); got != want {
				t.Errorf("%s: %s shows %q, want %q", p.name, sel, got, want)
			}
		}
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("%s: screenshot: %v", p.name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, p.name+".png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, e := range cons.take() {
			t.Errorf("%s: %s", p.name, e)
		}
	}

	// Tick labels are exact at every step (2.5% steps read 2.5%, not 3%), and a legend at rest
	// shows the series names only: no "Time: --", no colon after each name.
	ticks, err := chromedp.Run(ctx, chromedp.Evaluate[[][]string](`[
		ledgerdCharts.tickLabels('percent', [0, 2.5, 5, 7.5], 2.5),
		ledgerdCharts.tickLabels('ratio', [0, 0.25, 0.5, 0.75], 0.25),
		ledgerdCharts.tickLabels('usd', [0, 1000, 2000], 1000)]`))
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]string{{"0.0%", "2.5%", "5.0%", "7.5%"}, {"0.00", "0.25", "0.50", "0.75"}, {"$0", "$1,000", "$2,000"}}; !reflect.DeepEqual(ticks, want) {
		t.Errorf("tick labels %q, want %q", ticks, want)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitReady(chromedp.CSS("footer"))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`[...document.querySelectorAll('.plot[data-chart]')].every(e => e.dataset.drawn)`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Errorf("overview: charts did not draw: %v", err)
	}
	legends, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('.u-legend')].map(l =>
		[...l.querySelectorAll('th')].filter(th => th.checkVisibility()).map(th => th.innerText + getComputedStyle(th, '::after').content.replace(/^none$|^normal$/, '')).join(' | ') +
		' / ' + l.innerText)`))
	if err != nil || len(legends) == 0 {
		t.Fatalf("legends: %v (%d)", err, len(legends))
	}
	for _, l := range legends {
		if strings.Contains(l, "Time") || strings.Contains(l, "--") || strings.Contains(l, ":") {
			t.Errorf("legend at rest reads %q", l)
		}
	}

	// At a laptop's 1400 px and a phone's 390 px, every table of every page sits in a box that
	// fits the screen and scrolls sideways to the table's last column: nothing is clipped.
	for _, width := range []int64{1400, 390} {
		for _, path := range []string{"/", "/models", "/services", "/services?service=support-bot", "/cache", "/reliability", "/alerts", "/prices"} {
			if err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 900), chromedp.Navigate(base+path),
				chromedp.WaitReady(chromedp.CSS("footer"))); err != nil {
				t.Fatal(err)
			}
			bad, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](tablesFitJS))
			if err != nil {
				t.Fatalf("%d px %s: %v", width, path, err)
			}
			for _, b := range bad {
				t.Errorf("%d px %s: %s", width, path, b)
			}
		}
	}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
		t.Fatal(err)
	}

	// Each chart draws the range asked and nothing outside it: Today is 24 hourly points on an axis
	// from midnight to midnight, the last hour 60 minutes up to 15:00; every value is below the
	// top of the value axis.
	for _, r := range []struct {
		query         string
		from, to      time.Time
		points, steps int
	}{
		{"from=2026-11-20&to=2026-11-20", time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC), 24, 3600},
		{"last=1h", time.Date(2026, 11, 20, 14, 0, 0, 0, time.UTC), time.Date(2026, 11, 20, 15, 0, 0, 0, time.UTC), 60, 60},
	} {
		for _, page := range []string{"/", "/reliability", "/models"} {
			if err := chromedp.Do(ctx, chromedp.Navigate(base+page+"?"+r.query), chromedp.WaitReady(chromedp.CSS("footer"))); err != nil {
				t.Fatalf("%s?%s: %v", page, r.query, err)
			}
			if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`[...document.querySelectorAll('.plot[data-chart]')].every(e => e.dataset.drawn)`,
				chromedp.WithPollingTimeout(20*time.Second))); err != nil {
				t.Errorf("%s?%s: charts did not draw: %v", page, r.query, err)
			}
			axes, err := chromedp.Run(ctx, chromedp.Evaluate[[]chartAxes](axesJS))
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range axes {
				if a.ID == "month" { // the month's chart shows the month
					continue
				}
				if a.Points != r.points || a.XMin < float64(r.from.Unix()) || a.XMax > float64(r.to.Unix()) || a.Top > a.YMax {
					t.Errorf("%s?%s: chart %s: %+v, want %d points on [%v, %v]", page, r.query, a.ID, a, r.points, r.from, r.to)
				}
			}
			for _, e := range cons.take() {
				t.Errorf("%s?%s: %s", page, r.query, e)
			}
		}
	}

	// On a phone the overview still fits: nothing wider than the screen but the scrolling tables.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/"),
		chromedp.WaitReady(chromedp.CSS("footer"))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`[...document.querySelectorAll('.plot[data-chart]')].every(e => e.dataset.drawn)`,
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Errorf("phone: charts did not draw: %v", err)
	}
	if width, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); err != nil || width > 390 {
		t.Errorf("phone: page is %d px wide (%v), want at most 390", width, err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(shots, "overview-phone.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}

	// Logging out ends the session: the next page asks for the key again.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`[data-testid="logout"]`)),
		chromedp.WaitVisible(chromedp.ID("key")), chromedp.Navigate(base+"/cache"), chromedp.WaitVisible(chromedp.ID("key"))); err != nil {
		t.Errorf("log out: %v", err)
	}
	for _, e := range cons.take() {
		t.Errorf("after logout: %s", e)
	}
}
