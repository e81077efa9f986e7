package load

import (
	"net/http"
	"testing"
	"time"
)

// TestRetryAfter checks how long a shed client waits: the server's Retry-After, bounded, with
// up to 20% jitter.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		header string
		want   time.Duration
	}{
		{"seconds", "2", 2 * time.Second},                                                // the usual form
		{"absent means a second", "", time.Second},                                       // shed answers without the header
		{"garbage means a second", "soon", time.Second},                                  // unreadable header
		{"zero waits a little", "0", 100 * time.Millisecond},                             // never spin
		{"capped at 30 s", "3600", 30 * time.Second},                                     // a misconfigured server cannot park clients
		{"HTTP date", now.Add(5 * time.Second).Format(http.TimeFormat), 5 * time.Second}, // RFC 9110 date form
	}
	for _, c := range cases {
		for range 20 {
			got := retryAfter(c.header, now)
			if got < c.want || got > c.want+c.want/5+1 {
				t.Errorf("%s: Retry-After %q waits %s, want %s plus up to 20%%", c.name, c.header, got, c.want)
				break
			}
		}
	}
}

// TestHistogram checks quantiles are within the 1% bucket width and the maximum is exact.
func TestHistogram(t *testing.T) {
	t.Parallel()
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.observe(time.Duration(i) * time.Millisecond)
	}
	l := h.summary()
	cases := []struct {
		name      string
		got, want time.Duration
	}{
		{"p50", l.P50, 500 * time.Millisecond},
		{"p95", l.P95, 950 * time.Millisecond},
		{"p99", l.P99, 990 * time.Millisecond},
		{"max", l.Max, 1000 * time.Millisecond},
	}
	for _, c := range cases {
		if c.got < c.want || c.got > c.want+c.want/100 {
			t.Errorf("%s = %s, want %s within 1%%", c.name, c.got, c.want)
		}
	}
	if l.Count != 1000 {
		t.Errorf("count %d, want 1000", l.Count)
	}
	var empty histogram
	if q := empty.quantile(0.99); q != 0 {
		t.Errorf("empty p99 = %s, want 0", q)
	}
}
