package promrules_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/grafana"
	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/app"
	"github.com/ledgerd/ledgerd/internal/apptest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/pricing"
	"github.com/ledgerd/ledgerd/schema"
)

// TestPrometheusScrapesLedgerd runs ledgerd in-process and a real Prometheus server that scrapes
// it every second with the shipped rule file loaded, posts records (with redeliveries) and checks
// what Prometheus answers over its HTTP API.
func TestPrometheusScrapesLedgerd(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus not found (%v): install Debian's prometheus package (bash scripts/install-deps.sh)", err)
	}
	clock := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	dbURL := dbtest.NewURL(t)
	ledgerd := strings.TrimPrefix(apptest.Start(t, app.Options{DatabaseURL: dbURL, Now: func() time.Time { return clock }}), "http://")

	prom := startPrometheus(t, bin, ledgerd)

	key := createKey(t, dbURL)
	recs := records(clock)
	catalog, err := pricing.Load("")
	if err != nil {
		t.Fatal(err)
	}
	price := ingest.CatalogPrice(catalog)
	var costNanos int64
	for i := range recs {
		c := price(&recs[i])
		if !c.Priced {
			t.Fatalf("record %s is not priced by the catalog", recs[i].AttemptID)
		}
		costNanos += int64(c.Cost)
	}
	post(t, ledgerd, key, recs)
	post(t, ledgerd, key, recs[:3]) // redelivered: counted once

	cases := []struct {
		query string
		want  float64
	}{
		{`sum(ledgerd_llm_attempts_total)`, float64(len(recs))},                                           // every record once
		{`sum(ledgerd_llm_requests_total)`, 4},                                                            // attempt_no 1 only
		{`sum(ledgerd_llm_attempts_total{status="error",error_class="rate_limited"})`, 2},                 // outcome labels
		{`sum(ledgerd_llm_tokens_total{type="cache_read"})`, 3000},                                        // token types
		{`ledgerd_llm_cost_usd_total{project="shop",model="claude-haiku-5-5"}`, float64(costNanos) / 1e9}, // the catalog's exact cost
		{`ledgerd_ingest_records_duplicate_total`, 3},                                                     // ledgerd's own health metrics
		{`count(ledgerd_llm_cache_write_calls_total{project="shop"})`, 1},                                 // one label set
	}
	for _, c := range cases {
		got, err := waitFor(prom, c.query, c.want, 20*time.Second)
		if err != nil {
			t.Errorf("%s: %v (last value %v, want %v)", c.query, err, got, c.want)
		}
	}

	// Every query of the Grafana health dashboard runs on the real server, as Grafana would send
	// it with All instances selected, once rates have samples to work on; only the
	// rejects-by-field counter has no series yet, nor the read standby's (this ledgerd has none:
	// internal/drills' standby drill reads those from /metrics).
	if got, err := waitFor(prom, `clamp_max(count_over_time(ledgerd_llm_attempts_total{status="ok"}[10s]), 3)`, 3, 20*time.Second); err != nil {
		t.Fatalf("three scrapes after the records: %v (last %v)", err, got)
	}
	for _, d := range grafana.Dashboards() {
		if d.Source != grafana.PrometheusType {
			continue
		}
		for _, p := range d.Panels {
			for _, q := range p.Queries {
				expr := strings.NewReplacer("$__rate_interval", "10s", "$instance", ".*").Replace(q.PromQL)
				var res struct {
					Data struct {
						Result []json.RawMessage `json:"result"`
					} `json:"data"`
				}
				if err := getJSON(prom+"/api/v1/query?query="+url.QueryEscape(expr), &res); err != nil {
					t.Errorf("%s / %s: %v", d.Title, p.Title, err)
					continue
				}
				if len(res.Data.Result) == 0 && !strings.Contains(expr, "ledgerd_ingest_records_rejected_total") &&
					!strings.Contains(expr, "ledgerd_standby_") && !strings.Contains(expr, "ledgerd_reads_total") {
					t.Errorf("%s / %s: no series for %s", d.Title, p.Title, expr)
				}
			}
		}
	}

	// The shipped rule file loaded into the real server, with the recording rules evaluating.
	var rules struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name   string `json:"name"`
					Type   string `json:"type"`
					Health string `json:"health"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := getJSON(prom+"/api/v1/rules", &rules); err != nil {
		t.Fatal(err)
	}
	alerts := map[string]bool{}
	for _, g := range rules.Data.Groups {
		for _, r := range g.Rules {
			if r.Type == "alerting" {
				alerts[r.Name] = true
			}
		}
	}
	for _, name := range []string{"LedgerdDailySpendHigh", "LedgerdRetryAmplification", "LedgerdPromptCacheNeverRead"} {
		if !alerts[name] {
			t.Errorf("alert %s not loaded by Prometheus (loaded: %v)", name, alerts)
		}
	}
}

// records are one logical call retried after two 429s, three single-attempt calls that read the
// prompt cache, all on one priced model.
func records(at time.Time) []schema.Attempt {
	var out []schema.Attempt
	add := func(id string, no int, status schema.Status, cacheRead int64) {
		a := schema.Attempt{AttemptID: id, RequestID: "req-" + id[:2], AttemptNo: no, StartedAt: at, LatencyMS: 900,
			Provider: "anthropic", Model: "claude-haiku-5-5", Service: "checkout", Status: status,
			InputTokens: 1200, OutputTokens: 300, CacheReadTokens: cacheRead}
		if status == schema.StatusError {
			a.ErrorClass, a.HTTPStatus, a.OutputTokens = schema.ErrorRateLimited, 429, 0
		}
		out = append(out, a)
	}
	add("r1-1", 1, schema.StatusError, 0)
	add("r1-2", 2, schema.StatusError, 0)
	add("r1-3", 3, schema.StatusOK, 0)
	for i := 2; i <= 4; i++ {
		add(fmt.Sprintf("r%d-1", i), 1, schema.StatusOK, 1000)
	}
	return out
}

// startPrometheus runs Prometheus on a free port with a temp storage dir, scraping ledgerd every
// second and loading the shipped rules; it is killed when the test ends.
func startPrometheus(t *testing.T, bin, target string) string {
	t.Helper()
	dir := t.TempDir()
	rules, err := filepath.Abs(filepath.Join(rulesDir, "ledgerd.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: ledgerd
    static_configs:
      - targets: [%q]
`, rules, target)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("prometheus output:\n%s", logs.String())
		}
	})
	base := "http://" + listen
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		select {
		case <-exited:
			t.Fatalf("prometheus exited:\n%s", logs.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready within 30 s:\n%s", logs.String())
		}
	}
}

func createKey(t *testing.T, dbURL string) string {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, dbURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, err := st.CreateKey(ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func post(t *testing.T, addr, key string, recs []schema.Attempt) {
	t.Helper()
	body, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/attempts", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		t.Fatalf("post records: %s: %s", resp.Status, b.String())
	}
}

// waitFor polls an instant query until it answers want or the wait runs out, and returns the last
// value seen.
func waitFor(prom, query string, want float64, wait time.Duration) (float64, error) {
	deadline := time.Now().Add(wait)
	last := -1.0
	for {
		var res struct {
			Status string `json:"status"`
			Data   struct {
				Result []struct {
					Value [2]any `json:"value"`
				} `json:"result"`
			} `json:"data"`
		}
		err := getJSON(prom+"/api/v1/query?query="+url.QueryEscape(query), &res)
		if err == nil && len(res.Data.Result) == 1 {
			if s, ok := res.Data.Result[0].Value[1].(string); ok {
				if v, perr := strconv.ParseFloat(s, 64); perr == nil {
					last = v
					if v == want {
						return v, nil
					}
				}
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return last, err
			}
			return last, fmt.Errorf("not answered within %v", wait)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func getJSON(u string, v any) error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return fmt.Errorf("get %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("decode %s: %w", u, err)
	}
	return nil
}
