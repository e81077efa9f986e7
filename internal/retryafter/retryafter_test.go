package retryafter

import (
	"net/http"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name   string
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{"seconds", map[string]string{"Retry-After": "30"}, 30 * time.Second, true},                                    // the usual form
		{"fraction", map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond, true},                            // fractional seconds
		{"ms preferred", map[string]string{"Retry-After-Ms": "250", "Retry-After": "1"}, 250 * time.Millisecond, true}, // OpenAI
		{"date", map[string]string{"Retry-After": "Sun, 01 Mar 2026 12:00:10 GMT"}, 10 * time.Second, true},            // HTTP date
		{"past date", map[string]string{"Retry-After": "Sun, 01 Mar 2026 11:00:00 GMT"}, 0, true},                      // already passed: no wait
		{"huge", map[string]string{"Retry-After": "1e300"}, Max, true},                                                 // capped at a day
		{"huge integer", map[string]string{"Retry-After": "99999999999"}, Max, true},                                   // capped, no overflow
		{"huge ms", map[string]string{"Retry-After-Ms": "1e300"}, Max, true},                                           // capped at a day
		{"negative", map[string]string{"Retry-After": "-5"}, 0, false},                                                 // nonsense
		{"garbage", map[string]string{"Retry-After": "soon"}, 0, false},                                                // unreadable
		{"none", nil, 0, false}, // absent: the caller's backoff decides
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, v := range tc.header {
				h.Set(k, v)
			}
			got, ok := Parse(h, now)
			if got != tc.want || ok != tc.ok {
				t.Errorf("got %v %v, want %v %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
