package alerts_test

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/alerts"
)

// cacheRule fires on the cacheWrites ledger; its calls leave the window an hour after t0.
const cacheRule = "alerts:\n  interval: 1h\n  rules:\n    - {name: cache-broken, kind: cache_broken, window: 1h, min_calls: 10}\n"

// TestRepeatAndRestart checks the notification log: a firing alert is sent once, not again on the
// next evaluation nor by a restarted evaluator, again after the repeat interval, and its resolution
// once; then the alert is forgotten and its history kept.
func TestRepeatAndRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger(t, time.UTC)
	h := newHook(t)
	clk := newClock(t0)
	l.add(t, l.project, cacheWrites(12, false)(t0.Add(-30*time.Minute))...)
	cfg := cfgWith(cacheRule+"receivers:\n  - {name: ops, webhook: {url: \"%s\"}}\n", h.srv.URL)

	first := l.evaluator(t, cfg, clk)
	run(t, first)
	clk.Add(time.Minute)
	run(t, first)
	if got := h.statuses(); !slices.Equal(got, []string{"cache-broken:firing"}) {
		t.Fatalf("after two evaluations: %q", got)
	}
	first.Stop(ctx)

	// A restart: a new evaluator on the same database remembers what was sent.
	second := l.evaluator(t, cfg, clk)
	clk.Add(time.Minute)
	run(t, second)
	if got := h.statuses(); !slices.Equal(got, []string{"cache-broken:firing"}) {
		t.Fatalf("after a restart: %q", got)
	}
	// The calls stay in the window until t0+30m; keep the alert firing past the repeat interval
	// by adding more of them.
	for i := 1; i <= 5; i++ {
		l.add(t, l.project, cacheWrites(12, false)(t0.Add(time.Duration(i)*50*time.Minute))...)
	}
	clk.Set(t0.Add(4*time.Hour + 10*time.Minute))
	run(t, second)
	if got := h.statuses(); !slices.Equal(got, []string{"cache-broken:firing", "cache-broken:firing"}) {
		t.Fatalf("after the repeat interval: %q", got)
	}
	clk.Set(t0.Add(6 * time.Hour))
	run(t, second)
	clk.Add(time.Minute)
	run(t, second)
	want := []string{"cache-broken:firing", "cache-broken:firing", "cache-broken:resolved"}
	if got := h.statuses(); !slices.Equal(got, want) {
		t.Fatalf("after resolving: %q, want %q", got, want)
	}
	var state, history, log int
	if err := l.st.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM alert_state), (SELECT count(*) FROM alert_history),
		(SELECT count(*) FROM alert_notifications)`).Scan(&state, &history, &log); err != nil {
		t.Fatal(err)
	}
	if state != 0 || history != 2 || log != 0 {
		t.Errorf("after resolution: %d state rows, %d history rows, %d log rows; want 0, 2, 0", state, history, log)
	}
	// History is kept for the retention (90 days by default), then pruned by the leader.
	clk.Set(t0.Add(alerts.DefaultHistoryRetention))
	run(t, second)
	clk.Set(t0.Add(alerts.DefaultHistoryRetention + 7*time.Hour))
	run(t, second)
	if err := l.st.Pool.QueryRow(ctx, `SELECT count(*) FROM alert_history`).Scan(&history); err != nil {
		t.Fatal(err)
	}
	if history != 0 {
		t.Errorf("%d history rows past the retention, want 0", history)
	}
}

// TestReceiverFailures checks delivery outcomes end to end: what is retried, when, and what is
// recorded and counted.
func TestReceiverFailures(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		fail func(n int) int // status of the n-th request (0: 200)
		// requests the receiver has seen after evaluations at t0, t0+1m and t0+4h1m.
		requests   []int
		sent       float64
		failed     map[string]float64
		lastErrHas string
	}{
		// Guards 4xx: not retried, not even at the next evaluation; tried again at the repeat
		// interval.
		{name: "400", fail: func(int) int { return 400 }, requests: []int{1, 1, 2},
			failed: map[string]float64{"rejected": 2}, lastErrHas: "HTTP 400"},
		// Guards retryable failures: retried within the delivery (max_attempts 2), and again at
		// the next evaluation.
		{name: "503", fail: func(int) int { return 503 }, requests: []int{2, 4, 6},
			failed: map[string]float64{"failed": 3}, lastErrHas: "gave up after 2 attempts"},
		// Guards recovery: the second try succeeds, and the alert is not sent again.
		{name: "503 then 200", fail: func(n int) int {
			if n == 1 {
				return 503
			}
			return 0
		}, requests: []int{2, 2, 3}, sent: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := newLedger(t, time.UTC)
			h := newHook(t)
			h.fail = c.fail
			clk := newClock(t0)
			for i := range 6 { // the cache stays broken for five hours
				l.add(t, l.project, cacheWrites(12, false)(t0.Add(time.Duration(i)*50*time.Minute-20*time.Minute))...)
			}
			reg := prometheus.NewRegistry()
			ev := l.evaluator(t, cfgWith(cacheRule+"receivers:\n  - {name: ops, webhook: {url: \"%s\"}, max_attempts: 2}\n", h.srv.URL),
				clk, func(o *alerts.Options) { o.Registerer = reg })
			for i, at := range []time.Duration{0, time.Minute, 4*time.Hour + time.Minute} {
				clk.Set(t0.Add(at))
				run(t, ev)
				h.mu.Lock()
				n := h.n
				h.mu.Unlock()
				if n != c.requests[i] {
					t.Fatalf("after evaluation %d: %d requests, want %d", i+1, n, c.requests[i])
				}
			}
			if got := counter(t, reg, "ledgerd_alert_notifications_sent_total", map[string]string{"receiver": "ops", "status": "firing"}); got != c.sent {
				t.Errorf("sent %v, want %v", got, c.sent)
			}
			for outcome, want := range c.failed {
				if got := counter(t, reg, "ledgerd_alert_notifications_failed_total", map[string]string{"receiver": "ops", "outcome": outcome}); got != want {
					t.Errorf("failed{%s} %v, want %v", outcome, got, want)
				}
			}
			var sent, failed int64
			var lastErr string
			if err := l.st.Pool.QueryRow(context.Background(), `SELECT sent, failed, last_error FROM alert_receivers WHERE name = 'ops'`).
				Scan(&sent, &failed, &lastErr); err != nil {
				t.Fatal(err)
			}
			wantFailed := int64(0)
			for _, v := range c.failed {
				wantFailed += int64(v)
			}
			if sent != int64(c.sent) || failed != wantFailed {
				t.Errorf("receiver status sent %d failed %d, want %v %d", sent, failed, c.sent, wantFailed)
			}
			if c.lastErrHas != "" && !strings.Contains(lastErr, c.lastErrHas) {
				t.Errorf("last_error %q lacks %q", lastErr, c.lastErrHas)
			}
		})
	}
}

// counter reads a counter in a registry by name and labels (0 when absent).
func counter(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			if maps.Equal(got, labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestSlowReceiver checks that a receiver that does not answer stalls neither evaluation nor its
// own queue: evaluations return while the send hangs, and the alert is not queued twice.
func TestSlowReceiver(t *testing.T) {
	t.Parallel()
	l := newLedger(t, time.UTC)
	release := make(chan struct{})
	got := make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- struct{}{}
		<-release
	}))
	defer srv.Close()
	clk := newClock(t0)
	l.add(t, l.project, cacheWrites(12, false)(t0.Add(-10*time.Minute))...)
	ev := l.evaluator(t, cfgWith(cacheRule+"receivers:\n  - {name: slow, webhook: {url: \"%s\"}, timeout: 1m}\n", srv.URL), clk)
	ctx := context.Background()
	if _, err := ev.Evaluate(ctx); err != nil {
		t.Fatal(err)
	}
	<-got // the send is now hanging
	clk.Add(time.Minute)
	if _, err := ev.Evaluate(ctx); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := ev.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(got); n != 0 {
		t.Errorf("%d more requests after the first; the alert was queued twice", n)
	}
}

// TestRouting checks that a rule naming a project judges only that project, that a rule naming
// receivers sends only to them, and that the alerts of a rule removed from the configuration
// resolve, told to the receivers that heard them fire.
func TestRouting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger(t, time.UTC)
	other, err := l.st.EnsureProject(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	l.add(t, l.project, cacheWrites(12, false)(t0.Add(-10*time.Minute))...)
	l.add(t, other, cacheWrites(12, false)(t0.Add(-10*time.Minute))...)
	a, b := newHook(t), newHook(t)
	clk := newClock(t0)
	receivers := "receivers:\n  - {name: a, webhook: {url: \"" + a.srv.URL + "\"}}\n  - {name: b, webhook: {url: \"" + b.srv.URL + "\"}}\n"
	first := l.evaluator(t, "alerts:\n  interval: 1h\n  rules:\n"+
		"    - {name: acme-cache, kind: cache_broken, project: acme, receivers: [a]}\n"+receivers, clk)
	run(t, first)
	if got, other := a.alerts(), b.alerts(); len(got) != 1 || got[0].Project != "acme" || len(other) != 0 {
		t.Fatalf("receiver a got %+v, b got %+v", got, other)
	}
	first.Stop(ctx)
	// The rule is renamed: its old alert resolves (to a only), the new one fires to both.
	second := l.evaluator(t, "alerts:\n  interval: 1h\n  rules:\n"+
		"    - {name: cache, kind: cache_broken, project: other}\n"+receivers, clk)
	clk.Add(time.Minute)
	run(t, second)
	if got := a.statuses(); !slices.Equal(got, []string{"acme-cache:firing", "acme-cache:resolved", "cache:firing"}) {
		t.Errorf("receiver a: %q", got)
	}
	if got := b.statuses(); !slices.Equal(got, []string{"cache:firing"}) {
		t.Errorf("receiver b: %q", got)
	}
	if got := b.alerts(); len(got) == 1 && got[0].Project != "other" {
		t.Errorf("the renamed rule judged project %s", got[0].Project)
	}
}
