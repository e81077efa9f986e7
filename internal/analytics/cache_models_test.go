package analytics_test

import (
	"context"
	"strings"
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
	exec := func(sql string) { t.Helper(); l.exec(sql, p) }
	// noteDay writes the 5th's row of cache_days_dirty again (an hour that never makes its summary
	// stale), and nothing of the main rollups.
	const noteDay = `WITH n AS (INSERT INTO cache_days_dirty AS x (project_id, bucket, hour) VALUES ($1, '2026-10-05', 'infinity')
		ON CONFLICT (project_id, bucket) DO UPDATE SET hour = x.hour) `
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
		// Each with the day's row of cache_days_dirty written, as a fold adding cache hours writes
		// it: the kept answer (TestCacheAnswerKept) is worked out again, and only the models'
		// kept day hides the change.
		{"rollup_daily changed behind its back", func() {
			exec(noteDay + `UPDATE rollup_daily SET attempts = attempts + 100 WHERE project_id = $1 AND bucket = '2026-10-05'`)
		}, figures{7, 3, 3}, figures{107, 3, 3}},
		{"and changed back", func() {
			exec(noteDay + `UPDATE rollup_daily SET attempts = attempts - 100 WHERE project_id = $1 AND bucket = '2026-10-05'`)
		}, figures{7, 3, 3}, figures{7, 3, 3}},
		{"a late read on the 5th", func() { l.add(p, botCall(5, 12, 0).cache(0, 1000).done()) },
			figures{8, 3, 4}, figures{8, 3, 4}},
		{"a write of the 6th gone from the raw attempts, then a rebuild", func() {
			exec(`DELETE FROM attempts WHERE project_id = $1 AND started_at = '2026-10-06 02:01:00+00'`)
			l.rebuild()
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

// TestCacheModelsKeptToday checks that a Service keeps today's rows of rollup_daily the cache
// report's models read, and reads again only the rows written since: after each change, the same
// Service answers as a new one does, having to read again only the shapes the change wrote, and
// the whole day after a rebuild, which may delete rows.
func TestCacheModelsKeptToday(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	call := func(d, h, m int, model string) *rec {
		return newRec(oct(d, h, m), model).service("bot", "answer").tokens(200, 100)
	}
	l.add(p, call(6, 10, 0, "sonnet").cache(1000, 0).done(), call(6, 10, 1, "sonnet").cache(0, 1000).done(),
		call(8, 9, 0, "sonnet").cache(1000, 0).done(), call(8, 9, 1, "sonnet").cache(0, 1000).done(),
		call(8, 9, 2, "gpt-4o").cache(1000, 0).done(), call(8, 9, 3, "gpt-4o").fail("overloaded").done())
	now := oct(8, 12, 0)
	f := analytics.Filter{ProjectID: p}
	exec := func(sql string) { t.Helper(); l.exec(sql, p) }
	s := l.service(now)
	_ = cacheJSON(t, s, f)

	steps := []struct {
		name   string
		change func()
		// changed is the shapes of today the next read reads again.
		changed int
	}{
		{"nothing", func() {}, 0},
		{"a read of sonnet today", func() { l.add(p, call(8, 11, 0, "sonnet").cache(0, 1000).done()) }, 1},
		// As a fold writes a day's rows: with the day's row of rollup_days.
		{"gpt-4o's row of today rewritten", func() {
			exec(`WITH d AS (UPDATE rollup_days SET writes = writes + 1 WHERE project_id = $1 AND bucket = '2026-10-08')
				UPDATE rollup_daily SET attempts = attempts + 10 WHERE project_id = $1 AND bucket = '2026-10-08' AND status = 'ok'
				AND series_id IN (SELECT id FROM series WHERE project_id = $1 AND model = 'gpt-4o')`)
		}, 1},
		{"a call on the 6th", func() { l.add(p, call(6, 11, 0, "sonnet").cache(1000, 0).done()) }, 0},
		{"calls of two models today", func() {
			l.add(p, call(8, 11, 1, "gpt-4o").cache(0, 1000).done(), call(8, 11, 2, "haiku").cache(1000, 0).done())
		}, 2},
		{"a rebuild", l.rebuild, 3},
		{"gpt-4o's calls of today gone from the raw attempts, then a rebuild", func() {
			exec(`DELETE FROM attempts a USING series s WHERE a.project_id = $1 AND s.project_id = $1 AND s.id = a.series_id
				AND s.model = 'gpt-4o' AND a.started_at >= '2026-10-08'`)
			l.rebuild()
		}, 2},
	}
	for _, st := range steps {
		st.change()
		n, err := s.CacheModelsTodayChanged(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if n != st.changed {
			t.Errorf("%s: %d shapes to read again, want %d", st.name, n, st.changed)
		}
		if same, fresh := cacheJSON(t, s, f), cacheJSON(t, l.service(now), f); same != fresh {
			t.Errorf("%s: the same Service's answer\n%s\na new one's\n%s", st.name, same, fresh)
		}
	}
	if got := cacheJSON(t, s, f); !strings.Contains(got, `"model":"haiku"`) || strings.Contains(got, `"model":"gpt-4o"`) {
		t.Errorf("at the end: want haiku's row and none of gpt-4o, got %s", got)
	}
}

// TestCacheAnswerKept checks that a Service keeps a cache report's answer while none of the rows of
// its days that say whether its rows changed is written again: a change to the cache rollup behind
// their back goes unseen by it (and is seen by a new Service), where a call, a summing of the days
// and a rebuild write them, and the same Service answers as a new one.
func TestCacheAnswerKept(t *testing.T) {
	t.Parallel()
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	l.add(p, botCall(6, 10, 0).cache(1000, 0).done(), botCall(6, 10, 1).cache(0, 1000).done(),
		botCall(8, 9, 0).cache(1000, 0).done(), botCall(8, 9, 1).cache(0, 1000).done())
	now := oct(8, 12, 0)
	f := analytics.Filter{ProjectID: p}
	s := l.service(now)
	_ = cacheJSON(t, s, f)
	steps := []struct {
		name   string
		change func()
		// behind tells a change the Service cannot see, so its answer differs from a new one's.
		behind bool
	}{
		{"nothing", func() {}, false},
		{"the cache hours of today changed behind its back", func() {
			l.exec(`UPDATE rollup_cache_hourly SET calls = calls + 20 WHERE project_id = $1 AND bucket = '2026-10-08 09:00+00'
				AND prompt_hash = 'sys-v1'`, p)
		}, true},
		// A fold may add cache rows in a transaction that writes no row of rollup_days (its
		// chunks of each pending table are apart); it notes their day in cache_days_dirty.
		{"and their day noted, as a fold of cache rows alone notes it", func() {
			l.exec(`INSERT INTO cache_days_dirty AS x (project_id, bucket, hour) VALUES ($1, '2026-10-08', '2026-10-08 09:00+00')
				ON CONFLICT (project_id, bucket) DO UPDATE SET hour = least(x.hour, excluded.hour)`, p)
		}, false},
		{"a call today", func() { l.add(p, botCall(8, 11, 0).cache(0, 1000).done()) }, false},
		// Counted on the model's row (from the main rollups), not in the cache rollup.
		{"a call today that used no cache", func() {
			l.add(p, newRec(oct(8, 11, 1), "sonnet").service("bot", "answer").tokens(200, 100).done())
		}, false},
		{"the days summed", func() { summarizeCacheDaysAt(t, l.st.Pool, now) }, false},
		{"a call on the 6th, a day summed", func() { l.add(p, botCall(6, 11, 0).cache(1000, 0).done()) }, false},
		{"a rebuild", l.rebuild, false},
	}
	for _, st := range steps {
		st.change()
		if same, fresh := cacheJSON(t, s, f), cacheJSON(t, l.service(now), f); (same == fresh) == st.behind {
			t.Errorf("%s: the same Service's answer\n%s\na new one's\n%s", st.name, same, fresh)
		}
	}
}
