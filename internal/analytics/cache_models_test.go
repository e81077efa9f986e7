package analytics_test

import (
	"context"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/analytics"
)

// TestCacheModelsKept checks that a Service reads a day of the cache report's model sums once and
// keeps it while its row of rollup_days is not written again: a change to rollup_daily behind
// its back goes unseen by it (and is seen by a new Service), where a late record, a rebuild and
// (in the reprice's tests) a reprice write the row again, and the same Service sees them.
func TestCacheModelsKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	// Two days of the bot's calls on sonnet: on the 5th one write, three reads and a call that
	// used no cache; on the 6th two writes.
	l.add(p, botCall(5, 10, 0).cache(1000, 0).done(), botCall(5, 10, 1).cache(0, 1000).done(),
		botCall(5, 10, 2).cache(0, 1000).done(), botCall(5, 10, 3).cache(0, 1000).done(),
		newRec(oct(5, 11, 0), "sonnet").service("bot", "answer").tokens(200, 100).done(),
		botCall(6, 2, 0).cache(1000, 0).done(), botCall(6, 2, 1).cache(1000, 0).done())
	now := oct(8, 0, 0)
	f := analytics.Filter{ProjectID: p, From: oct(4, 0, 0), To: now}
	type figures struct{ calls, writes, reads int64 }
	model := func(s *analytics.Service) figures {
		t.Helper()
		rows, err := s.Cache(ctx, f, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.PromptHash == nil && r.Model == "sonnet" {
				return figures{r.Calls, r.CacheWriteCalls, r.CacheReadCalls}
			}
		}
		t.Fatalf("no model row for sonnet in %s", js(rows))
		return figures{}
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := l.st.Pool.Exec(ctx, sql, p); err != nil {
			t.Fatal(err)
		}
	}
	s := l.service(now)
	if got, want := model(s), (figures{7, 3, 3}); got != want {
		t.Fatalf("at first: %+v, want %+v", got, want)
	}

	steps := []struct {
		name   string
		change func()
		// want is what the Service that read before the change answers after it, fresh what a new
		// one does.
		want, fresh figures
	}{
		{"rollup_daily changed behind its back", func() {
			exec(`UPDATE rollup_daily SET attempts = attempts + 100 WHERE project_id = $1 AND bucket = '2026-10-05'`)
		}, figures{7, 3, 3}, figures{107, 3, 3}},
		{"and changed back", func() {
			exec(`UPDATE rollup_daily SET attempts = attempts - 100 WHERE project_id = $1 AND bucket = '2026-10-05'`)
		}, figures{7, 3, 3}, figures{7, 3, 3}},
		{"a late read on the 5th", func() { l.add(p, botCall(5, 12, 0).cache(0, 1000).done()) },
			figures{8, 3, 4}, figures{8, 3, 4}},
		{"a write of the 6th gone from the raw attempts, then a rebuild", func() {
			exec(`DELETE FROM attempts WHERE project_id = $1 AND started_at = '2026-10-06 02:01:00+00'`)
			if _, err := analytics.Rebuild(ctx, l.st.Pool, time.UTC); err != nil {
				t.Fatal(err)
			}
		}, figures{7, 2, 4}, figures{7, 2, 4}},
	}
	for _, st := range steps {
		st.change()
		if got := model(s); got != st.want {
			t.Errorf("%s: the same Service answers %+v, want %+v", st.name, got, st.want)
		}
		if got := model(l.service(now)); got != st.fresh {
			t.Errorf("%s: a new Service answers %+v, want %+v", st.name, got, st.fresh)
		}
	}
	// A call on a day that had none, which no row of rollup_days named before.
	l.add(p, newRec(oct(7, 9, 0), "sonnet").service("bot", "answer").tokens(200, 100).done())
	if got, want := model(s), (figures{8, 2, 4}); got != want {
		t.Errorf("a call on the 7th: %+v, want %+v", got, want)
	}
}
