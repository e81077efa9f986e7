package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"
)

// Alertmanager posts alerts to a Prometheus Alertmanager's API (POST /api/v2/alerts), all in one
// request. Alertmanager forgets an alert whose endsAt has passed, so a firing alert carries an
// endsAt of now + Expire and ledgerd re-sends it well before that; a resolved one carries the time
// it cleared.
type Alertmanager struct {
	url    Secret
	token  Secret
	expire time.Duration
	now    func() time.Time
	client *http.Client
}

// NewAlertmanager returns the Alertmanager integration. base is the Alertmanager's URL (a path
// prefix is kept); expire is how long a firing alert stays active in Alertmanager without a
// re-send.
func NewAlertmanager(base, token Secret, expire time.Duration, now func() time.Time, client *http.Client) *Alertmanager {
	return &Alertmanager{url: base, token: token, expire: expire, now: now, client: client}
}

// amAlert is one element of Alertmanager's postable alerts.
type amAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// AlertmanagerPayload builds the body of POST /api/v2/alerts: labels without empty values (which
// Alertmanager treats as absent), summary, description and figures as annotations.
func AlertmanagerPayload(alerts []Alert, now time.Time, expire time.Duration) []byte {
	out := make([]amAlert, 0, len(alerts))
	for _, a := range alerts {
		labels := map[string]string{}
		for k, v := range a.Labels {
			if v != "" {
				labels[k] = v
			}
		}
		ann := maps.Clone(a.Figures)
		if ann == nil {
			ann = map[string]string{}
		}
		ann["summary"] = a.Summary
		ann["description"] = a.Description
		ends := a.EndsAt
		if a.Status == StatusFiring || ends.IsZero() {
			ends = now.Add(expire)
		}
		out = append(out, amAlert{Labels: labels, Annotations: ann, StartsAt: a.StartsAt.UTC(),
			EndsAt: ends.UTC(), GeneratorURL: a.GeneratorURL})
	}
	b, _ := json.Marshal(out) // maps of strings and times always encode
	return b
}

// Notify posts all alerts in one request.
func (m *Alertmanager) Notify(ctx context.Context, alerts ...Alert) (bool, error) {
	if len(alerts) == 0 {
		return false, errNoAlerts
	}
	base, err := m.url.Get()
	if err != nil {
		return false, fmt.Errorf("alertmanager url: %w", err)
	}
	token, err := m.token.Get()
	if err != nil {
		return false, fmt.Errorf("alertmanager token: %w", err)
	}
	target := strings.TrimRight(base, "/") + "/api/v2/alerts"
	retry, err := post(ctx, m.client, target, token, AlertmanagerPayload(alerts, m.now(), m.expire))
	return retry, scrub(err, base)
}
