// Package backoff is ledgerd's one retry wait: exponential backoff with full jitter, and a sleep
// that ends with its context. The alert notifier (alerts/notify), the Go client (client), the
// ingest writer (ingest) and the load generator (internal/load) retry through it. Each keeps its own loop, because what is retryable, how
// many tries are allowed and what a Retry-After means differ between them.
//
// github.com/cenkalti/backoff/v5 was the other choice; its Retry takes neither a clock nor a
// random source, so tests of a 29 s Retry-After would have to wait 29 s, and a jittered wait could
// not be checked exactly.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Exponential picks the wait before each retry. Retry n (from 1) has a ceiling of Min·2^(n-1),
// capped at Max, and waits a uniform pick in (0, ceiling]: "full jitter", so that clients that
// failed together do not retry together.
type Exponential struct {
	Min, Max time.Duration
	// Rand returns a number in [0, 1); nil is math/rand/v2's Float64. Tests fix it.
	Rand func() float64
}

// Wait returns the wait before retry number retry (1 for the first retry).
func (e Exponential) Wait(retry int) time.Duration {
	ceiling := e.Min
	for i := 1; i < retry && ceiling < e.Max; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, e.Max)
	random := e.Rand
	if random == nil {
		random = rand.Float64
	}
	return time.Duration((1 - random()) * float64(ceiling))
}

// Sleep waits d, or until ctx is done and then returns ctx's error. With d of zero or less it
// returns ctx's error at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
