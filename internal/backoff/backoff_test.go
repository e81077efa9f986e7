package backoff

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestWait(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	cases := []struct {
		name  string
		rand  float64
		retry int
		want  time.Duration
	}{
		// The first retry's ceiling is Min; a draw of 0 takes the ceiling itself.
		{"first retry", 0, 1, 100 * ms},
		// The ceiling doubles with each retry.
		{"doubles", 0, 3, 400 * ms},
		// ...up to Max, and stays there.
		{"capped", 0, 5, time.Second},
		{"stays capped", 0, 60, time.Second},
		// Full jitter: a draw of 0.5 waits half the ceiling.
		{"half", 0.5, 2, 100 * ms},
		// A draw just under 1 waits almost nothing, never a negative wait.
		{"almost nothing", 0.999, 1, 100 * ms / 1000},
	}
	for _, c := range cases {
		e := Exponential{Min: 100 * ms, Max: time.Second, Rand: func() float64 { return c.rand }}
		if got := e.Wait(c.retry); got != c.want {
			t.Errorf("%s: Wait(%d) = %v, want %v", c.name, c.retry, got, c.want)
		}
	}
}

// TestWaitRandom checks that the default random source keeps every wait within [0, ceiling].
func TestWaitRandom(t *testing.T) {
	t.Parallel()
	e := Exponential{Min: 10 * time.Millisecond, Max: 80 * time.Millisecond}
	for retry := 1; retry <= 6; retry++ {
		ceiling := min(10*time.Millisecond<<(retry-1), 80*time.Millisecond)
		for range 200 {
			if d := e.Wait(retry); d < 0 || d > ceiling {
				t.Fatalf("Wait(%d) = %v, want within [0, %v]", retry, d, ceiling)
			}
		}
	}
}

func TestSleep(t *testing.T) {
	t.Parallel()
	// A wait that runs out returns nil.
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	// No wait on a context already done returns its error.
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if err := Sleep(done, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep(done, 0): %v, want context.Canceled", err)
	}
	// A context that ends cuts the wait short with its error.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Sleep past the deadline: %v, want context.DeadlineExceeded", err)
	}
	if waited := time.Since(start); waited > time.Minute {
		t.Fatalf("Sleep waited %v past its context", waited)
	}
}
