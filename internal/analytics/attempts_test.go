package analytics_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/schema"
)

// TestCallsByAttempts checks the distribution of logical calls by their number of attempts per
// group, and the sign of retry layers that multiply: 10 calls of 2 attempts, 8 of 3, 1 of 4 and
// one of 12 (4 gateway attempts over an SDK that tries 3 times) on chat; 3 single calls on batch.
func TestCallsByAttempts(t *testing.T) {
	t.Parallel()
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	at := day(2026, 10, 5, 10, time.UTC)
	var recs []schema.Attempt
	n := 0
	call := func(svc string, attempts int) {
		n++
		id := fmt.Sprintf("call-%d", n)
		for no := 1; no <= attempts; no++ {
			r := newRec(at.Add(time.Duration(no)*time.Second), "sonnet").service(svc, "answer").request(id, no)
			if no < attempts {
				r = r.fail(schema.ErrorOverloaded)
			}
			recs = append(recs, r.done())
		}
	}
	for _, c := range []struct{ calls, attempts int }{{10, 2}, {8, 3}, {1, 4}, {1, 12}} {
		for range c.calls {
			call("chat", c.attempts)
		}
	}
	for range 3 {
		call("batch", 1)
	}
	l.add(p, recs...)
	s := l.service(day(2026, 10, 6, 0, time.UTC))
	f := analytics.Filter{ProjectID: p, From: day(2026, 10, 5, 0, time.UTC), To: day(2026, 10, 6, 0, time.UTC), WithAttempts: true}
	got, err := s.Summary(context.Background(), f, analytics.ByService)
	if err != nil {
		t.Fatal(err)
	}
	chat := []analytics.AttemptCount{{2, 10}, {3, 8}, {4, 1}, {12, 1}}
	want := map[string]struct {
		counts []analytics.AttemptCount
		most   int
	}{"batch": {[]analytics.AttemptCount{{1, 3}}, 1}, "chat": {chat, 12}}
	for _, g := range got.Groups {
		w := want[*g.Key.Service]
		if !reflect.DeepEqual(g.CallsByAttempts, w.counts) || g.MaxAttempts != w.most {
			t.Errorf("%s: %v max %d, want %v max %d", *g.Key.Service, g.CallsByAttempts, g.MaxAttempts, w.counts, w.most)
		}
	}
	total := append([]analytics.AttemptCount{{1, 3}}, chat...)
	if !reflect.DeepEqual(got.Total.CallsByAttempts, total) || got.Total.MaxAttempts != 12 {
		t.Errorf("total: %v max %d, want %v max 12", got.Total.CallsByAttempts, got.Total.MaxAttempts, total)
	}
	// 18 of the 20 retried calls end within 3 attempts; 12 is four times that.
	if b := analytics.RetryBudget(chat); b != 3 {
		t.Errorf("retry budget %d, want 3", b)
	}
	if !analytics.Multiplied(chat, 12) || analytics.Multiplied(chat[:3], 4) {
		t.Error("Multiplied must hold at 12 attempts against a budget of 3, and not at 4")
	}
	// Not asked: no distribution, as before.
	f.WithAttempts = false
	if got, err = s.Summary(context.Background(), f); err != nil || got.Total.CallsByAttempts != nil {
		t.Errorf("unasked: %v, %v", got.Total.CallsByAttempts, err)
	}
}
