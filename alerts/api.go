package alerts

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/ledgerd/ledgerd/internal/server"
)

// AlertView is an alert as GET /v1/alerts shows it.
type AlertView struct {
	Fingerprint    string            `json:"fingerprint"`
	Rule           string            `json:"rule"`
	Kind           string            `json:"kind"`
	Severity       string            `json:"severity"`
	State          string            `json:"state"`
	Labels         map[string]string `json:"labels"`
	Summary        string            `json:"summary"`
	Description    string            `json:"description"`
	Figures        map[string]string `json:"figures"`
	ActiveSince    time.Time         `json:"active_since"`
	FiredAt        *time.Time        `json:"fired_at,omitempty"`
	ResolvedAt     *time.Time        `json:"resolved_at,omitempty"`
	EvaluatedAt    time.Time         `json:"evaluated_at"`
	LastNotifiedAt *time.Time        `json:"last_notified_at,omitempty"`
}

// HistoryView is one firing or resolving of an alert.
type HistoryView struct {
	Fingerprint string            `json:"fingerprint"`
	Rule        string            `json:"rule"`
	Kind        string            `json:"kind"`
	Severity    string            `json:"severity"`
	Status      string            `json:"status"`
	At          time.Time         `json:"at"`
	ActiveSince time.Time         `json:"active_since"`
	Labels      map[string]string `json:"labels"`
	Summary     string            `json:"summary"`
	Description string            `json:"description"`
	Figures     map[string]string `json:"figures"`
}

// ReceiverView is a receiver's delivery status: its name and kind only, never its URL.
type ReceiverView struct {
	Name          string     `json:"name"`
	Kind          string     `json:"kind"`
	Sent          int64      `json:"sent"`
	Failed        int64      `json:"failed"`
	LastSuccessAt *time.Time `json:"last_success_at,omitempty"`
	LastFailureAt *time.Time `json:"last_failure_at,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
}

// ListResponse is the body of GET /v1/alerts.
type ListResponse struct {
	// Alerts are the project's current alerts: pending, firing, and resolved ones whose resolved
	// notifications are still going out.
	Alerts []AlertView `json:"alerts"`
	// History is the project's latest firings and resolutions, newest first.
	History []HistoryView `json:"history"`
	// Receivers is every configured receiver's delivery status.
	Receivers []ReceiverView `json:"receivers"`
}

// Queries of GET /v1/alerts.
const (
	listStateSQL = `SELECT fingerprint, rule, kind, severity, state, labels, summary, description, figures,
		active_since, fired_at, resolved_at, evaluated_at, last_notified_at
		FROM alert_state WHERE project_id = $1
		ORDER BY CASE state WHEN 'firing' THEN 0 WHEN 'pending' THEN 1 ELSE 2 END, active_since, fingerprint`
	listHistorySQL = `SELECT fingerprint, rule, kind, severity, status, at, active_since, labels, summary,
		description, figures FROM alert_history WHERE project_id = $1 ORDER BY at DESC, id DESC LIMIT $2`
	listReceiversSQL = `SELECT name, sent, failed, last_success_at, last_failure_at, last_error FROM alert_receivers`
)

// maxHistory bounds ?limit= on GET /v1/alerts.
const maxHistory = 1000

// Mount adds GET /alerts to the API group (behind a project key): the project's alerts, their
// history and the receivers' status.
func (e *Evaluator) Mount(s *server.Server) {
	s.API.GET("/alerts", e.list)
}

func (e *Evaluator) list(c echo.Context) error {
	ctx := c.Request().Context()
	project := server.ProjectOf(c)
	limit := 100
	if s := c.QueryParam("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxHistory {
			return echo.NewHTTPError(http.StatusBadRequest, "limit must be a whole number from 1 to 1000")
		}
		limit = n
	}
	resp, err := e.List(ctx, project.ID, limit)
	if err != nil {
		return e.unavailable(err)
	}
	return c.JSON(http.StatusOK, resp)
}

// List returns a project's current alerts, its latest limit firings and resolutions, and every
// receiver's delivery status: the body of GET /v1/alerts, for the dashboard to call directly.
func (e *Evaluator) List(ctx context.Context, projectID int64, limit int) (ListResponse, error) {
	resp := ListResponse{Alerts: []AlertView{}, History: []HistoryView{}, Receivers: []ReceiverView{}}
	rows, err := e.pool.Query(ctx, listStateSQL, projectID)
	if err != nil {
		return ListResponse{}, fmt.Errorf("list alerts: %w", err)
	}
	resp.Alerts, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (AlertView, error) {
		var a AlertView
		err := row.Scan(&a.Fingerprint, &a.Rule, &a.Kind, &a.Severity, &a.State, &a.Labels, &a.Summary,
			&a.Description, &a.Figures, &a.ActiveSince, &a.FiredAt, &a.ResolvedAt, &a.EvaluatedAt, &a.LastNotifiedAt)
		return a, err
	})
	if err != nil {
		return ListResponse{}, fmt.Errorf("list alerts: %w", err)
	}
	rows, err = e.pool.Query(ctx, listHistorySQL, projectID, limit)
	if err != nil {
		return ListResponse{}, fmt.Errorf("list alerts: %w", err)
	}
	resp.History, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (HistoryView, error) {
		var h HistoryView
		err := row.Scan(&h.Fingerprint, &h.Rule, &h.Kind, &h.Severity, &h.Status, &h.At, &h.ActiveSince, &h.Labels,
			&h.Summary, &h.Description, &h.Figures)
		return h, err
	})
	if err != nil {
		return ListResponse{}, fmt.Errorf("list alerts: %w", err)
	}
	rows, err = e.pool.Query(ctx, listReceiversSQL)
	if err != nil {
		return ListResponse{}, fmt.Errorf("list alerts: %w", err)
	}
	status := map[string]ReceiverView{}
	var rv ReceiverView
	if _, err := pgx.ForEachRow(rows, []any{&rv.Name, &rv.Sent, &rv.Failed, &rv.LastSuccessAt, &rv.LastFailureAt, &rv.LastError}, func() error {
		status[rv.Name] = rv
		rv.LastSuccessAt, rv.LastFailureAt = nil, nil // the next row must not write into this one's times
		return nil
	}); err != nil {
		return ListResponse{}, fmt.Errorf("list alerts: %w", err)
	}
	for _, r := range e.receivers {
		v := status[r.name]
		v.Name, v.Kind = r.name, r.kind
		resp.Receivers = append(resp.Receivers, v)
	}
	if resp.Alerts == nil {
		resp.Alerts = []AlertView{}
	}
	if resp.History == nil {
		resp.History = []HistoryView{}
	}
	return resp, nil
}

func (e *Evaluator) unavailable(err error) error {
	e.log.Error("list alerts", "err", err)
	return echo.NewHTTPError(http.StatusServiceUnavailable, "database unavailable")
}
