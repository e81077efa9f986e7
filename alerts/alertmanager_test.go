package alerts_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// alertmanagerBinary finds Alertmanager: $LEDGERD_ALERTMANAGER, or alertmanager or
// prometheus-alertmanager (the Debian name) on PATH. Its absence fails the test: CI installs it
// (scripts/install-deps.sh).
func alertmanagerBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("LEDGERD_ALERTMANAGER"); p != "" {
		return p
	}
	for _, name := range []string{"alertmanager", "prometheus-alertmanager"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("Alertmanager not found: install the Debian package prometheus-alertmanager (scripts/install-deps.sh) " +
		"or set LEDGERD_ALERTMANAGER to the binary")
	return ""
}

// startAlertmanager runs a real Alertmanager on a free port with its own storage, without
// clustering, and returns its URL once it is ready.
func startAlertmanager(t *testing.T) string {
	t.Helper()
	bin := alertmanagerBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, []byte("route:\n  receiver: blackhole\nreceivers:\n  - name: blackhole\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var out logBuffer
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--cluster.listen-address=")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	url := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url
			}
		}
		select {
		case <-exited:
			t.Fatalf("alertmanager exited:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("alertmanager not ready after 30s:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gettableAlert is the part of Alertmanager's GET /api/v2/alerts answer the test reads.
type gettableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Status       struct {
		State string `json:"state"`
	} `json:"status"`
}

func amAlerts(t *testing.T, url string) []gettableAlert {
	t.Helper()
	resp, err := http.Get(url + "/api/v2/alerts")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out []gettableAlert
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("alertmanager answered %s: %v", b, err)
	}
	return out
}

// TestAlertmanagerEndToEnd posts a firing alert to a real Alertmanager through the receiver, sees
// it active there with its labels and annotations, then resolves it and sees it go.
func TestAlertmanagerEndToEnd(t *testing.T) {
	t.Parallel()
	am := startAlertmanager(t)
	l := newLedger(t, time.UTC)
	// Alertmanager judges endsAt by its own clock, so this test runs on real time.
	clk := time.Now
	now := clk()
	l.add(t, l.project, retries(20, 3, now.Add(-3*time.Minute), "")...)
	c := &clock{t: now}
	ev := l.evaluator(t, "alerts:\n  interval: 1m\n  external_url: http://ledgerd.test:8080\n  rules:\n"+
		"    - {name: retry-storm, kind: attempts_per_call, window: 15m, threshold: 1.5, min_requests: 20, labels: {team: platform}}\n"+
		"receivers:\n  - {name: am, alertmanager: {url: \""+am+"\"}}\n", c)

	c.Set(clk())
	run(t, ev)
	var got []gettableAlert
	waitFor(t, "the alert in Alertmanager", 10*time.Second, func() bool {
		got = amAlerts(t, am)
		return len(got) == 1 && got[0].Status.State == "active"
	})
	a := got[0]
	wantLabels := map[string]string{"alertname": "retry-storm", "project": "acme", "kind": "attempts_per_call",
		"severity": "warning", "service": "router", "operation": "classify", "model": "claude-haiku-5-5", "team": "platform"}
	if fmt.Sprint(a.Labels) != fmt.Sprint(wantLabels) {
		t.Errorf("labels %v, want %v", a.Labels, wantLabels)
	}
	if a.Annotations["summary"] != "3.00 attempts per call on router/classify on claude-haiku-5-5 (threshold 1.5)" ||
		a.Annotations["attempts"] != "60" || a.Annotations["requests"] != "20" || a.Annotations["description"] == "" {
		t.Errorf("annotations %v", a.Annotations)
	}
	// The link opens the dashboard's Alerts page at the alert's row, not the API (401 in a browser).
	if fp, ok := strings.CutPrefix(a.GeneratorURL, "http://ledgerd.test:8080/alerts#alert-"); !ok || fp == "" {
		t.Errorf("generatorURL %q", a.GeneratorURL)
	}
	// Firing: Alertmanager keeps it four resends (of a minute) ahead.
	if d := a.EndsAt.Sub(c.Now()); d < 4*time.Minute-time.Second || d > 4*time.Minute+time.Second {
		t.Errorf("endsAt %s is %s after the evaluation, want 4m", a.EndsAt, d)
	}

	// Healthy traffic brings the ratio to 160/120: the alert resolves and Alertmanager drops it.
	l.add(t, l.project, retries(100, 1, clk().Add(-6*time.Minute), "")...)
	c.Set(clk())
	run(t, ev)
	waitFor(t, "Alertmanager to drop the resolved alert", 10*time.Second, func() bool { return len(amAlerts(t, am)) == 0 })
}

// TestAlertmanagerResend checks that Alertmanager receivers get a firing alert again every resend
// interval (it expires alerts otherwise), each time with a fresh endsAt, and the resolution with
// endsAt at the moment it cleared.
func TestAlertmanagerResend(t *testing.T) {
	t.Parallel()
	type post struct {
		at   time.Time
		body []map[string]any
	}
	var mu sync.Mutex
	var posts []post
	clk := newClock(t0)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/am/api/v2/alerts" || r.Method != http.MethodPost {
			t.Errorf("%s %s", r.Method, r.URL.Path)
		}
		var body []map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		posts = append(posts, post{clk.Now(), body})
		mu.Unlock()
	}))
	defer srv.Close()
	l := newLedger(t, time.UTC)
	l.add(t, l.project, cacheWrites(12, false)(t0.Add(-50*time.Minute))...)
	ev := l.evaluator(t, cfgWith("alerts:\n  interval: 30s\n  resend_interval: 1m\n  rules:\n"+
		"    - {name: cache-broken, kind: cache_broken}\n"+
		"receivers:\n  - {name: am, alertmanager: {url: \"%s/am\"}}\n", srv.URL), clk)
	// Evaluations every 30 s: sends at 0, 1m and 2m; the calls leave the window at 10m.
	for _, at := range []time.Duration{0, 30 * time.Second, time.Minute, 90 * time.Second, 2 * time.Minute, 10*time.Minute + 12*time.Second} {
		clk.Set(t0.Add(at))
		run(t, ev)
	}
	mu.Lock()
	defer mu.Unlock()
	var got []string
	for _, p := range posts {
		for _, a := range p.body {
			got = append(got, fmt.Sprintf("+%s ends %s", p.at.Sub(t0), a["endsAt"]))
		}
	}
	want := []string{
		"+0s ends 2026-10-14T10:34:00Z",
		"+1m0s ends 2026-10-14T10:35:00Z",
		"+2m0s ends 2026-10-14T10:36:00Z",
		"+10m12s ends 2026-10-14T10:40:12Z",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("posts\n got %v\nwant %v", got, want)
	}
}
