package alerts_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/app"
	"github.com/ledgerd/ledgerd/internal/apptest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/store"
)

// TestService starts the whole ledgerd with a configuration file, posts a retry storm to
// /v1/attempts and expects the webhook to hear of it, GET /v1/alerts to list it and /metrics to
// count it: the evaluator is wired into the service.
func TestService(t *testing.T) {
	t.Parallel()
	h := newHook(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ledgerd.yaml")
	if err := os.WriteFile(cfg, []byte(cfgWith("alerts:\n  interval: 1s\n  rules:\n"+
		"    - {name: retry-storm, kind: attempts_per_call, window: 15m, threshold: 1.5, min_requests: 20}\n"+
		"receivers:\n  - {name: ops, webhook: {url: \"%s/hook\"}}\n", h.srv.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	dbURL := dbtest.NewURL(t)
	ctx := t.Context()
	base := apptest.Start(t, app.Options{DatabaseURL: dbURL, Config: cfg})
	st, err := store.Open(ctx, dbURL, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	key, err := st.CreateKey(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}

	var recs []map[string]any
	start := time.Now().Add(-5 * time.Minute).UTC()
	for i := range 20 {
		for n := 1; n <= 3; n++ {
			rec := map[string]any{"attempt_id": fmt.Sprintf("a%d-%d", i, n), "request_id": fmt.Sprintf("r%d", i),
				"attempt_no": n, "started_at": start.Add(time.Duration(i*10+n) * time.Second).Format(time.RFC3339Nano),
				"latency_ms": 100, "provider": "anthropic", "model": "claude-haiku-5-5", "service": "router",
				"status": "ok", "input_tokens": 10}
			if n < 3 {
				rec["status"], rec["error_class"] = "error", "overloaded"
			}
			recs = append(recs, rec)
		}
	}
	body, _ := json.Marshal(recs)
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/attempts", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("ingest answered %d", resp.StatusCode)
	}

	waitFor(t, "the webhook notification", 20*time.Second, func() bool { return len(h.alerts()) > 0 })
	if a := h.alerts()[0]; a.Rule != "retry-storm" || a.Figures["attempts_per_call"] != "3.00" || a.Labels["operation"] != "default" {
		t.Errorf("notification %+v", a)
	}
	code, list := get(t, base+"/v1/alerts", key)
	if code != 200 || !strings.Contains(list, `"rule":"retry-storm","kind":"attempts_per_call","severity":"warning","state":"firing"`) {
		t.Errorf("GET /v1/alerts: %d %s", code, list)
	}
	// The gauges are set as an evaluation ends, the counters as a delivery is recorded.
	waitFor(t, "/metrics to count the alert", 10*time.Second, func() bool {
		_, metrics := get(t, base+"/metrics", "")
		for _, want := range []string{`ledgerd_alert_notifications_sent_total{receiver="ops",status="firing"} 1`,
			`ledgerd_alert_leader 1`, `ledgerd_alerts{state="firing"} 1`, `ledgerd_alert_rule_evaluations_total{result="ok",rule="retry-storm"}`} {
			if !strings.Contains(metrics, want) {
				return false
			}
		}
		return true
	})
}
