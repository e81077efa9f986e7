// Package alerts watches the ledger for the failures that cost money silently (spend running away,
// retries multiplying attempts, a prompt cache that stopped reading, a month heading over budget)
// and tells people through webhooks, Slack and Alertmanager. One replica evaluates at a time
// (elected through Postgres); alert state lives in Postgres, so a restart neither re-pages nor
// forgets. Evaluation runs as a pipeline of small stages: evaluate → dedup → notify → record.
package alerts

import (
	"fmt"
	"io"
	"math/big"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ledgerd/ledgerd/alerts/notify"
	"github.com/ledgerd/ledgerd/internal/rollup"
	"github.com/ledgerd/ledgerd/money"
)

// Kind is what a rule watches.
type Kind string

// The rule kinds.
const (
	// KindDailySpend fires when the day's spend, or its projection, passes a threshold.
	KindDailySpend Kind = "daily_spend"
	// KindAttemptsPerCall fires when attempts per logical call pass a threshold (retry storms).
	KindAttemptsPerCall Kind = "attempts_per_call"
	// KindCacheBroken fires when calls write the prompt cache and none read it.
	KindCacheBroken Kind = "cache_broken"
	// KindMonthlyBudget fires when the month's projected spend passes the budget.
	KindMonthlyBudget Kind = "monthly_budget"
	// KindHeadroom fires when an organization runs close to its provider's rate limits: the
	// remaining share the provider reported drops below a threshold on some minute, or the
	// requests or tokens of some minute reach a share of the reported limit.
	KindHeadroom Kind = "headroom"
	// KindErrors fires at once on error classes that retrying cannot fix and someone must act on
	// (a spent quota, a revoked key).
	KindErrors Kind = "errors"
)

var kinds = []Kind{KindDailySpend, KindAttemptsPerCall, KindCacheBroken, KindMonthlyBudget, KindHeadroom, KindErrors}

// Config is the alerting part of ledgerd's configuration file: how often to evaluate, the rules,
// and where to send.
type Config struct {
	// Interval is the time between evaluations (1m).
	Interval time.Duration
	// RepeatInterval is how long a firing alert waits before it is sent again to a webhook or
	// Slack receiver (4h).
	RepeatInterval time.Duration
	// ResendInterval is how often a firing alert is re-sent to Alertmanager (1m, never less than
	// Interval in effect); Alertmanager expires it 4 resends after the last one.
	ResendInterval time.Duration
	// HistoryRetention is how long firing and resolved events stay in the alert history (2160h,
	// 90 days); the leader deletes older ones after each evaluation.
	HistoryRetention time.Duration
	// ExternalURL is ledgerd's address as people reach it; alerts link to the dashboard's Alerts
	// page under it (none). ledgerd serve --public-url overrides it.
	ExternalURL string
	// Rules are evaluated in order; nil means the defaults of DefaultRules.
	Rules []Rule
	// Receivers are where alerts go.
	Receivers []Receiver
}

// Rule is one alerting rule.
type Rule struct {
	Name string
	Kind Kind
	// Project limits the rule to one project (by name); empty means every project.
	Project string
	// For is how long the condition must hold before the alert fires (0: at once).
	For time.Duration
	// Severity is a label for routing (warning).
	Severity string
	// Labels are added to every alert of the rule.
	Labels map[string]string
	// Receivers names where the rule's alerts go; nil means every receiver.
	Receivers []string
	// GroupBy splits the scope: one alert per distinct combination of these fields.
	GroupBy []string
	// Window is the period attempts_per_call and cache_broken look back over (15m and 1h).
	Window time.Duration
	// Threshold is the attempts per logical call above which attempts_per_call fires (1.5).
	Threshold *big.Rat
	// MinRequests is the fewest logical calls in the window for attempts_per_call to judge (20).
	MinRequests int64
	// MinCalls is the fewest cache-writing calls in the window for cache_broken to judge (10).
	MinCalls int64
	// ThresholdUSD is the daily spend above which daily_spend fires.
	ThresholdUSD money.Nanos
	// Projection lets daily_spend fire early on the day's projected spend (true).
	Projection bool
	// ProjectionAfter is how much of the day must have passed before the projection counts (3h).
	ProjectionAfter time.Duration
	// BudgetUSD is monthly_budget's budget; zero means each project's stored budget.
	BudgetUSD money.Nanos
	// Service limits monthly_budget to one service's spend (all services).
	Service string
	// MinHeadroom is the reported remaining share (remaining over limit) below which headroom
	// fires (0.1).
	MinHeadroom *big.Rat
	// MaxLoad is the share of a reported limit that one minute's requests or tokens may reach
	// before headroom fires (0.9).
	MaxLoad *big.Rat
	// Classes are the error classes errors fires on (quota_exhausted, auth_error,
	// permission_error).
	Classes []string
	// MinCount is the fewest attempts of those classes in the window for errors to fire (1).
	MinCount int64

	line int // where the rule starts in the file, for errors found after parsing
}

// Receiver is a named destination: exactly one of Webhook, Slack and Alertmanager is set.
type Receiver struct {
	Name         string
	Webhook      *WebhookConfig
	Slack        *SlackConfig
	Alertmanager *AlertmanagerConfig
	// Timeout bounds one HTTP request (10s).
	Timeout time.Duration
	// MaxAttempts bounds the tries of one delivery (5).
	MaxAttempts int64
	// MaxRetryTime bounds the time one delivery may take, waits included (1m).
	MaxRetryTime time.Duration
}

// Kind names the receiver's integration: webhook, slack or alertmanager.
func (r Receiver) Kind() string {
	switch {
	case r.Webhook != nil:
		return "webhook"
	case r.Slack != nil:
		return "slack"
	default:
		return "alertmanager"
	}
}

// WebhookConfig is a generic JSON webhook.
type WebhookConfig struct {
	URL         notify.Secret
	BearerToken notify.Secret
}

// SlackConfig is a Slack incoming webhook.
type SlackConfig struct {
	URL notify.Secret
}

// AlertmanagerConfig is a Prometheus Alertmanager.
type AlertmanagerConfig struct {
	URL         notify.Secret
	BearerToken notify.Secret
}

// Defaults of the configuration, in one place; docs/alerts.md lists the same.
const (
	DefaultInterval         = time.Minute
	DefaultRepeatInterval   = 4 * time.Hour
	DefaultResendInterval   = time.Minute
	DefaultHistoryRetention = 90 * 24 * time.Hour
	DefaultSeverity         = "warning"
	DefaultRetryWindow      = 15 * time.Minute
	DefaultCacheWindow      = time.Hour
	DefaultMinRequests      = 20
	DefaultMinCalls         = 10
	DefaultProjectionAfter  = 3 * time.Hour
	DefaultTimeout          = 10 * time.Second
	DefaultMaxAttempts      = 5
	DefaultMaxRetryTime     = time.Minute
	DefaultHeadroomWindow   = 15 * time.Minute
	DefaultErrorsWindow     = 15 * time.Minute
	DefaultMinCount         = 1
)

// DefaultMinHeadroom is headroom's default threshold on the reported remaining share, 10%.
func DefaultMinHeadroom() *big.Rat { return big.NewRat(1, 10) }

// DefaultMaxLoad is headroom's default threshold on one minute's load over the limit, 90%.
func DefaultMaxLoad() *big.Rat { return big.NewRat(9, 10) }

// DefaultClasses are the classes errors fires on when a rule names none: retrying cannot fix them
// and someone must act (pay, renew a key, grant access).
func DefaultClasses() []string { return []string{"quota_exhausted", "auth_error", "permission_error"} }

// errorClasses are the classes errors may name: every class the record contract has.
var errorClasses = []string{"bad_request", "auth_error", "permission_error", "not_found", "request_too_large",
	"rate_limited", "quota_exhausted", "timeout", "connection_error", "server_error", "overloaded", "cancelled", "unknown"}

// DefaultThreshold is attempts_per_call's default threshold, 1.5 attempts per logical call.
func DefaultThreshold() *big.Rat { return big.NewRat(3, 2) }

// DefaultRules are the rules of a file that names none: the three that need no figure from the
// operator (the budget rule uses each project's stored budget).
func DefaultRules() []Rule {
	return []Rule{
		withDefaults(Rule{Name: "cache-broken", Kind: KindCacheBroken}),
		withDefaults(Rule{Name: "retry-storm", Kind: KindAttemptsPerCall}),
		withDefaults(Rule{Name: "budget", Kind: KindMonthlyBudget}),
	}
}

// defaultGroupBy is each kind's scope when a rule names none.
var defaultGroupBy = map[Kind][]string{
	KindDailySpend:      {},
	KindAttemptsPerCall: {"service", "operation", "model"},
	KindCacheBroken:     {"service", "operation", "model"},
	KindMonthlyBudget:   {},
	KindHeadroom:        {"org", "provider", "model"},
	KindErrors:          {"provider", "org", "service"},
}

// groupable lists the fields each kind may group by.
var groupable = map[Kind][]string{
	KindDailySpend:      {"service", "operation", "model", "provider", "tenant"},
	KindAttemptsPerCall: {"service", "operation", "model", "provider", "tenant"},
	KindCacheBroken:     {"service", "operation", "model", "provider", "tenant", "prompt_hash"},
	KindMonthlyBudget:   {},
	// A rate limit is the organization's, per model: a scope narrower than that has no limit of
	// its own.
	KindHeadroom: {"org", "provider", "model"},
	KindErrors:   {"service", "operation", "model", "provider", "tenant", "org", "error_class"},
}

// reservedLabels are set by ledgerd on every alert; a rule's labels may not name them.
var reservedLabels = []string{"alertname", "project", "kind", "severity", "service", "operation",
	"model", "provider", "tenant", "prompt_hash", "org", "error_class"}

func withDefaults(r Rule) Rule {
	if r.Severity == "" {
		r.Severity = DefaultSeverity
	}
	if r.GroupBy == nil {
		r.GroupBy = defaultGroupBy[r.Kind]
	}
	switch r.Kind {
	case KindAttemptsPerCall:
		if r.Window == 0 {
			r.Window = DefaultRetryWindow
		}
		if r.Threshold == nil {
			r.Threshold = DefaultThreshold()
		}
		if r.MinRequests == 0 {
			r.MinRequests = DefaultMinRequests
		}
	case KindCacheBroken:
		if r.Window == 0 {
			r.Window = DefaultCacheWindow
		}
		if r.MinCalls == 0 {
			r.MinCalls = DefaultMinCalls
		}
	case KindDailySpend:
		if r.ProjectionAfter == 0 {
			r.ProjectionAfter = DefaultProjectionAfter
		}
	case KindHeadroom:
		if r.Window == 0 {
			r.Window = DefaultHeadroomWindow
		}
		if r.MinHeadroom == nil {
			r.MinHeadroom = DefaultMinHeadroom()
		}
		if r.MaxLoad == nil {
			r.MaxLoad = DefaultMaxLoad()
		}
	case KindErrors:
		if r.Window == 0 {
			r.Window = DefaultErrorsWindow
		}
		if r.Classes == nil {
			r.Classes = DefaultClasses()
		}
		if r.MinCount == 0 {
			r.MinCount = DefaultMinCount
		}
	}
	return r
}

// maxConfigBytes bounds the configuration file.
const maxConfigBytes = 1 << 20

// Load reads the configuration file at path; an empty path gives the defaults.
func Load(path string) (*Config, error) {
	if path == "" {
		return Parse(nil)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	if err := cfg.checkSecretFiles(); err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// checkSecretFiles reads every receiver's secret files once, so that a file that does not exist,
// cannot be read or is empty stops the start, naming the receiver and the file, rather than the
// first delivery failing hours later. The files are read again at each delivery, so a rotated
// secret is still taken up without a restart.
func (c *Config) checkSecretFiles() error {
	for _, r := range c.Receivers {
		var secrets []notify.Secret
		switch {
		case r.Webhook != nil:
			secrets = []notify.Secret{r.Webhook.URL, r.Webhook.BearerToken}
		case r.Slack != nil:
			secrets = []notify.Secret{r.Slack.URL}
		case r.Alertmanager != nil:
			secrets = []notify.Secret{r.Alertmanager.URL, r.Alertmanager.BearerToken}
		}
		for _, s := range secrets {
			if s.File() == "" {
				continue
			}
			if _, err := s.Get(); err != nil {
				return fmt.Errorf("receiver %q: %w", r.Name, err)
			}
		}
	}
	return nil
}

// Parse reads a configuration file's content strictly: an unknown key, a value of the wrong kind
// or a rule that cannot work is an error naming the key and its line.
func Parse(data []byte) (*Config, error) {
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("configuration is larger than %d bytes", maxConfigBytes)
	}
	cfg := &Config{Interval: DefaultInterval, RepeatInterval: DefaultRepeatInterval, ResendInterval: DefaultResendInterval,
		HistoryRetention: DefaultHistoryRetention}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("configuration is not valid YAML: %w", err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		cfg.Rules = DefaultRules()
		return cfg, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		cfg.Rules = DefaultRules()
		return cfg, nil
	}
	top, err := fields(root, "configuration", "alerts", "receivers")
	if err != nil {
		return nil, err
	}
	if n := top.value("alerts"); n != nil && !(n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		if err := parseAlerts(n, cfg); err != nil {
			return nil, err
		}
	}
	if cfg.Rules == nil {
		cfg.Rules = DefaultRules()
	}
	items, _, err := top.items("receivers")
	if err != nil {
		return nil, err
	}
	cfg.Receivers = []Receiver{}
	seen := map[string]int{}
	for i, it := range items {
		r, err := parseReceiver(it, i)
		if err != nil {
			return nil, err
		}
		if line, dup := seen[r.Name]; dup {
			return nil, errAt(it, "receivers: %q is defined twice (first at line %d)", r.Name, line)
		}
		seen[r.Name] = it.Line
		cfg.Receivers = append(cfg.Receivers, r)
	}
	for _, r := range cfg.Rules {
		for _, name := range r.Receivers {
			if _, ok := seen[name]; !ok {
				return nil, &ConfigError{Line: r.line, Msg: fmt.Sprintf("rule %q: receiver %q is not defined under receivers", r.Name, name)}
			}
		}
	}
	return cfg, nil
}

func parseAlerts(n *yaml.Node, cfg *Config) error {
	m, err := fields(n, "alerts", "interval", "repeat_interval", "resend_interval", "history_retention", "external_url", "rules")
	if err != nil {
		return err
	}
	for _, d := range []struct {
		key string
		dst *time.Duration
	}{{"interval", &cfg.Interval}, {"repeat_interval", &cfg.RepeatInterval}, {"resend_interval", &cfg.ResendInterval},
		{"history_retention", &cfg.HistoryRetention}} {
		if err := m.duration(d.key, d.dst); err != nil {
			return err
		}
		if *d.dst < time.Second {
			return errAt(m.value(d.key), "alerts: %s must be at least 1s", d.key)
		}
	}
	if err := m.str("external_url", &cfg.ExternalURL); err != nil {
		return err
	}
	if cfg.ExternalURL != "" {
		if u, err := url.Parse(cfg.ExternalURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errAt(m.value("external_url"), "alerts: external_url must be an http(s) URL such as https://ledgerd.example.com")
		}
		cfg.ExternalURL = strings.TrimRight(cfg.ExternalURL, "/")
	}
	items, ok, err := m.items("rules")
	if err != nil || !ok {
		return err
	}
	cfg.Rules = []Rule{}
	names := map[string]int{}
	for i, it := range items {
		r, err := parseRule(it, i)
		if err != nil {
			return err
		}
		if line, dup := names[r.Name]; dup {
			return errAt(it, "rules: %q is defined twice (first at line %d)", r.Name, line)
		}
		names[r.Name] = it.Line
		cfg.Rules = append(cfg.Rules, r)
	}
	return nil
}

// ruleName keeps rule and receiver names safe as labels, log fields and metric label values.
var ruleName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// ruleKeys lists every key a rule may have; keysOf says which of them each kind accepts.
var ruleKeys = []string{"name", "kind", "project", "for", "severity", "labels", "receivers", "group_by",
	"window", "threshold", "min_requests", "min_calls", "threshold_usd", "projection", "projection_after",
	"budget_usd", "service", "min_headroom", "max_load", "classes", "min_count"}

var kindKeys = map[Kind][]string{
	KindDailySpend:      {"threshold_usd", "projection", "projection_after", "group_by"},
	KindAttemptsPerCall: {"window", "threshold", "min_requests", "group_by"},
	KindCacheBroken:     {"window", "min_calls", "group_by"},
	KindMonthlyBudget:   {"budget_usd", "service"},
	KindHeadroom:        {"window", "min_headroom", "max_load", "group_by"},
	KindErrors:          {"window", "classes", "min_count", "group_by"},
}

var commonRuleKeys = []string{"name", "kind", "project", "for", "severity", "labels", "receivers"}

func parseRule(n *yaml.Node, i int) (Rule, error) {
	where := fmt.Sprintf("rules[%d]", i)
	m, err := fields(n, where, ruleKeys...)
	if err != nil {
		return Rule{}, err
	}
	r := Rule{line: n.Line}
	if err := m.str("name", &r.Name); err != nil {
		return r, err
	}
	if !ruleName.MatchString(r.Name) {
		return r, errAt(n, "%s: name must be 1 to 64 letters, digits, '.', '_' or '-' (got %q)", where, r.Name)
	}
	where = fmt.Sprintf("rule %q", r.Name)
	m.where = where
	var kind string
	if err := m.str("kind", &kind); err != nil {
		return r, err
	}
	r.Kind = Kind(kind)
	if !slices.Contains(kinds, r.Kind) {
		return r, errAt(n, "%s: kind must be one of daily_spend, attempts_per_call, cache_broken, monthly_budget, headroom, errors (got %q)", where, kind)
	}
	allowed := append(slices.Clone(commonRuleKeys), kindKeys[r.Kind]...)
	for _, k := range ruleKeys {
		if m.has(k) && !slices.Contains(allowed, k) {
			return r, errAt(m.keys[k], "%s: %s does not apply to kind %s (it takes: %s)", where, k, r.Kind,
				strings.Join(kindKeys[r.Kind], ", "))
		}
	}
	steps := []error{
		m.str("project", &r.Project),
		m.duration("for", &r.For),
		m.str("severity", &r.Severity),
		m.duration("window", &r.Window),
		m.ratio("threshold", &r.Threshold),
		m.count("min_requests", &r.MinRequests),
		m.count("min_calls", &r.MinCalls),
		m.usd("threshold_usd", &r.ThresholdUSD),
		m.duration("projection_after", &r.ProjectionAfter),
		m.usd("budget_usd", &r.BudgetUSD),
		m.str("service", &r.Service),
		m.ratio("min_headroom", &r.MinHeadroom),
		m.ratio("max_load", &r.MaxLoad),
		m.count("min_count", &r.MinCount),
	}
	if err := firstErr(steps); err != nil {
		return r, err
	}
	r.Projection = true
	if err := m.boolean("projection", &r.Projection); err != nil {
		return r, err
	}
	if r.Labels, err = m.labels("labels"); err != nil {
		return r, err
	}
	for k := range r.Labels {
		if slices.Contains(reservedLabels, k) {
			return r, errAt(m.value("labels"), "%s: labels: %q is set by ledgerd; use the rule's severity, project or group_by instead", where, k)
		}
	}
	if r.Receivers, _, err = m.list("receivers"); err != nil {
		return r, err
	}
	var ok bool
	if r.Classes, ok, err = m.list("classes"); err != nil {
		return r, err
	} else if ok {
		if len(r.Classes) == 0 {
			return r, errAt(m.value("classes"), "%s: classes must name at least one error class", where)
		}
		for _, c := range r.Classes {
			if !slices.Contains(errorClasses, c) {
				return r, errAt(m.value("classes"), "%s: classes: %q is not one of %s", where, c, strings.Join(errorClasses, ", "))
			}
		}
	}
	if r.GroupBy, ok, err = m.list("group_by"); err != nil {
		return r, err
	}
	if ok {
		seen := map[string]bool{}
		for _, g := range r.GroupBy {
			if !slices.Contains(groupable[r.Kind], g) {
				return r, errAt(m.value("group_by"), "%s: group_by: %q is not one of %s", where, g, strings.Join(groupable[r.Kind], ", "))
			}
			if seen[g] {
				return r, errAt(m.value("group_by"), "%s: group_by: %q is listed twice", where, g)
			}
			seen[g] = true
		}
	}
	if r.Severity != "" && !labelValue.MatchString(r.Severity) {
		return r, errAt(m.value("severity"), "%s: severity must be a short word such as warning or critical", where)
	}
	switch r.Kind {
	case KindDailySpend:
		if r.ThresholdUSD == 0 {
			return r, errAt(n, "%s: daily_spend needs threshold_usd, a dollar amount such as \"50\"", where)
		}
		if m.has("projection_after") && (r.ProjectionAfter <= 0 || r.ProjectionAfter >= 24*time.Hour) {
			return r, errAt(m.value("projection_after"), "%s: projection_after must be more than 0 and less than a day (projection: false turns the projection off)", where)
		}
	case KindAttemptsPerCall, KindCacheBroken:
		// attempts_per_call reads rollup_hourly, which keeps every hour rollup.HourlyKeep: a window
		// of whole days within it.
		longest, why := 31*24*time.Hour, ""
		if r.Kind == KindAttemptsPerCall {
			longest = rollup.HourlyKeep - 24*time.Hour
			why = fmt.Sprintf(" (hourly detail by service is kept %d days)", rollup.HourlyKeep/(24*time.Hour))
		}
		if m.has("window") && (r.Window < time.Minute || r.Window > longest) {
			return r, errAt(m.value("window"), "%s: window must be from 1m to %dd%s", where, longest/(24*time.Hour), why)
		}
		if r.Threshold != nil && (r.Threshold.Cmp(big.NewRat(1, 1)) < 0 || r.Threshold.Cmp(big.NewRat(10_000, 1)) > 0) {
			return r, errAt(m.value("threshold"), "%s: threshold is attempts per logical call and must be from 1 to 10000", where)
		}
	case KindHeadroom, KindErrors:
		// headroom reads a minute rollup, errors the raw attempts: their windows are whole minutes,
		// at most a day and an hour.
		longest := map[Kind]time.Duration{KindHeadroom: 24 * time.Hour, KindErrors: time.Hour}[r.Kind]
		if m.has("window") && (r.Window < time.Minute || r.Window > longest || r.Window%time.Minute != 0) {
			return r, errAt(m.value("window"), "%s: window must be whole minutes from 1m to %s", where, human(longest))
		}
		for _, s := range []struct {
			key string
			v   *big.Rat
		}{{"min_headroom", r.MinHeadroom}, {"max_load", r.MaxLoad}} {
			if s.v != nil && (s.v.Sign() <= 0 || s.v.Cmp(big.NewRat(1, 1)) > 0) {
				return r, errAt(m.value(s.key), "%s: %s is a share of the limit and must be more than 0 and at most 1 (0.1 is 10%%)", where, s.key)
			}
		}
	}
	return withDefaults(r), nil
}

// labelValue keeps severity a plain word.
var labelValue = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,32}$`)

func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func parseReceiver(n *yaml.Node, i int) (Receiver, error) {
	where := fmt.Sprintf("receivers[%d]", i)
	m, err := fields(n, where, "name", "webhook", "slack", "alertmanager", "timeout", "max_attempts", "max_retry_time")
	if err != nil {
		return Receiver{}, err
	}
	r := Receiver{Timeout: DefaultTimeout, MaxAttempts: DefaultMaxAttempts, MaxRetryTime: DefaultMaxRetryTime}
	if err := m.str("name", &r.Name); err != nil {
		return r, err
	}
	if !ruleName.MatchString(r.Name) {
		return r, errAt(n, "%s: name must be 1 to 64 letters, digits, '.', '_' or '-' (got %q)", where, r.Name)
	}
	where = fmt.Sprintf("receiver %q", r.Name)
	m.where = where
	if err := firstErr([]error{m.duration("timeout", &r.Timeout), m.count("max_attempts", &r.MaxAttempts),
		m.duration("max_retry_time", &r.MaxRetryTime)}); err != nil {
		return r, err
	}
	if r.Timeout < 100*time.Millisecond || r.MaxRetryTime < time.Second {
		return r, errAt(n, "%s: timeout must be at least 100ms and max_retry_time at least 1s", where)
	}
	if r.MaxAttempts > 100 {
		return r, errAt(m.value("max_attempts"), "%s: max_attempts must be at most 100", where)
	}
	set := 0
	for _, k := range []string{"webhook", "slack", "alertmanager"} {
		if m.has(k) {
			set++
		}
	}
	if set != 1 {
		return r, errAt(n, "%s: give exactly one of webhook, slack or alertmanager", where)
	}
	switch {
	case m.has("webhook"):
		url, tok, err := endpoint(m.value("webhook"), where+": webhook")
		if err != nil {
			return r, err
		}
		r.Webhook = &WebhookConfig{URL: url, BearerToken: tok}
	case m.has("slack"):
		sm, err := fields(m.value("slack"), where+": slack", "url", "url_file")
		if err != nil {
			return r, err
		}
		url, err := secretURL(sm, "url")
		if err != nil {
			return r, err
		}
		r.Slack = &SlackConfig{URL: url}
	default:
		url, tok, err := endpoint(m.value("alertmanager"), where+": alertmanager")
		if err != nil {
			return r, err
		}
		r.Alertmanager = &AlertmanagerConfig{URL: url, BearerToken: tok}
	}
	return r, nil
}

// endpoint reads a receiver that takes a URL and an optional bearer token, each given inline or
// as a file (webhook, alertmanager).
func endpoint(n *yaml.Node, where string) (url, token notify.Secret, err error) {
	sm, err := fields(n, where, "url", "url_file", "bearer_token", "bearer_token_file")
	if err != nil {
		return url, token, err
	}
	if url, err = secretURL(sm, "url"); err != nil {
		return url, token, err
	}
	token, err = secret(sm, "bearer_token")
	return url, token, err
}

// secret reads key or key_file (at most one); absent gives the zero Secret.
func secret(m *mapping, key string) (notify.Secret, error) {
	var v, file string
	if err := firstErr([]error{m.str(key, &v), m.str(key+"_file", &file)}); err != nil {
		return notify.Secret{}, err
	}
	switch {
	case v != "" && file != "":
		return notify.Secret{}, errAt(m.node, "%s: give %s or %s_file, not both", m.where, key, key)
	case file != "":
		return notify.SecretFile(file), nil
	default:
		return notify.NewSecret(v), nil
	}
}

// secretURL reads a required URL secret and checks an inline one; errors never quote it.
func secretURL(m *mapping, key string) (notify.Secret, error) {
	s, err := secret(m, key)
	if err != nil {
		return s, err
	}
	if s.IsZero() {
		return s, errAt(m.node, "%s: %s (or %s_file) is required", m.where, key, key)
	}
	if v, _, inline, _ := m.scalar(key); inline {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return s, errAt(m.value(key), "%s: %s must be an http or https URL", m.where, key)
		}
	}
	return s, nil
}
