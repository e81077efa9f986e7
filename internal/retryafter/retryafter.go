// Package retryafter reads how long an HTTP answer asks its client to wait before trying again. The
// Go client, the alert senders and the load generator all honour the same header forms through it.
package retryafter

import (
	"math"
	"net/http"
	"strconv"
	"time"
)

// Max caps a wait: a day, far beyond any retry budget and the ledger's limit on retry_after_ms.
const Max = 24 * time.Hour

// Parse reads Retry-After-Ms (OpenAI) or Retry-After in seconds (fractions allowed) or as an HTTP
// date, capped at Max; a date in the past is no wait. It returns false when neither header is
// present and valid.
func Parse(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			if ms >= float64(Max/time.Millisecond) {
				return Max, true
			}
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 || math.IsNaN(s) {
			return 0, false
		}
		if s >= Max.Seconds() {
			return Max, true
		}
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(t.Sub(now), 0), Max), true
	}
	return 0, false
}
