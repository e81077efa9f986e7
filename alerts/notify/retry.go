package notify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ledgerd/ledgerd/internal/backoff"
)

// Retrier retries a Notifier's retryable failures with exponential backoff and full jitter
// (backoff.Exponential), waiting exactly as long as a Retry-After asks. It stops after MaxAttempts
// tries or once the next wait would pass MaxElapsed, whichever comes first.
type Retrier struct {
	// MaxAttempts bounds the tries (5).
	MaxAttempts int
	// MaxElapsed bounds the time spent, waits included (1 minute).
	MaxElapsed time.Duration
	// MinBackoff is the first wait's upper bound (500 ms); it doubles each try up to MaxBackoff.
	MinBackoff time.Duration
	// MaxBackoff caps a wait the backoff picks (30 s); a Retry-After may ask for longer.
	MaxBackoff time.Duration
	// Sleep waits d or until ctx ends (backoff.Sleep); tests record the waits instead.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a number in [0, 1) (math/rand/v2's by default); tests fix it.
	Jitter func() float64
}

// Result says how a delivery ended.
type Result struct {
	// Attempts is the number of tries made.
	Attempts int
	// Retryable is true when the last failure could succeed later; false for a 4xx.
	Retryable bool
	// Waits are the pauses taken between tries, in order.
	Waits []time.Duration
}

func (r Retrier) withDefaults() Retrier {
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = 5
	}
	if r.MaxElapsed <= 0 {
		r.MaxElapsed = time.Minute
	}
	if r.MinBackoff <= 0 {
		r.MinBackoff = 500 * time.Millisecond
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = 30 * time.Second
	}
	if r.Sleep == nil {
		r.Sleep = backoff.Sleep
	}
	return r
}

// Do sends alerts through n until it succeeds, fails for good, or the budget is spent. The error
// is the last failure's.
func (r Retrier) Do(ctx context.Context, n Notifier, alerts ...Alert) (Result, error) {
	r = r.withDefaults()
	var res Result
	var spent time.Duration
	start := time.Now()
	for {
		res.Attempts++
		retry, err := n.Notify(ctx, alerts...)
		if err == nil {
			return res, nil
		}
		res.Retryable = retry
		if !retry || ctx.Err() != nil {
			return res, err
		}
		if res.Attempts >= r.MaxAttempts {
			return res, fmt.Errorf("gave up after %d attempts: %w", res.Attempts, err)
		}
		wait := backoff.Exponential{Min: r.MinBackoff, Max: r.MaxBackoff, Rand: r.Jitter}.Wait(res.Attempts)
		var se *StatusError
		if errors.As(err, &se) && se.RetryAfter > 0 {
			wait = se.RetryAfter
		}
		// The budget counts both real time and the waits asked for, so a recorded Sleep in tests
		// and a real one end the same way.
		spent = max(spent, time.Since(start))
		if spent+wait > r.MaxElapsed {
			return res, fmt.Errorf("gave up after %d attempts (next wait %s passes the %s budget): %w",
				res.Attempts, wait, r.MaxElapsed, err)
		}
		if serr := r.Sleep(ctx, wait); serr != nil {
			return res, fmt.Errorf("%w (retry cancelled)", err)
		}
		spent += wait
		res.Waits = append(res.Waits, wait)
	}
}
