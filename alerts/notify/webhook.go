package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Webhook posts each alert as one JSON object (type Alert) to a URL, with an optional bearer token.
type Webhook struct {
	url    Secret
	token  Secret
	client *http.Client
}

// NewWebhook returns the generic webhook integration.
func NewWebhook(url, token Secret, client *http.Client) *Webhook {
	return &Webhook{url: url, token: token, client: client}
}

// Notify posts the alerts one by one, stopping at the first failure.
func (w *Webhook) Notify(ctx context.Context, alerts ...Alert) (bool, error) {
	if len(alerts) == 0 {
		return false, errNoAlerts
	}
	target, err := w.url.Get()
	if err != nil {
		return false, fmt.Errorf("webhook url: %w", err)
	}
	token, err := w.token.Get()
	if err != nil {
		return false, fmt.Errorf("webhook token: %w", err)
	}
	for _, a := range alerts {
		body, err := json.Marshal(a)
		if err != nil {
			return false, fmt.Errorf("encode alert: %w", err)
		}
		if retry, err := post(ctx, w.client, target, token, body); err != nil {
			return retry, err
		}
	}
	return false, nil
}
