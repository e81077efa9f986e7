package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/ledgerd/ledgerd/internal/retryafter"
)

// NewClient returns the HTTP client receivers share: it never follows redirects (a redirect could
// carry a secret URL elsewhere, and is answered as a failure) and bounds each request by timeout.
// It has its own transport: on http.DefaultTransport, anything else in the process that closes
// idle connections (httptest.Server.Close does) can break a delivery that is just dialing.
func NewClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// post sends body to target as JSON. Errors never contain target or token: a network error keeps
// only its cause and the redacted URL; a non-2xx answer is a *StatusError.
func post(ctx context.Context, client *http.Client, target, token string, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		// The URL was checked when the configuration was read, so only a file-held URL can land
		// here; url.Parse errors quote the URL, so say nothing of it.
		return false, errors.New("build request: invalid receiver URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ledgerd-alerts/1")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return false, fmt.Errorf("post to %s: %w", RedactURL(target), ctx.Err())
		}
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return true, scrub(fmt.Errorf("post to %s: %w", RedactURL(target), err), target, token)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return false, nil
	}
	se := &StatusError{Code: resp.StatusCode, RetryAfter: retryAfterOrZero(resp.Header)}
	return Retryable(resp.StatusCode), fmt.Errorf("post to %s: %w", RedactURL(target), se)
}

// retryAfterOrZero is the wait a response asks for, 0 when it names none (backoff then decides).
func retryAfterOrZero(h http.Header) time.Duration {
	d, _ := retryafter.Parse(h, time.Now())
	return d
}
