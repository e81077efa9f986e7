package notify

import (
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 10, 14, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name, header string
		want         time.Duration
	}{
		{"absent", "", 0},                 // no header: the backoff decides
		{"seconds", "7", 7 * time.Second}, // delay-seconds form
		{"http date", "Wed, 14 Oct 2026 10:00:30 GMT", 30 * time.Second}, // HTTP-date form
		{"date in the past", "Wed, 14 Oct 2026 09:00:00 GMT", 0},         // already passed: no wait
		{"negative", "-3", 0},                   // nonsense: ignored
		{"huge", "99999999999", 24 * time.Hour}, // capped, no overflow
		{"garbage", "soon", 0},                  // unreadable: ignored
	}
	for _, c := range cases {
		if got := retryAfter(c.header, now); got != c.want {
			t.Errorf("%s: retryAfter(%q) = %s, want %s", c.name, c.header, got, c.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	r := Retrier{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, Jitter: func() float64 { return 0 }}.withDefaults()
	var got []time.Duration
	for a := 1; a <= 6; a++ {
		got = append(got, r.backoff(a))
	}
	// Doubling from the minimum, capped at the maximum; jitter 0 takes the ceiling itself.
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("backoffs %v, want %v", got, want)
		}
	}
}
