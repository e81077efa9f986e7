package alerts_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/schema"
)

// BenchmarkEvaluate times one evaluation of a retry rule and a cache rule over a day of traffic
// (60,000 calls, 80,000 attempts, in 40 series), for a 1-hour and a 24-hour window. Whole hours come from the
// rollups and at most two hours from raw attempts, so the 24-hour window should cost about the
// same as the 1-hour one, not 24 times as much: compare the two ns/op.
//
//	go test -run '^$' -bench Evaluate -benchtime 20x ./alerts/
func BenchmarkEvaluate(b *testing.B) {
	l := newLedger(b, time.UTC)
	now := time.Date(2026, 10, 14, 10, 30, 0, 0, time.UTC)
	var batch []call
	for i := range 60_000 {
		at := now.Add(-time.Duration(i) * 1440 * time.Millisecond) // a day, evenly
		c := call{at: at, attempts: 1 + i%3/2, input: 100, cacheWrite: int64(i%2) * 1000,
			service: fmt.Sprint("svc", i%8), model: fmt.Sprint("model", i%5), promptHash: fmt.Sprint("h", i%50),
			class: schema.ErrorOverloaded}
		batch = append(batch, c)
		if len(batch) == 2000 {
			l.add(b, l.project, batch...)
			batch = batch[:0]
		}
	}
	for _, window := range []string{"1h", "24h"} {
		b.Run("window="+window, func(b *testing.B) {
			ev := l.evaluator(b, "alerts:\n  interval: 1h\n  rules:\n"+
				"    - {name: retry, kind: attempts_per_call, window: "+window+"}\n"+
				"    - {name: cache, kind: cache_broken, window: "+window+"}\n", newClock(now))
			ctx := context.Background()
			for b.Loop() {
				if _, err := ev.Evaluate(ctx); err != nil {
					b.Fatal(err)
				}
			}
			ev.Stop(ctx)
		})
	}
}
