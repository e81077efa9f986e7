package web

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ledgerd/ledgerd/alerts"
	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/server"
)

// incidentsData is what the incidents page shows.
type incidentsData struct {
	View      view
	Incidents []analytics.Incident
	// Clamped says the view's range was longer than incidents are looked for in at once: the
	// page shows its last analytics.MaxIncidentRange.
	Clamped bool
}

// incidentsPage lists the incidents of the view's range, the latest first, each with its figures
// and a link to the charts of its scope around it.
func (h *Handler) incidentsPage(c echo.Context) error {
	v, err := h.parseView(c)
	if err != nil {
		return err
	}
	f := v.filter(server.ProjectOf(c).ID)
	d := incidentsData{View: v}
	if f.To.Sub(f.From) > analytics.MaxIncidentRange {
		f.From, d.Clamped = f.To.Add(-analytics.MaxIncidentRange), true
	}
	list, err := h.opt.Analytics.Incidents(c.Request().Context(), analytics.Filter{ProjectID: f.ProjectID, From: f.From, To: f.To})
	if err != nil {
		return h.dataError(err)
	}
	d.Incidents = list.Incidents
	fr := h.page(c, "Incidents")
	fr.Filter = v
	return h.render(c, 200, incidentsView(fr, d))
}

// openIncidents are the incidents still open now: those of the last two hours (a broken cache or a
// storm that began earlier is still found, its start read from further back).
func (h *Handler) openIncidents(c echo.Context, projectID int64) ([]analytics.Incident, error) {
	now := h.now()
	list, err := h.opt.Analytics.OpenIncidents(c.Request().Context(), analytics.Filter{ProjectID: projectID,
		From: now.Add(-2 * time.Hour), To: now.Add(time.Hour)})
	if err != nil {
		return nil, err
	}
	return list.Incidents, nil
}

// incidentScope names what an incident concerns.
func incidentScope(in analytics.Incident) string {
	var parts []string
	if in.Service != "" {
		parts = append(parts, in.Service+" / "+in.Operation)
	}
	if in.Model != "" {
		parts = append(parts, in.Provider+" / "+in.Model)
	}
	if len(parts) == 0 {
		return "all spend"
	}
	return strings.Join(parts, " · ")
}

// incidentLink is the page showing an incident's figures around it, at minute or hour
// resolution: its model's reliability, its cache, or the spend, from half an hour before it to
// half an hour after (an hour after an open one's start, up to now).
func incidentLink(in analytics.Incident, now time.Time) string {
	pad := 30 * time.Minute
	if in.Kind == analytics.KindCacheBroken || in.Kind == analytics.KindSpendSpike {
		pad = 6 * time.Hour
	}
	end := now
	if in.EndedAt != nil {
		end = in.EndedAt.Add(pad)
	}
	from, to := in.StartedAt.Add(-pad).UTC(), end.UTC()
	if to.Sub(from) > 31*24*time.Hour {
		from = to.Add(-31 * 24 * time.Hour)
	}
	q := url.Values{"from": {from.Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)}}
	switch in.Kind {
	case analytics.KindCacheBroken:
		q.Set("service", in.Service)
		q.Set("operation", in.Operation)
		return "/cache?" + q.Encode()
	case analytics.KindSpendSpike:
		return "/?" + q.Encode()
	}
	q.Set("model", in.Model)
	return "/reliability?" + q.Encode()
}

// incidentEnd says when an incident ended, or that it is open.
func incidentEnd(in analytics.Incident, tz *time.Location) string {
	if in.EndedAt == nil {
		return "open"
	}
	return in.EndedAt.In(tz).Format("2006-01-02 15:04")
}

// duration is how long an incident lasted, or has lasted until now.
func duration(in analytics.Incident, now time.Time) string {
	end := now
	if in.EndedAt != nil {
		end = *in.EndedAt
	}
	d := end.Sub(in.StartedAt).Round(time.Minute)
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
	case d >= time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dm", int(d.Minutes()))
}

// recovery formats a recovery time.
func recovery(s *int64) string {
	if s == nil {
		return "–"
	}
	return fmt.Sprintf("%d s", *s)
}

// incidentKinds are the incident kinds each alert kind may belong to.
var incidentKinds = map[alerts.Kind][]string{
	alerts.KindDailySpend:      {analytics.KindSpendSpike},
	alerts.KindMonthlyBudget:   {analytics.KindSpendSpike},
	alerts.KindAttemptsPerCall: {analytics.KindRetryStorm, analytics.KindErrorSpike},
	alerts.KindCacheBroken:     {analytics.KindCacheBroken},
	alerts.KindErrors:          {analytics.KindErrorSpike, analytics.KindRetryStorm, analytics.KindFallbackSurge},
	alerts.KindHeadroom:        {analytics.KindErrorSpike, analytics.KindRetryStorm},
}

// alertIncident is the incident a fired alert belongs to: one of a kind the alert's kind may
// belong to, going on while the alert was active (from an hour before), whose scope holds the
// alert's model and service where both name them; nil when none.
func alertIncident(a alerts.AlertView, list []analytics.Incident, now time.Time) *analytics.Incident {
	end := now
	if a.ResolvedAt != nil {
		end = *a.ResolvedAt
	}
	for i, in := range list {
		if !slices.Contains(incidentKinds[alerts.Kind(a.Kind)], in.Kind) {
			continue
		}
		if in.StartedAt.After(end) || (in.EndedAt != nil && in.EndedAt.Before(a.ActiveSince.Add(-time.Hour))) {
			continue
		}
		if m := a.Labels["model"]; m != "" && in.Model != "" && m != in.Model {
			continue
		}
		if s := a.Labels["service"]; s != "" && in.Service != "" && s != in.Service {
			continue
		}
		return &list[i]
	}
	return nil
}

// alertLinks maps each fired alert's fingerprint to the page of its incident, among list.
func alertLinks(fired []alerts.AlertView, list []analytics.Incident, now time.Time) map[string]string {
	out := map[string]string{}
	for _, a := range fired {
		if in := alertIncident(a, list, now); in != nil {
			out[a.Fingerprint] = "/incidents#" + in.ID
		}
	}
	return out
}
