package alerts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/alerts/notify"
	"github.com/ledgerd/ledgerd/internal/store"
)

// The states an alert moves through: pending while its rule's `for` has not yet passed, firing,
// then resolved once the condition clears.
const (
	statePending  = "pending"
	stateFiring   = "firing"
	stateResolved = "resolved"
)

// alertRow is one row of alert_state.
type alertRow struct {
	Fingerprint    string
	Rule           string
	Kind           string
	Severity       string
	ProjectID      int64
	Project        string
	State          string
	Labels         map[string]string
	Summary        string
	Description    string
	Figures        map[string]string
	ActiveSince    time.Time
	FiredAt        *time.Time
	ResolvedAt     *time.Time
	EvaluatedAt    time.Time
	LastNotifiedAt *time.Time
}

// stateCols are the columns of alert_state scanState reads; the project's name is not one of them
// (store names projects).
const stateCols = `s.fingerprint, s.rule, s.kind, s.severity, s.project_id, s.state, s.labels, s.summary,
	s.description, s.figures, s.active_since, s.fired_at, s.resolved_at, s.evaluated_at, s.last_notified_at`

func scanState(row pgx.CollectableRow) (alertRow, error) {
	var a alertRow
	err := row.Scan(&a.Fingerprint, &a.Rule, &a.Kind, &a.Severity, &a.ProjectID, &a.State, &a.Labels,
		&a.Summary, &a.Description, &a.Figures, &a.ActiveSince, &a.FiredAt, &a.ResolvedAt, &a.EvaluatedAt, &a.LastNotifiedAt)
	return a, err
}

// Queries of the state stage.
const (
	stateForRuleSQL = `SELECT ` + stateCols + ` FROM alert_state s WHERE s.rule = $1 AND s.project_id = $2 FOR UPDATE`
	upsertStateSQL  = `INSERT INTO alert_state (fingerprint, rule, kind, severity, project_id, state, labels, summary,
		description, figures, active_since, fired_at, resolved_at, evaluated_at, last_notified_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
		ON CONFLICT (fingerprint) DO UPDATE SET kind = excluded.kind, severity = excluded.severity,
			state = excluded.state, labels = excluded.labels, summary = excluded.summary,
			description = excluded.description, figures = excluded.figures, active_since = excluded.active_since,
			fired_at = excluded.fired_at, resolved_at = excluded.resolved_at, evaluated_at = excluded.evaluated_at`
	deleteStateSQL = `DELETE FROM alert_state WHERE fingerprint = ANY($1)`
	historySQL     = `INSERT INTO alert_history (project_id, fingerprint, rule, kind, severity, status, at, active_since,
		labels, summary, description, figures) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`
	// staleSQL finds rule and project pairs with live alerts, so those of removed rules (or of
	// projects a rule no longer covers) can be resolved.
	staleSQL = `SELECT DISTINCT rule, project_id FROM alert_state WHERE state <> 'resolved'`
)

// fingerprint identifies an alert: its rule, project and scope. It is stable across evaluations
// and restarts, so the notification log can recognise an alert it has sent.
func fingerprint(rule string, projectID int64, group map[string]string) string {
	h := sha256.New()
	h.Write([]byte(rule))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatInt(projectID, 10)))
	for _, k := range slices.Sorted(maps.Keys(group)) {
		h.Write([]byte{0})
		h.Write([]byte(k))
		h.Write([]byte{'='})
		h.Write([]byte(group[k]))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// alertLabels builds an alert's label set: the rule's own labels, then alertname, project, kind,
// severity and the scope.
func alertLabels(r *Rule, project string, group map[string]string) map[string]string {
	l := maps.Clone(r.Labels)
	if l == nil {
		l = map[string]string{}
	}
	maps.Copy(l, group)
	l["alertname"] = r.Name
	l["project"] = project
	l["kind"] = string(r.Kind)
	l["severity"] = r.Severity
	return l
}

// transition is the state stage: it folds one evaluation of a rule for a project into
// alert_state, in one transaction. A scope in breach becomes pending (or firing at once when the
// rule has no `for`), a pending one fires once `for` has passed, and a firing one no longer in
// breach resolves; a pending one that clears is forgotten. Firing and resolving are written to
// alert_history. A nil rule resolves everything the pair has (the rule was removed).
func transition(ctx context.Context, pool *pgxpool.Pool, ruleName string, r *Rule, project store.Project,
	samples []sample, now time.Time) (fired, resolved int, err error) {
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		fired, resolved = 0, 0
		rows, err := tx.Query(ctx, stateForRuleSQL, ruleName, project.ID)
		if err != nil {
			return err
		}
		existing, err := pgx.CollectRows(rows, scanState)
		if err != nil {
			return err
		}
		byFP := map[string]alertRow{}
		for _, a := range existing {
			byFP[a.Fingerprint] = a
		}
		seen := map[string]bool{}
		for _, s := range samples {
			fp := fingerprint(ruleName, project.ID, s.group)
			seen[fp] = true
			a, ok := byFP[fp]
			if !ok || a.State == stateResolved {
				a = alertRow{Fingerprint: fp, ActiveSince: now, State: statePending}
			}
			a.Rule, a.Kind, a.Severity, a.ProjectID = ruleName, string(r.Kind), r.Severity, project.ID
			a.Labels = alertLabels(r, project.Name, s.group)
			a.Summary, a.Description, a.Figures = s.summary, s.description, s.figures
			a.EvaluatedAt, a.ResolvedAt = now, nil
			if a.State == statePending && now.Sub(a.ActiveSince) >= r.For {
				a.State = stateFiring
				a.FiredAt = &now
				fired++
				if err := recordHistory(ctx, tx, a, stateFiring, now); err != nil {
					return err
				}
			}
			if err := upsertState(ctx, tx, a); err != nil {
				return err
			}
		}
		var forget []string
		for _, a := range existing {
			if seen[a.Fingerprint] {
				continue
			}
			switch a.State {
			case statePending:
				forget = append(forget, a.Fingerprint)
			case stateFiring:
				a.State, a.ResolvedAt, a.EvaluatedAt = stateResolved, &now, now
				resolved++
				if err := recordHistory(ctx, tx, a, stateResolved, now); err != nil {
					return err
				}
				if err := upsertState(ctx, tx, a); err != nil {
					return err
				}
			}
		}
		if len(forget) > 0 {
			if _, err := tx.Exec(ctx, deleteStateSQL, forget); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("record state of rule %s: %w", ruleName, err)
	}
	return fired, resolved, nil
}

func upsertState(ctx context.Context, tx pgx.Tx, a alertRow) error {
	_, err := tx.Exec(ctx, upsertStateSQL, a.Fingerprint, a.Rule, a.Kind, a.Severity, a.ProjectID, a.State, a.Labels,
		a.Summary, a.Description, a.Figures, a.ActiveSince, a.FiredAt, a.ResolvedAt, a.EvaluatedAt, a.LastNotifiedAt)
	return err
}

func recordHistory(ctx context.Context, tx pgx.Tx, a alertRow, status string, at time.Time) error {
	_, err := tx.Exec(ctx, historySQL, a.ProjectID, a.Fingerprint, a.Rule, a.Kind, a.Severity, status, at,
		a.ActiveSince, a.Labels, a.Summary, a.Description, a.Figures)
	return err
}

// GeneratorURL is the dashboard's page of the alert with this fingerprint, under ledgerd's public
// address: the Alerts page, scrolled to the alert's row (the page's login sends a person who is not
// signed in there after signing in). The API's /v1/alerts would answer a browser 401.
func GeneratorURL(publicURL, fingerprint string) string {
	return strings.TrimRight(publicURL, "/") + "/alerts#alert-" + fingerprint
}

// payload turns a state row into the notification receivers get.
func payload(a alertRow, status notify.Status, externalURL string) notify.Alert {
	n := notify.Alert{Version: "1", Status: status, Fingerprint: a.Fingerprint, Rule: a.Rule, Kind: a.Kind,
		Severity: a.Severity, Project: a.Project, Labels: a.Labels, Summary: a.Summary,
		Description: a.Description, Figures: a.Figures, StartsAt: a.ActiveSince}
	if status == notify.StatusResolved && a.ResolvedAt != nil {
		n.EndsAt = *a.ResolvedAt
	}
	if externalURL != "" {
		n.GeneratorURL = GeneratorURL(externalURL, a.Fingerprint)
	}
	return n
}
