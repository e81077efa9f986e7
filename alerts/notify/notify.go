// Package notify delivers ledgerd alerts to receivers: a generic webhook, a Slack incoming webhook
// and a Prometheus Alertmanager. Each integration says whether a failure is worth retrying; Retrier
// retries those with exponential backoff and jitter, honouring Retry-After. Receiver URLs and tokens
// are secrets: they never appear in an error message.
package notify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"
)

// Status is what a notification says about an alert.
type Status string

// The statuses a notification can carry.
const (
	StatusFiring   Status = "firing"
	StatusResolved Status = "resolved"
)

// Alert is one notification about one alert; the generic webhook posts it as JSON, as documented
// in docs/alerts.md.
type Alert struct {
	// Version is the payload version ("1").
	Version string `json:"version"`
	// Status is firing or resolved.
	Status Status `json:"status"`
	// Fingerprint identifies the alert (rule, project and scope) across notifications.
	Fingerprint string `json:"fingerprint"`
	Rule        string `json:"rule"`
	Kind        string `json:"kind"`
	Severity    string `json:"severity"`
	Project     string `json:"project"`
	// Labels hold alertname, project, kind, severity, the scope (service, model...) and the
	// rule's own labels.
	Labels      map[string]string `json:"labels"`
	Summary     string            `json:"summary"`
	Description string            `json:"description"`
	// Figures are the numbers behind the alert, as decimal strings (money in dollars).
	Figures map[string]string `json:"figures"`
	// StartsAt is when the condition was first seen; EndsAt is when it cleared (resolved only).
	StartsAt     time.Time `json:"startsAt"`
	EndsAt       time.Time `json:"endsAt,omitzero"`
	GeneratorURL string    `json:"generatorURL,omitempty"`
}

// Notifier sends alerts to one receiver. retry tells whether a failed send may succeed if tried
// again (429, 5xx, network errors); a 4xx is never retried.
type Notifier interface {
	Notify(ctx context.Context, alerts ...Alert) (retry bool, err error)
}

// Secret is a receiver URL or token, given inline or as a file read at each send (so it can be
// rotated without a restart). It prints and marshals as "<secret>".
type Secret struct {
	value string
	file  string
}

// NewSecret returns a secret holding value.
func NewSecret(value string) Secret { return Secret{value: value} }

// SecretFile returns a secret read from path at each use.
func SecretFile(path string) Secret { return Secret{file: path} }

// File is the path a secret is read from, "" for an inline one.
func (s Secret) File() string { return s.file }

// IsZero reports whether the secret is unset.
func (s Secret) IsZero() bool { return s.value == "" && s.file == "" }

// String hides the value.
func (s Secret) String() string { return "<secret>" }

// GoString hides the value from %#v.
func (s Secret) GoString() string { return "<secret>" }

// MarshalJSON hides the value.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"<secret>"`), nil }

// maxSecretFile bounds a secret file, so a wrong path (a device, a log) cannot exhaust memory.
const maxSecretFile = 64 << 10

// Get returns the value, reading the file if the secret is one. The error names the file, never
// its content.
func (s Secret) Get() (string, error) {
	if s.file == "" {
		return s.value, nil
	}
	f, err := os.Open(s.file)
	if err != nil {
		return "", fmt.Errorf("read secret file: %w", err) // the os error names the file
	}
	defer f.Close()
	b := make([]byte, maxSecretFile+1)
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", fmt.Errorf("read secret file %s: %w", s.file, err)
	}
	if n > maxSecretFile {
		return "", fmt.Errorf("secret file %s is larger than %d bytes", s.file, maxSecretFile)
	}
	v := strings.TrimSpace(string(b[:n]))
	if v == "" {
		return "", fmt.Errorf("secret file %s is empty", s.file)
	}
	return v, nil
}

// RedactURL keeps only the scheme and host of a URL, so logs and errors can say where a request went
// without the path, query or credentials that make a webhook URL a secret.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "<redacted>"
	}
	if u.Path == "" && u.RawQuery == "" && u.User == nil {
		return u.Scheme + "://" + u.Host
	}
	return u.Scheme + "://" + u.Host + "/<redacted>"
}

// StatusError is a receiver's non-2xx answer. RetryAfter is the wait the receiver asked for (0
// when it named none).
type StatusError struct {
	Code       int
	RetryAfter time.Duration
}

// Error gives the status code; the URL is added by the caller, redacted.
func (e *StatusError) Error() string {
	return fmt.Sprintf("HTTP %d", e.Code)
}

// Retryable reports whether a receiver answering code may accept the same request later.
func Retryable(code int) bool {
	return code == 429 || code >= 500
}

// scrub replaces every secret value in err's text, keeping the error chain for errors.As.
func scrub(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, "<redacted>")
			changed = true
		}
	}
	if !changed {
		return err
	}
	return &scrubbed{msg: msg, err: err}
}

type scrubbed struct {
	msg string
	err error
}

// Error is the message with the secrets replaced.
func (s *scrubbed) Error() string { return s.msg }

// Unwrap exposes the chain for errors.As (a StatusError or a context error); its text is never
// printed by ledgerd.
func (s *scrubbed) Unwrap() error { return s.err }

// errNoAlerts is returned when Notify is called with nothing to send.
var errNoAlerts = errors.New("no alerts to send")
