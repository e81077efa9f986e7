package alerts_test

import (
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/alerts"
	"github.com/ledgerd/ledgerd/money"
)

// taskConfig is the configuration the issue says must work as written.
const taskConfig = `alerts:
  interval: 1m
  rules:
    - {name: cache-broken, kind: cache_broken, window: 1h, min_calls: 10}
    - {name: retry-storm, kind: attempts_per_call, window: 15m, threshold: 1.5, min_requests: 20}
    - {name: daily-spend, kind: daily_spend, threshold_usd: "50"}
    - {name: budget, kind: monthly_budget, budget_usd: "1000"}
receivers:
  - {name: ops, webhook: {url: "http://127.0.0.1:9000/hook"}}
  - {name: chat, slack: {url: "https://hooks.example/T000/B000/XXX"}}
  - {name: am, alertmanager: {url: "http://127.0.0.1:9093"}}
`

func TestParseTaskConfig(t *testing.T) {
	t.Parallel()
	cfg, err := alerts.Parse([]byte(taskConfig))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Interval != time.Minute || cfg.RepeatInterval != 4*time.Hour || cfg.ResendInterval != time.Minute {
		t.Errorf("intervals %s %s %s", cfg.Interval, cfg.RepeatInterval, cfg.ResendInterval)
	}
	if len(cfg.Rules) != 4 {
		t.Fatalf("%d rules", len(cfg.Rules))
	}
	cb, rs, ds, bu := cfg.Rules[0], cfg.Rules[1], cfg.Rules[2], cfg.Rules[3]
	if cb.Kind != alerts.KindCacheBroken || cb.Window != time.Hour || cb.MinCalls != 10 ||
		!slices.Equal(cb.GroupBy, []string{"service", "operation", "model"}) || cb.Severity != "warning" {
		t.Errorf("cache rule %+v", cb)
	}
	if rs.Kind != alerts.KindAttemptsPerCall || rs.Window != 15*time.Minute || rs.Threshold.Cmp(big.NewRat(3, 2)) != 0 ||
		rs.MinRequests != 20 || !slices.Equal(rs.GroupBy, []string{"service", "operation", "model"}) {
		t.Errorf("retry rule %+v", rs)
	}
	if ds.Kind != alerts.KindDailySpend || ds.ThresholdUSD != 50*money.PerDollar || !ds.Projection ||
		ds.ProjectionAfter != 3*time.Hour || len(ds.GroupBy) != 0 {
		t.Errorf("daily rule %+v", ds)
	}
	if bu.Kind != alerts.KindMonthlyBudget || bu.BudgetUSD != 1000*money.PerDollar {
		t.Errorf("budget rule %+v", bu)
	}
	var kinds []string
	for _, r := range cfg.Receivers {
		kinds = append(kinds, r.Name+"="+r.Kind())
		if r.Timeout != 10*time.Second || r.MaxAttempts != 5 || r.MaxRetryTime != time.Minute {
			t.Errorf("receiver %s defaults %s %d %s", r.Name, r.Timeout, r.MaxAttempts, r.MaxRetryTime)
		}
	}
	if want := []string{"ops=webhook", "chat=slack", "am=alertmanager"}; !slices.Equal(kinds, want) {
		t.Errorf("receivers %v, want %v", kinds, want)
	}
	// A printed configuration shows no receiver URL.
	if s := fmt.Sprintf("%+v %v %#v", cfg, cfg.Receivers, cfg.Receivers[1].Slack); strings.Contains(s, "XXX") || strings.Contains(s, "9000/hook") {
		t.Errorf("printed configuration shows a secret: %s", s)
	}
}

// TestParseNewKinds checks the headroom and errors rules as written and with their defaults.
func TestParseNewKinds(t *testing.T) {
	t.Parallel()
	cfg, err := alerts.Parse([]byte(`alerts:
  rules:
    - {name: headroom, kind: headroom}
    - {name: near-limit, kind: headroom, window: 5m, min_headroom: "0.05", max_load: 1, group_by: [org]}
    - {name: act-now, kind: errors}
    - {name: keys, kind: errors, window: 1h, classes: [auth_error], min_count: 3, group_by: [service, org]}
`))
	if err != nil {
		t.Fatal(err)
	}
	h, n, e, k := cfg.Rules[0], cfg.Rules[1], cfg.Rules[2], cfg.Rules[3]
	if h.Window != 15*time.Minute || h.MinHeadroom.Cmp(big.NewRat(1, 10)) != 0 || h.MaxLoad.Cmp(big.NewRat(9, 10)) != 0 ||
		!slices.Equal(h.GroupBy, []string{"org", "provider", "model"}) || h.For != 0 {
		t.Errorf("headroom defaults %+v", h)
	}
	if n.Window != 5*time.Minute || n.MinHeadroom.Cmp(big.NewRat(1, 20)) != 0 || n.MaxLoad.Cmp(big.NewRat(1, 1)) != 0 ||
		!slices.Equal(n.GroupBy, []string{"org"}) {
		t.Errorf("headroom rule %+v", n)
	}
	if e.Window != 15*time.Minute || !slices.Equal(e.Classes, []string{"quota_exhausted", "auth_error", "permission_error"}) ||
		e.MinCount != 1 || !slices.Equal(e.GroupBy, []string{"provider", "org", "service"}) {
		t.Errorf("errors defaults %+v", e)
	}
	if k.Window != time.Hour || !slices.Equal(k.Classes, []string{"auth_error"}) || k.MinCount != 3 ||
		!slices.Equal(k.GroupBy, []string{"service", "org"}) {
		t.Errorf("errors rule %+v", k)
	}
}

func TestParseDefaults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		yaml  string
		rules []string
	}{
		{"no file", "", []string{"cache-broken", "retry-storm", "budget"}},                 // absent config: the rules that need no figures
		{"comment only", "# nothing\n", []string{"cache-broken", "retry-storm", "budget"}}, // an empty document is absent
		{"receivers only", "receivers: []\n", []string{"cache-broken", "retry-storm", "budget"}},
		{"rules absent", "alerts: {interval: 30s}\n", []string{"cache-broken", "retry-storm", "budget"}},
		{"rules emptied", "alerts: {rules: []}\n", nil}, // an explicit empty list turns alerting off
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := alerts.Parse([]byte(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, r := range cfg.Rules {
				names = append(names, r.Name)
			}
			if !slices.Equal(names, c.rules) {
				t.Errorf("rules %v, want %v", names, c.rules)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	rule := func(s string) string { return "alerts:\n  rules:\n    - " + s + "\n" }
	cases := []struct {
		name, yaml, want string
	}{
		// A misspelt section is named with its line, and the keys that exist.
		{"unknown top key", "alert:\n  interval: 1m\n",
			`line 1: configuration: unknown key "alert" (known keys: alerts, receivers)`},
		// A misspelt rule option is not silently ignored.
		{"unknown rule key", rule(`{name: r, kind: attempts_per_call, treshold: 2}`),
			`line 3: rules[0]: unknown key "treshold" (known keys: name, kind, project, for, severity, labels, receivers, group_by, window, threshold, min_requests, min_calls, threshold_usd, projection, projection_after, budget_usd, service, min_headroom, max_load, classes, min_count)`},
		// An option of another kind is refused, saying what this kind takes.
		{"option of another kind", rule(`{name: d, kind: daily_spend, threshold_usd: "5", min_calls: 3}`),
			`line 3: rule "d": min_calls does not apply to kind daily_spend (it takes: threshold_usd, projection, projection_after, group_by)`},
		{"missing threshold", rule(`{name: d, kind: daily_spend}`),
			`line 3: rule "d": daily_spend needs threshold_usd, a dollar amount such as "50"`},
		{"bad money", rule(`{name: d, kind: daily_spend, threshold_usd: fifty}`),
			`line 3: rule "d": threshold_usd: "fifty" is not a dollar amount such as "50" or "12.50"`},
		{"zero money", rule(`{name: b, kind: monthly_budget, budget_usd: "0"}`),
			`line 3: rule "b": budget_usd must be more than zero`},
		{"bad duration", rule(`{name: r, kind: cache_broken, window: 1 hour}`),
			`line 3: rule "r": window: "1 hour" is not a duration such as 90s, 15m, 4h or 7d`},
		{"window too short", rule(`{name: r, kind: cache_broken, window: 10s}`),
			`line 3: rule "r": window must be from 1m to 31d`},
		{"retry window past the hourly detail", rule(`{name: r, kind: attempts_per_call, window: 8d}`),
			`line 3: rule "r": window must be from 1m to 7d (hourly detail by service is kept 8 days)`},
		{"threshold below one", rule(`{name: r, kind: attempts_per_call, threshold: 0.5}`),
			`line 3: rule "r": threshold is attempts per logical call and must be from 1 to 10000`},
		{"threshold not a number", rule(`{name: r, kind: attempts_per_call, threshold: 1/2}`),
			`line 3: rule "r": threshold: "1/2" is not a decimal number such as 1.5`},
		{"min_requests zero", rule(`{name: r, kind: attempts_per_call, min_requests: 0}`),
			`line 3: rule "r": min_requests: "0" is not a whole number from 1 to 1000000000`},
		{"unknown kind", rule(`{name: r, kind: spend}`),
			`line 3: rule "r": kind must be one of daily_spend, attempts_per_call, cache_broken, monthly_budget, headroom, errors (got "spend")`},
		// A headroom threshold is a share of the limit, not a percentage.
		{"headroom as a percentage", rule(`{name: h, kind: headroom, min_headroom: 10}`),
			`line 3: rule "h": min_headroom is a share of the limit and must be more than 0 and at most 1 (0.1 is 10%)`},
		{"max_load zero", rule(`{name: h, kind: headroom, max_load: 0}`),
			`line 3: rule "h": max_load is a share of the limit and must be more than 0 and at most 1 (0.1 is 10%)`},
		// A limit belongs to an organization and model: a service has none of its own.
		{"headroom per service", rule(`{name: h, kind: headroom, group_by: [service]}`),
			`line 3: rule "h": group_by: "service" is not one of org, provider, model`},
		{"headroom window not whole minutes", rule(`{name: h, kind: headroom, window: 90s}`),
			`line 3: rule "h": window must be whole minutes from 1m to 24h`},
		// errors reads raw attempts: an hour at most.
		{"errors window too long", rule(`{name: e, kind: errors, window: 2h}`),
			`line 3: rule "e": window must be whole minutes from 1m to 1h`},
		{"unknown error class", rule(`{name: e, kind: errors, classes: [quota]}`),
			`line 3: rule "e": classes: "quota" is not one of bad_request, auth_error, permission_error, not_found, request_too_large, rate_limited, quota_exhausted, timeout, connection_error, server_error, overloaded, cancelled, unknown`},
		{"no error class", rule(`{name: e, kind: errors, classes: []}`),
			`line 3: rule "e": classes must name at least one error class`},
		{"classes on headroom", rule(`{name: h, kind: headroom, classes: [auth_error]}`),
			`line 3: rule "h": classes does not apply to kind headroom (it takes: window, min_headroom, max_load, group_by)`},
		{"bad name", rule(`{name: "two words", kind: cache_broken}`),
			`line 3: rules[0]: name must be 1 to 64 letters, digits, '.', '_' or '-' (got "two words")`},
		{"duplicate rule", "alerts:\n  rules:\n    - {name: r, kind: cache_broken}\n    - {name: r, kind: cache_broken}\n",
			`line 4: rules: "r" is defined twice (first at line 3)`},
		{"duplicate key", "alerts:\n  interval: 1m\n  interval: 2m\n",
			`line 3: alerts: key "interval" appears twice (first at line 2)`},
		{"interval too short", "alerts:\n  interval: 500ms\n", `line 2: alerts: interval must be at least 1s`},
		{"reserved label", rule(`{name: r, kind: cache_broken, labels: {severity: page}}`),
			`line 3: rule "r": labels: "severity" is set by ledgerd; use the rule's severity, project or group_by instead`},
		{"bad label name", rule(`{name: r, kind: cache_broken, labels: {team-name: x}}`),
			`line 3: rule "r": labels: "team-name" is not a label name (letters, digits and _, not starting with a digit or __)`},
		{"bad group_by", rule(`{name: r, kind: attempts_per_call, group_by: [prompt_hash]}`),
			`line 3: rule "r": group_by: "prompt_hash" is not one of service, operation, model, provider, tenant`},
		{"group_by on budget", rule(`{name: r, kind: monthly_budget, group_by: [service]}`),
			`line 3: rule "r": group_by does not apply to kind monthly_budget (it takes: budget_usd, service)`},
		{"undefined receiver", rule(`{name: r, kind: cache_broken, receivers: [pager]}`),
			`line 3: rule "r": receiver "pager" is not defined under receivers`},
		{"two integrations", "receivers:\n  - {name: x, webhook: {url: \"http://a/b\"}, slack: {url: \"http://a/c\"}}\n",
			`line 2: receiver "x": give exactly one of webhook, slack or alertmanager`},
		{"no integration", "receivers:\n  - {name: x}\n",
			`line 2: receiver "x": give exactly one of webhook, slack or alertmanager`},
		{"missing url", "receivers:\n  - {name: x, slack: {}}\n",
			`line 2: receiver "x": slack: url (or url_file) is required`},
		// The URL is a secret: the message says what is wrong without quoting it.
		{"bad url", "receivers:\n  - {name: x, webhook: {url: \"ftp://user:hunter2@host/T0/SECRET\"}}\n",
			`line 2: receiver "x": webhook: url must be an http or https URL`},
		{"url and url_file", "receivers:\n  - {name: x, alertmanager: {url: \"http://a\", url_file: /run/secret}}\n",
			`line 2: receiver "x": alertmanager: give url or url_file, not both`},
		{"unknown receiver key", "receivers:\n  - {name: x, webhook: {url: \"http://a\", headers: {}}}\n",
			`line 2: receiver "x": webhook: unknown key "headers" (known keys: url, url_file, bearer_token, bearer_token_file)`},
		{"duplicate receiver", "receivers:\n  - {name: x, slack: {url: \"http://a\"}}\n  - {name: x, slack: {url: \"http://b\"}}\n",
			`line 3: receivers: "x" is defined twice (first at line 2)`},
		// Anchors and aliases are refused, which also rules out alias bombs.
		{"alias", "alerts:\n  interval: &i 1m\n  repeat_interval: *i\n",
			`line 3: alerts: repeat_interval: YAML aliases are not supported`},
		{"merge key", "alerts:\n  <<: {interval: 1m}\n", `line 2: alerts: YAML merge keys are not supported`},
		{"not a mapping", "- a\n- b\n", `line 1: configuration must be a mapping of keys to values`},
		{"rules not a list", "alerts:\n  rules: {name: r}\n", `line 2: alerts: rules must be a list`},
		{"not yaml", "alerts: [\n", `configuration is not valid YAML: yaml: line 1: did not find expected node content`},
		{"bad external url", "alerts:\n  external_url: ledgerd.local\n",
			`line 2: alerts: external_url must be an http(s) URL such as https://ledgerd.example.com`},
		{"projection_after a day", rule(`{name: d, kind: daily_spend, threshold_usd: "5", projection_after: 24h}`),
			`line 3: rule "d": projection_after must be more than 0 and less than a day (projection: false turns the projection off)`},
		{"projection_after zero", rule(`{name: d, kind: daily_spend, threshold_usd: "5", projection_after: 0s}`),
			`line 3: rule "d": projection_after must be more than 0 and less than a day (projection: false turns the projection off)`},
		{"max_attempts too many", "receivers:\n  - {name: x, slack: {url: \"http://a\"}, max_attempts: 1000}\n",
			`line 2: receiver "x": max_attempts must be at most 100`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := alerts.Parse([]byte(c.yaml))
			if err == nil {
				t.Fatalf("parsed %q without error", c.yaml)
			}
			if err.Error() != c.want {
				t.Errorf("error\n got %s\nwant %s", err, c.want)
			}
			if strings.Contains(err.Error(), "hunter2") || strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error quotes a secret: %s", err)
			}
		})
	}
}

// TestShippedConfigs parses examples/ledgerd.yaml and every YAML example in docs/alerts.md, so the
// documentation cannot drift from the parser.
func TestShippedConfigs(t *testing.T) {
	t.Parallel()
	// Parsed, not loaded: its secret files (/run/secrets/...) exist only where it is deployed.
	example, err := os.ReadFile("../examples/ledgerd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alerts.Parse(example); err != nil {
		t.Errorf("examples/ledgerd.yaml: %v", err)
	}
	doc, err := os.ReadFile("../docs/alerts.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(doc, -1)
	if len(blocks) < 2 {
		t.Fatalf("docs/alerts.md has %d yaml examples", len(blocks))
	}
	for i, b := range blocks {
		if _, err := alerts.Parse(b[1]); err != nil {
			t.Errorf("docs/alerts.md yaml example %d: %v\n%s", i+1, err, b[1])
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := alerts.Load("testdata/does-not-exist.yaml")
	if err == nil || !strings.Contains(err.Error(), "read config: open testdata/does-not-exist.yaml") {
		t.Errorf("got %v", err)
	}
}

// FuzzParse feeds the configuration parser arbitrary bytes: it must never panic, and whatever it
// accepts must be a configuration the evaluator can run.
func FuzzParse(f *testing.F) {
	f.Add([]byte(taskConfig))
	f.Add([]byte("alerts:\n  rules:\n    - {name: r, kind: daily_spend, threshold_usd: \"1e-3\", group_by: [model, tenant]}\n"))
	f.Add([]byte("alerts: {interval: &a 1m, resend_interval: *a}\n"))
	f.Add([]byte("receivers:\n  - {name: x, webhook: {url_file: /dev/zero, bearer_token: t}}\n"))
	f.Add([]byte("{alerts: {rules: [{name: b, kind: monthly_budget, service: s, for: 7d}]}}"))
	f.Add([]byte("alerts:\n  rules:\n    - {name: h, kind: headroom, window: 5m, min_headroom: 0.05, max_load: 1, group_by: [org]}\n    - {name: e, kind: errors, classes: [auth_error], min_count: 3}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := alerts.Parse(data)
		if err != nil {
			return
		}
		if cfg.Interval < time.Second || cfg.RepeatInterval < time.Second || cfg.ResendInterval < time.Second {
			t.Fatalf("intervals %s %s %s", cfg.Interval, cfg.RepeatInterval, cfg.ResendInterval)
		}
		names := map[string]bool{}
		for _, r := range cfg.Receivers {
			names[r.Name] = true
			n := 0
			for _, set := range []bool{r.Webhook != nil, r.Slack != nil, r.Alertmanager != nil} {
				if set {
					n++
				}
			}
			if n != 1 || r.Timeout <= 0 || r.MaxAttempts < 1 {
				t.Fatalf("receiver %+v", r)
			}
		}
		for _, r := range cfg.Rules {
			if r.Name == "" || r.Severity == "" || r.GroupBy == nil {
				t.Fatalf("rule %+v", r)
			}
			switch r.Kind {
			case alerts.KindAttemptsPerCall:
				if r.Window <= 0 || r.Threshold == nil || r.MinRequests < 1 {
					t.Fatalf("rule %+v", r)
				}
			case alerts.KindCacheBroken:
				if r.Window <= 0 || r.MinCalls < 1 {
					t.Fatalf("rule %+v", r)
				}
			case alerts.KindDailySpend:
				if r.ThresholdUSD <= 0 || r.ProjectionAfter <= 0 {
					t.Fatalf("rule %+v", r)
				}
			case alerts.KindMonthlyBudget:
			case alerts.KindHeadroom:
				if r.Window < time.Minute || r.MinHeadroom == nil || r.MaxLoad == nil || r.MinHeadroom.Sign() <= 0 {
					t.Fatalf("rule %+v", r)
				}
			case alerts.KindErrors:
				if r.Window < time.Minute || r.Window > time.Hour || len(r.Classes) == 0 || r.MinCount < 1 {
					t.Fatalf("rule %+v", r)
				}
			default:
				t.Fatalf("rule %+v", r)
			}
			for _, rc := range r.Receivers {
				if !names[rc] {
					t.Fatalf("rule %s names undefined receiver %s", r.Name, rc)
				}
			}
		}
	})
}

// TestLoadChecksSecretFiles checks that a receiver whose secret file does not exist, or is empty,
// stops the start naming the receiver and the file, and that a readable one loads.
func TestLoadChecksSecretFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, empty := filepath.Join(dir, "hook-url"), filepath.Join(dir, "empty")
	if err := os.WriteFile(good, []byte("https://hooks.example.com/T1/B2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing-token")
	cases := []struct {
		name, receivers, want string
	}{
		{"readable", "  - {name: ops, slack: {url_file: " + good + "}}\n", ""},
		{"missing token", "  - {name: ops, webhook: {url: \"https://x.example.com\", bearer_token_file: " + missing + "}}\n", `receiver "ops": read secret file: open ` + missing},
		{"empty url", "  - {name: am, alertmanager: {url_file: " + empty + "}}\n", `receiver "am": secret file ` + empty + " is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "ledgerd.yaml")
			if err := os.WriteFile(path, []byte("receivers:\n"+tc.receivers), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := alerts.Load(path)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Load: %v, want %q", err, tc.want)
			}
		})
	}
}
