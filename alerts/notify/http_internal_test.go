package notify

import (
	"testing"
	"time"
)

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
