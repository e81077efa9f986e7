package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Slack posts each alert to a Slack incoming webhook as readable text: status, rule, summary,
// description and figures.
type Slack struct {
	url    Secret
	client *http.Client
}

// NewSlack returns the Slack incoming-webhook integration.
func NewSlack(url Secret, client *http.Client) *Slack {
	return &Slack{url: url, client: client}
}

// Notify posts one message per alert, stopping at the first failure.
func (s *Slack) Notify(ctx context.Context, alerts ...Alert) (bool, error) {
	if len(alerts) == 0 {
		return false, errNoAlerts
	}
	target, err := s.url.Get()
	if err != nil {
		return false, fmt.Errorf("slack url: %w", err)
	}
	for _, a := range alerts {
		body, err := json.Marshal(map[string]string{"text": SlackText(a)})
		if err != nil {
			return false, fmt.Errorf("encode slack message: %w", err)
		}
		if retry, err := post(ctx, s.client, target, "", body); err != nil {
			return retry, err
		}
	}
	return false, nil
}

// slackEscape escapes the three characters Slack's mrkdwn reserves.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// SlackText renders an alert as Slack mrkdwn.
func SlackText(a Alert) string {
	var b strings.Builder
	if a.Status == StatusResolved {
		b.WriteString(":white_check_mark: *[RESOLVED] ")
	} else {
		b.WriteString(":rotating_light: *[FIRING] ")
	}
	fmt.Fprintf(&b, "%s* (%s, project %s)\n", slackEscape.Replace(a.Rule), slackEscape.Replace(a.Severity),
		slackEscape.Replace(a.Project))
	fmt.Fprintf(&b, "*%s*\n%s\n", slackEscape.Replace(a.Summary), slackEscape.Replace(a.Description))
	keys := make([]string, 0, len(a.Figures))
	for k := range a.Figures {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "• %s: `%s`\n", slackEscape.Replace(k), slackEscape.Replace(a.Figures[k]))
	}
	fmt.Fprintf(&b, "since %s", a.StartsAt.UTC().Format("2006-01-02 15:04 MST"))
	if !a.EndsAt.IsZero() {
		fmt.Fprintf(&b, ", resolved %s", a.EndsAt.UTC().Format("2006-01-02 15:04 MST"))
	}
	if a.GeneratorURL != "" {
		fmt.Fprintf(&b, " · <%s|ledgerd>", a.GeneratorURL)
	}
	return b.String()
}
