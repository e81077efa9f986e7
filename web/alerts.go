package web

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ledgerd/ledgerd/alerts"
	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/server"
)

// AlertSource lists a project's alerts: the current ones, the latest firings and resolutions, and
// how each receiver's deliveries went. *alerts.Evaluator is one.
type AlertSource interface {
	List(ctx context.Context, projectID int64, historyLimit int) (alerts.ListResponse, error)
}

// historyShown is how many firings and resolutions the alerts page lists.
const historyShown = 50

// alertsData is what the alerts page shows.
type alertsData struct {
	// Enabled is false when ledgerd runs without alerting.
	Enabled bool
	List    alerts.ListResponse
	Rules   []alerts.Rule
	// IncidentOf links an alert (by fingerprint) to the incident it belongs to.
	IncidentOf map[string]string
	tz         *time.Location
}

// when formats an instant in the ledger's timezone.
func (d alertsData) when(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "–"
	}
	return t.In(d.tz).Format("2006-01-02 15:04")
}

// firing lists the project's firing alerts, for the overview.
func (h *Handler) firing(ctx context.Context, projectID int64) ([]alerts.AlertView, error) {
	if h.opt.Alerts == nil {
		return nil, nil
	}
	l, err := h.opt.Alerts.List(ctx, projectID, 1)
	if err != nil {
		return nil, err
	}
	var out []alerts.AlertView
	for _, a := range l.Alerts {
		if a.State == "firing" {
			out = append(out, a)
		}
	}
	return out, nil
}

// alertsPage lists firing and recent alerts with the rules and the receivers' delivery status.
func (h *Handler) alertsPage(c echo.Context) error {
	v, err := h.parseView(c)
	if err != nil {
		return err
	}
	p := server.ProjectOf(c)
	d := alertsData{Enabled: h.opt.Alerts != nil, tz: h.opt.Timezone}
	for _, r := range h.opt.AlertRules {
		if r.Project == "" || r.Project == p.Name {
			d.Rules = append(d.Rules, r)
		}
	}
	if d.Enabled {
		if d.List, err = h.opt.Alerts.List(c.Request().Context(), p.ID, historyShown); err != nil {
			return h.dataError(err)
		}
		if d.IncidentOf, err = h.alertIncidents(c.Request().Context(), p.ID, d.List.Alerts); err != nil {
			return h.dataError(err)
		}
	}
	fr := h.page(c, "Alerts")
	fr.Filter = v
	return h.render(c, 200, alertsView(fr, d))
}

// alertIncidents links each of the alerts to its incident, found among the incidents from an hour
// before the earliest became active (30 days back at most) to now.
func (h *Handler) alertIncidents(ctx context.Context, projectID int64, list []alerts.AlertView) (map[string]string, error) {
	if len(list) == 0 {
		return nil, nil
	}
	now := h.now()
	from := now
	for _, a := range list {
		if a.ActiveSince.Before(from) {
			from = a.ActiveSince
		}
	}
	from = from.Add(-time.Hour)
	if limit := now.AddDate(0, 0, -30); from.Before(limit) {
		from = limit
	}
	found, err := h.opt.Analytics.Incidents(ctx, analytics.Filter{ProjectID: projectID, From: from, To: now.Add(time.Hour)})
	if err != nil {
		return nil, err
	}
	return alertLinks(list, found.Incidents, now), nil
}

// scopeText says what an alert covers, for people: its scope labels as "service router ·
// model claude-haiku-5-5", in the order a reader narrows down (project, org, provider, model,
// service, operation, tenant, then the rule's own labels). The labels every alert carries
// (alertname, kind, severity, project) are in the Rule column or the page itself, so they are
// left out; an alert with nothing else covers the whole project.
func scopeText(labels map[string]string) string {
	order := []string{"org", "provider", "model", "service", "operation", "tenant"}
	skip := map[string]bool{"alertname": true, "kind": true, "severity": true, "project": true}
	var parts []string
	for _, k := range order {
		if v, ok := labels[k]; ok {
			parts = append(parts, k+" "+v)
			skip[k] = true
		}
	}
	var rest []string
	for k := range labels {
		if !skip[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		parts = append(parts, k+" "+labels[k])
	}
	if len(parts) == 0 {
		return "whole project"
	}
	return strings.Join(parts, " · ")
}

// failing tells whether a receiver's last delivery failed.
func failing(r alerts.ReceiverView) bool {
	return r.LastFailureAt != nil && (r.LastSuccessAt == nil || r.LastFailureAt.After(*r.LastSuccessAt))
}
