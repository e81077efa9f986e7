package analytics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/schema"
)

// incidentLedger is a ledger of 2026-10-05 (UTC) with known incidents, read at 10:46:
//   - sonnet (services chat and mail, a call every 10 seconds from 09:30) is down from 10:00 to
//     10:10: each call fails once (100,000 billed) and gpt-4o answers as its fallback, for the
//     call of 10:05:00 at its second try (the first, billed, fails too). At 10:10:00 one more call
//     fails with no answer; from 10:10:10 every call is answered.
//   - haiku (service bot, a call every 10 seconds from 10:30) storms from 10:40: each call fails
//     twice (10,000 billed each) and is answered on its third attempt; still going at 10:46.
//   - opus's cache (service cachebot) works at 06:00 (1 write, 4 reads), breaks at 07:00 (10
//     writes), works at 08:00, and breaks again at 09:00 (6 writes) and 10:00 (6 writes).
//   - a batch call at 09:05 spends $2.00 where nothing was spent the week before.
func incidentLedger(t *testing.T) (*ledger, int64) {
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	base := day(2026, 10, 5, 0, time.UTC)
	at := func(h, m, s int) time.Time {
		return base.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s)*time.Second)
	}
	var recs []schema.Attempt
	n := 0
	// sonnet
	for t0 := at(9, 30, 0); t0.Before(at(10, 46, 0)); t0 = t0.Add(10 * time.Second) {
		n++
		svc := []string{"chat", "mail"}[n%2]
		id := fmt.Sprintf("s%d", n)
		r := newRec(t0, "sonnet").service(svc, "answer").request(id, 1).tokens(1000, 0)
		switch {
		case t0.Equal(at(10, 5, 0)):
			recs = append(recs, r.fail(schema.ErrorServer).done(),
				newRec(t0.Add(time.Second), "gpt-4o").service(svc, "answer").request(id, 2).tokens(1000, 0).fallback("sonnet").
					fail(schema.ErrorServer).done(),
				newRec(t0.Add(2*time.Second), "gpt-4o").service(svc, "answer").request(id, 3).tokens(1000, 0).fallback("sonnet").done())
		case !t0.Before(at(10, 0, 0)) && t0.Before(at(10, 10, 0)):
			recs = append(recs, r.fail(schema.ErrorServer).done(),
				newRec(t0.Add(time.Second), "gpt-4o").service(svc, "answer").request(id, 2).tokens(1000, 0).fallback("sonnet").done())
		case t0.Equal(at(10, 10, 0)):
			recs = append(recs, r.tokens(0, 0).fail(schema.ErrorServer).done())
		default:
			recs = append(recs, r.done())
		}
	}
	// haiku
	for t0 := at(10, 30, 0); t0.Before(at(10, 46, 0)); t0 = t0.Add(10 * time.Second) {
		n++
		id := fmt.Sprintf("h%d", n)
		if t0.Before(at(10, 40, 0)) {
			recs = append(recs, newRec(t0, "haiku").service("bot", "reply").request(id, 1).tokens(100, 0).done())
			continue
		}
		for no := 1; no <= 3; no++ {
			r := newRec(t0.Add(time.Duration(no-1)*time.Second), "haiku").service("bot", "reply").request(id, no).tokens(100, 0)
			if no < 3 {
				r = r.fail(schema.ErrorOverloaded)
			}
			recs = append(recs, r.done())
		}
	}
	// opus's cache
	cache := func(h, i int) *rec {
		return newRec(at(h, i, 0), "opus").service("cachebot", "ask").tokens(200, 100).hash("opus-v1")
	}
	for _, h := range []int{6, 8} {
		recs = append(recs, cache(h, 0).cache(1000, 0).done())
		for i := 1; i <= 4; i++ {
			recs = append(recs, cache(h, i).cache(0, 1000).done())
		}
	}
	for _, w := range []struct{ h, n int }{{7, 10}, {9, 6}, {10, 6}} {
		for i := range w.n {
			recs = append(recs, cache(w.h, i).cache(1000, 0).done())
		}
	}
	recs = append(recs, newRec(at(9, 5, 0), "sonnet").service("batch", "run").tokens(20_000_000, 0).done())
	l.add(p, recs...)
	return l, p
}

// TestIncidents checks every figure of the incidents of incidentLedger.
func TestIncidents(t *testing.T) {
	t.Parallel()
	l, p := incidentLedger(t)
	now := time.Date(2026, 10, 5, 10, 46, 0, 0, time.UTC)
	s := l.service(now)
	got, err := s.Incidents(context.Background(), analytics.Filter{ProjectID: p,
		From: day(2026, 10, 5, 0, time.UTC), To: day(2026, 10, 6, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	hm := func(h, m int) time.Time { return day(2026, 10, 5, h, time.UTC).Add(time.Duration(m) * time.Minute) }
	tp := func(t time.Time) *time.Time { return &t }
	i64 := func(v int64) *int64 { return &v }
	nn := func(v int64) *money.Nanos { n := money.Nanos(v); return &n }
	want := []analytics.Incident{
		// Open: the last troubled minute (10:45) is less than 2 minutes before now. 36 calls took
		// 3 attempts each; the 72 failed ones billed 10,000 each.
		{Kind: analytics.KindRetryStorm, StartedAt: hm(10, 40), Provider: "anthropic", Model: "haiku",
			CallsAffected: 36, ExtraAttempts: 72, WastedUSD: nn(720_000)},
		// One incident for both services: 60 calls, each failed once (100,000) and answered by the
		// fallback, one of them after a failed fallback attempt (100,000 more: wasted spend counts
		// the fallback's attempts too). Recovered 10 s after the end: the window from 10:10:00
		// holds the call that got no answer, the next one only answered calls.
		{Kind: analytics.KindErrorSpike, StartedAt: hm(10, 0), EndedAt: tp(hm(10, 10)), Provider: "anthropic", Model: "sonnet",
			CallsAffected: 60, FallbackAnswers: 60, ExtraAttempts: 61, WastedUSD: nn(6_100_000), RecoverySeconds: i64(10)},
		// Broken again from 09:00, still: 12 writes at 195,000 against the working hours' mean
		// (10 calls, 2 × 515,000).
		{Kind: analytics.KindCacheBroken, StartedAt: hm(9, 0), Service: "cachebot", Operation: "ask", Provider: "anthropic",
			Model: "opus", CallsAffected: 12, ExtraUSD: nn(12*195_000 - 12*1_030_000/10)},
		// 09:00 spent 2,000,000,000 + 180 calls at 100,000 + 6 cache writes at 195,000; the week
		// before, nothing.
		{Kind: analytics.KindSpendSpike, StartedAt: hm(9, 0), EndedAt: tp(hm(10, 0)), CallsAffected: 187,
			ExtraUSD: nn(2_000_000_000 + 180*100_000 + 6*195_000)},
		// The first break, healed at 08:00: 10 writes against 06:00's 5 calls.
		{Kind: analytics.KindCacheBroken, StartedAt: hm(7, 0), EndedAt: tp(hm(8, 0)), Service: "cachebot", Operation: "ask",
			Provider: "anthropic", Model: "opus", CallsAffected: 10, ExtraUSD: nn(10*195_000 - 10*515_000/5)},
	}
	if len(got.Incidents) != len(want) {
		t.Fatalf("%d incidents, want %d:\n%s", len(got.Incidents), len(want), js(got.Incidents))
	}
	for i, w := range want {
		g := got.Incidents[i]
		w.ID = g.ID
		if js(g) != js(w) {
			t.Errorf("incident %d:\n got %s\nwant %s", i, js(g), js(w))
		}
	}
	// Incidents are listed by start, latest first, then by kind. A range up to 09:00 sees the
	// first break only.
	early, err := s.Incidents(context.Background(), analytics.Filter{ProjectID: p, From: hm(0, 0), To: hm(9, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if len(early.Incidents) != 1 || early.Incidents[0].ID != got.Incidents[4].ID {
		t.Errorf("up to 09:00: %s, want the first cache break", js(early.Incidents))
	}
}

// TestIncidentRecovery checks the recovery time of an outage of sonnet from 10:00 to 10:10 (every
// call failed), with 10 calls every 10 s, by what the calls after 10:10 did: a call counts in the
// 10-second window it began in, answered when an attempt of it that began within a minute of the
// window's end got an answer, and recovery is the first window with 95% of its calls answered.
func TestIncidentRecovery(t *testing.T) {
	t.Parallel()
	base := day(2026, 10, 5, 10, time.UTC)
	end := base.Add(10 * time.Minute)
	cases := []struct {
		name string
		// after is what a call that began at t0 (the k-th of its window) did after the outage: its
		// attempts' delays from t0 and whether each succeeded.
		after func(t0 time.Time, k int) []attempt
		want  *int64
	}{
		{"at once", func(time.Time, int) []attempt { return []attempt{{0, true}} }, i64(0)},
		// One call of each window fails until 10:13 (10% of each minute: no longer an incident),
		// so the windows pass from 10:13 on: beyond the first read's two minutes.
		{"after three minutes", func(t0 time.Time, k int) []attempt {
			return []attempt{{0, k > 0 || !t0.Before(end.Add(3*time.Minute))}}
		}, i64(180)},
		// The calls of 10:10:00 fail once and are answered by a retry 30 s later: within a minute
		// of their window's end, so that window counts.
		{"retried within the reach", func(t0 time.Time, _ int) []attempt {
			if t0.Equal(end) {
				return []attempt{{0, false}, {30 * time.Second, true}}
			}
			return []attempt{{0, true}}
		}, i64(0)},
		// Retried 90 s later, past the reach: 10:10:00 is not recovered, 10:10:10 is.
		{"retried past the reach", func(t0 time.Time, _ int) []attempt {
			if t0.Equal(end) {
				return []attempt{{0, false}, {90 * time.Second, true}}
			}
			return []attempt{{0, true}}
		}, i64(10)},
		// Never 95% within the 30 minutes looked at: no recovery time.
		{"not within the limit", func(_ time.Time, k int) []attempt { return []attempt{{0, k > 0}} }, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := newLedger(t, time.UTC)
			p := l.project("acme")
			l.add(p, outage(base, end, c.after)...)
			if g := recovery(t, l.service(base.Add(55*time.Minute)), p, end); js(g) != js(c.want) {
				t.Errorf("recovery after %s s, want %s", js(g), js(c.want))
			}
		})
	}
}

// outage is TestIncidentRecovery's ledger: 10 calls every 10 s of sonnet from 30 minutes before
// base to 50 minutes after it, all failed from base to end, and after end as after says.
func outage(base, end time.Time, after func(t0 time.Time, k int) []attempt) []schema.Attempt {
	var recs []schema.Attempt
	for t0 := base.Add(-30 * time.Minute); t0.Before(base.Add(50 * time.Minute)); t0 = t0.Add(10 * time.Second) {
		for k := range 10 {
			id := fmt.Sprintf("c%d-%d", t0.Unix(), k)
			at := t0.Add(time.Duration(k) * 100 * time.Millisecond)
			switch {
			case t0.Before(base):
				recs = append(recs, newRec(at, "sonnet").request(id, 1).tokens(100, 0).done())
			case t0.Before(end):
				recs = append(recs, newRec(at, "sonnet").request(id, 1).tokens(100, 0).fail(schema.ErrorServer).done())
			default:
				for no, a := range after(t0, k) {
					r := newRec(at.Add(a.delay), "sonnet").request(id, no+1).tokens(100, 0)
					if !a.ok {
						r = r.fail(schema.ErrorServer)
					}
					recs = append(recs, r.done())
				}
			}
		}
	}
	return recs
}

// recovery is the recovery time s gives the one incident of the project's day of end, which
// ended at end.
func recovery(t *testing.T, s *analytics.Service, project int64, end time.Time) *int64 {
	t.Helper()
	d := end.Truncate(24 * time.Hour)
	got, err := s.Incidents(context.Background(), analytics.Filter{ProjectID: project, From: d, To: d.Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Incidents) != 1 || got.Incidents[0].EndedAt == nil || !got.Incidents[0].EndedAt.Equal(end) {
		t.Fatalf("want one incident ended at %s: %s", end, js(got.Incidents))
	}
	return got.Incidents[0].RecoverySeconds
}

// TestIncidentRecoveryKept checks that a Service keeps the recovery of an incident that ended
// longer ago than the recovery is looked for while the row of rollup_days of its day is not written
// again: the calls after it changed behind its back go unseen (and are seen by a new Service), a
// late record of the day is seen; and that the recovery of an incident that ended more recently is
// read again.
func TestIncidentRecoveryKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := day(2026, 10, 5, 10, time.UTC)
	end := base.Add(10 * time.Minute)
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	l.add(p, outage(base, end, func(time.Time, int) []attempt { return []attempt{{0, true}} })...)
	// The first window's calls after the outage fail, behind the Service's back.
	fail := func(status string) {
		t.Helper()
		if _, err := l.st.Pool.Exec(ctx, `UPDATE attempts SET status = $2, error_class = $3
			WHERE project_id = $1 AND started_at >= '2026-10-05 10:10:00+00' AND started_at < '2026-10-05 10:10:10+00'`,
			p, status, map[string]string{"ok": "none", "error": "server_error"}[status]); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		// now is the Service's clock; want what it answers after the first window failed behind its
		// back, then after a late record of the 5th.
		now        time.Time
		want, late *int64
	}{
		{"ended 45 minutes ago", base.Add(55 * time.Minute), i64(0), i64(10)},
		{"ended 25 minutes ago", base.Add(35 * time.Minute), i64(10), i64(10)},
	} {
		s := l.service(c.now)
		if g := recovery(t, s, p, end); js(g) != js(i64(0)) {
			t.Fatalf("%s: at first %s s, want 0", c.name, js(g))
		}
		fail("error")
		if g := recovery(t, s, p, end); js(g) != js(c.want) {
			t.Errorf("%s, calls changed behind its back: the same Service answers %s s, want %s", c.name, js(g), js(c.want))
		}
		if g := recovery(t, l.service(c.now), p, end); js(g) != js(i64(10)) {
			t.Errorf("%s, calls changed behind its back: a new Service answers %s s, want 10", c.name, js(g))
		}
		l.add(p, newRec(day(2026, 10, 5, 3, time.UTC), "sonnet").tokens(100, 0).done())
		if g := recovery(t, s, p, end); js(g) != js(c.late) {
			t.Errorf("%s, a late record: the same Service answers %s s, want %s", c.name, js(g), js(c.late))
		}
		fail("ok")
		l.add(p, newRec(day(2026, 10, 5, 4, time.UTC), "sonnet").tokens(100, 0).done())
	}
}

// TestIncidentHoursKept checks that a Service keeps the models' hours and minutes of the days
// before today while the rows of rollup_days of the days they fall in are not written again, in
// Kolkata (+05:30), where the UTC hour 18:00 holds the end of one local day and the start of the
// next: rollups changed behind its back go unseen (and are seen by a new Service), a late record
// of another day changes nothing kept, and one of a day the hours or minutes fall in is seen.
func TestIncidentHoursKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	in := mustZone(t, "Asia/Kolkata")
	base := day(2026, 10, 5, 10, time.UTC)
	l := newLedger(t, in)
	p := l.project("acme")
	l.add(p, outage(base, base.Add(10*time.Minute), func(time.Time, int) []attempt { return []attempt{{0, true}} })...)
	now := day(2026, 10, 7, 12, time.UTC)
	s := l.service(now)
	// started lists when the incidents of the 5th (local) began, in UTC.
	started := func(s *analytics.Service) string {
		t.Helper()
		got, err := s.Incidents(ctx, analytics.Filter{ProjectID: p, From: day(2026, 10, 5, 0, in), To: day(2026, 10, 6, 0, in)})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, in := range got.Incidents {
			out = append(out, in.Kind+" "+in.StartedAt.UTC().Format("15:04"))
		}
		return strings.Join(out, ", ")
	}
	behind := func(sql string) {
		t.Helper()
		if _, err := l.st.Pool.Exec(ctx, sql, p); err != nil {
			t.Fatal(err)
		}
	}
	late := func(at time.Time) { l.add(p, newRec(at, "haiku").tokens(100, 0).done()) }
	for _, step := range []struct {
		name string
		do   func()
		// want is what the Service answers after the step, fresh what a new one does.
		want, fresh string
	}{
		{"first read", func() {}, "error_spike 10:00", "error_spike 10:00"},
		{"the outage's first minutes gone behind its back", func() {
			behind(`DELETE FROM rollup_model_minute WHERE project_id = $1 AND bucket >= '2026-10-05 10:00Z' AND bucket < '2026-10-05 10:05Z'`)
		}, "error_spike 10:00", "error_spike 10:05"},
		{"a late record of the 3rd", func() { late(day(2026, 10, 3, 12, time.UTC)) }, "error_spike 10:00", "error_spike 10:05"},
		{"a late record of the 5th", func() { late(day(2026, 10, 5, 3, time.UTC)) }, "error_spike 10:05", "error_spike 10:05"},
		{"the outage's failed hour gone behind its back", func() {
			behind(`DELETE FROM rollup_hourly_model WHERE project_id = $1 AND bucket = '2026-10-05 10:00Z' AND status = 'error'`)
		}, "error_spike 10:05", ""},
		// 23:40 on the 4th in Kolkata, in the UTC hour 18:00 the 5th's hours begin with.
		{"a late record of the 4th in the 5th's first hour", func() { late(day(2026, 10, 4, 18, time.UTC).Add(10 * time.Minute)) }, "", ""},
	} {
		step.do()
		if got := started(s); got != step.want {
			t.Errorf("%s: the Service answers %q, want %q", step.name, got, step.want)
		}
		if got := started(l.service(now)); got != step.fresh {
			t.Errorf("%s: a new Service answers %q, want %q", step.name, got, step.fresh)
		}
	}
}

// attempt is one attempt of a call in TestIncidentRecovery: when it began after the call, and
// whether it succeeded.
type attempt struct {
	delay time.Duration
	ok    bool
}

// TestCacheIncidentAcrossShapes checks that a fallback model standing in for two models (two
// series shapes) is one model to the cache_broken incidents: its cache works at 08:00; at 09:00
// the calls for opus write it 12 times while one call for sonnet reads it, so the model read it
// that hour; at 10:00 6 calls for each write it without a read, 12 in all, enough for an
// incident where neither shape's 6 would be.
func TestCacheIncidentAcrossShapes(t *testing.T) {
	t.Parallel()
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	at := func(h, m int) time.Time { return day(2026, 10, 5, h, time.UTC).Add(time.Duration(m) * time.Minute) }
	call := func(h, m int, from string) *rec {
		return newRec(at(h, m), "haiku").service("bot", "answer").tokens(200, 100).hash("fb-v1").fallback(from)
	}
	recs := []schema.Attempt{call(8, 0, "sonnet").cache(1000, 0).done(), call(9, 30, "sonnet").cache(0, 1000).done()}
	for m := 1; m <= 4; m++ {
		recs = append(recs, call(8, m, "opus").cache(0, 1000).done())
	}
	for m := range 12 {
		recs = append(recs, call(9, m, "opus").cache(1000, 0).done(),
			call(10, m, []string{"sonnet", "opus"}[m%2]).cache(1000, 0).done())
	}
	l.add(p, recs...)
	got, err := l.service(at(11, 0)).Incidents(context.Background(), analytics.Filter{ProjectID: p, From: at(0, 0), To: at(24, 0)})
	if err != nil {
		t.Fatal(err)
	}
	var broken []analytics.Incident
	for _, in := range got.Incidents {
		if in.Kind == analytics.KindCacheBroken {
			broken = append(broken, in)
		}
	}
	if len(broken) != 1 || !broken[0].StartedAt.Equal(at(10, 0)) || broken[0].EndedAt != nil || broken[0].CallsAffected != 12 ||
		broken[0].Model != "haiku" {
		t.Errorf("cache incidents %s, want one of haiku from 10:00, open, with 12 calls", js(broken))
	}
}
