package analytics_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/seed"
	"github.com/ledgerd/ledgerd/schema"
)

// TestCacheDays checks that the cache report and the incidents answer the same from the cache
// days' summaries (rollup_cache_daily) as from the hours they sum, on a ledger of 10 days whose
// models break, heal, share hashes and stand in for one another: over the default week, whole
// days, days cut at an hour and the incidents open now; and that the open incidents are those of
// the incidents that are open. The hours the summaries cover are then deleted, and the reports of
// whole days and the open incidents must not change: they take those days from the summaries
// (the open incidents today's too, summed up to 15:00).
func TestCacheDays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tz := mustZone(t, "America/New_York")
	now := time.Date(2026, 11, 4, 15, 30, 0, 0, tz)
	l := loadSeeded(t, seed.Options{Records: 30_000, Seed: 11, Projects: []string{"saas"}, End: now, Days: 10,
		Spread: &seed.Spread{Tenants: 100, Services: 4}})
	pool := l.st.Pool
	summarizeCacheDaysAt(t, pool, now)
	midnight := func(daysBack int) time.Time {
		y, m, d := now.Date()
		return time.Date(y, m, d-daysBack, 0, 0, 0, 0, tz)
	}
	filters := map[string]analytics.Filter{
		"default week":     {ProjectID: l.project},
		"whole days":       {ProjectID: l.project, From: midnight(8), To: midnight(2)},
		"cut at hours":     {ProjectID: l.project, From: midnight(7).Add(10 * time.Hour), To: midnight(1).Add(17 * time.Hour)},
		"one day":          {ProjectID: l.project, From: midnight(4), To: midnight(3)},
		"up to now":        {ProjectID: l.project, From: midnight(3), To: now},
		"open now":         {ProjectID: l.project, From: now.Add(-2 * time.Hour), To: now.Add(time.Hour)},
		"one model's week": {ProjectID: l.project, Model: "claude-sonnet-5-5"},
	}
	answers := func() map[string]string {
		out := map[string]string{}
		for name, f := range filters {
			rows, err := l.svc.Cache(ctx, f, 0)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out[name+" cache"] = mustJSON(t, rows)
			if f.Model != "" {
				continue
			}
			in, err := l.svc.Incidents(ctx, f)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out[name+" incidents"] = mustJSON(t, in)
			if open, err := l.svc.OpenIncidents(ctx, f); err != nil {
				t.Fatalf("%s: %v", name, err)
			} else {
				out[name+" open incidents"] = mustJSON(t, open)
			}
		}
		return out
	}
	exec := func(sql string, args ...any) int64 {
		t.Helper()
		tag, err := pool.Exec(ctx, sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		return tag.RowsAffected()
	}
	var broken, summed int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE since IS NOT NULL AND prompt_hash = ''), count(*)
		FROM rollup_cache_daily`).Scan(&broken, &summed); err != nil {
		t.Fatal(err)
	}
	if broken == 0 || summed == 0 {
		t.Fatalf("%d summaries, %d of models that wrote after their last read: the ledger tests nothing", summed, broken)
	}
	fromDays := answers()
	var open analytics.IncidentList
	if err := json.Unmarshal([]byte(fromDays["open now open incidents"]), &open); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(open.Incidents, func(in analytics.Incident) bool { return in.Kind == analytics.KindCacheBroken }) {
		t.Fatalf("no cache broken now: the ledger tests nothing of the open incidents")
	}

	// Every day noted: the answers come from the hours alone.
	noteCacheDays(t, pool, time.Time{})
	fromHours := answers()
	for k, want := range fromHours {
		if fromDays[k] != want {
			t.Errorf("%s from the summaries:\n%s\nfrom the hours:\n%s", k, fromDays[k], want)
		}
	}
	// The open incidents are those of the incidents that are open, over every range.
	for name := range filters {
		var all, open analytics.IncidentList
		if _, ok := fromHours[name+" incidents"]; !ok {
			continue
		}
		if err := json.Unmarshal([]byte(fromHours[name+" incidents"]), &all); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(fromHours[name+" open incidents"]), &open); err != nil {
			t.Fatal(err)
		}
		all.Incidents = slices.DeleteFunc(all.Incidents, func(in analytics.Incident) bool { return !in.Open() })
		if got, want := mustJSON(t, open), mustJSON(t, all); got != want {
			t.Errorf("%s: open incidents\n%s\nwant the open ones of the incidents:\n%s", name, got, want)
		}
	}

	// The summaries stand for their hours: without those hours the answers stay.
	exec(`DELETE FROM cache_days_dirty`)
	if n := exec(`DELETE FROM rollup_cache_hourly c USING rollup_cache_days d WHERE c.project_id = d.project_id
		AND c.bucket >= (d.bucket::timestamp AT TIME ZONE $1) AND c.bucket < d.through`, tz.String()); n == 0 {
		t.Fatal("no hour summed")
	}
	// The questions of whole days, and up to now (today's summary, up to 15:00, with the hours
	// after it); the others read some of those hours as hours.
	got := answers()
	for _, k := range []string{"default week cache", "whole days cache", "one day cache", "one model's week cache", "up to now cache",
		"open now open incidents"} {
		if got[k] != fromHours[k] {
			t.Errorf("%s without the summed hours:\n%s\nwant:\n%s", k, got[k], fromHours[k])
		}
	}
}

// TestCacheDaysLate checks that a late attempt in a summed day is counted at once (the fold notes
// its day, whose hours are then read instead of its summary) and after the day is summed again,
// on a cache that breaks at 22:00, stays broken over midnight and is read back two days later.
func TestCacheDaysLate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	var recs []schema.Attempt
	// Working on the 5th at 10:00 (1 write, 4 reads), then 6 writes at 22:00 on the 5th, 23:00,
	// and 02:00 on the 6th, and reads again at 12:00 on the 7th.
	recs = append(recs, botCall(5, 10, 0).cache(1000, 0).done())
	for i := range 4 {
		recs = append(recs, botCall(5, 10, 1+i).cache(0, 1000).done())
	}
	for _, h := range [][2]int{{5, 22}, {5, 23}, {6, 2}} {
		for i := range 6 {
			recs = append(recs, botCall(h[0], h[1], i).cache(1000, 0).done())
		}
	}
	recs = append(recs, botCall(7, 12, 0).cache(0, 1000).done())
	l.add(p, recs...)
	s := l.service(oct(8, 0, 0))
	summarizeCacheDays(t, l.st.Pool, oct(8, 0, 0))
	f := analytics.Filter{ProjectID: p, From: oct(4, 0, 0), To: oct(7, 0, 0), Service: "bot"}
	report := func() analytics.CacheRow {
		t.Helper()
		rows, err := s.Cache(ctx, f, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 {
			t.Fatalf("%d rows, want the model's and its hash's: %s", len(rows), js(rows))
		}
		return rows[0]
	}
	// Up to the 7th: broken since 22:00 on the 5th; 18 calls at 195,000 against 18 at the working
	// hour's mean (5 calls, 515,000).
	check := func(what string, calls int64) {
		t.Helper()
		r := report()
		extra := calls*writeCost - calls*515_000/5
		if !r.Broken || r.BrokenSince == nil || !r.BrokenSince.Equal(oct(5, 22, 0)) || r.ExtraCostUSD == nil || int64(*r.ExtraCostUSD) != int64(extra) {
			t.Errorf("%s: %s, want broken since the 5th 22:00 with extra %d", what, js(r), extra)
		}
	}
	check("summed", 18)
	// A late write at 23:30 on the 5th, a day already summed.
	l.add(p, botCall(5, 23, 30).cache(1000, 0).done())
	check("late", 19)
	summarizeCacheDays(t, l.st.Pool, oct(8, 0, 0))
	check("summed again", 19)
	// Its incident, from the summaries of the 5th and the 6th, ended by the read of the 7th.
	in, err := s.Incidents(ctx, analytics.Filter{ProjectID: p, From: oct(7, 0, 0), To: oct(8, 0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, i := range in.Incidents {
		if i.Kind == analytics.KindCacheBroken {
			found = true
			extra := 19*writeCost - 19*515_000/5
			if !i.StartedAt.Equal(oct(5, 22, 0)) || i.EndedAt == nil || !i.EndedAt.Equal(oct(7, 12, 0)) || i.CallsAffected != 19 ||
				i.ExtraUSD == nil || int64(*i.ExtraUSD) != int64(extra) {
				t.Errorf("incident %s, want the 5th 22:00 to the 7th 12:00, 19 calls, extra %d", js(i), extra)
			}
		}
	}
	if !found {
		t.Errorf("no broken cache in %s", js(in))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOpenCacheBreaks checks the open broken caches (read from the days' summaries, today's up to
// the hour it was summed) against the open ones of all the incidents (read from today's hours),
// on models whose open break lies in the days before today and models that read today.
func TestOpenCacheBreaks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	at := oct
	now := at(8, 15, 30)
	var recs []schema.Attempt
	calls := func(service string, d, h, n int, write, read int64) {
		for i := range n {
			recs = append(recs, newRec(at(d, h, i), "sonnet").service(service, "answer").tokens(200, 100).
				cache(write, read).hash("sys-v1").done())
		}
	}
	working := func(service string, d, h int) { calls(service, d, h, 1, 1000, 0); calls(service, d, h, 4, 0, 1000) }
	ptr := func(t time.Time) *time.Time { return &t }
	tests := []struct {
		service string
		build   func(s string)
		since   *time.Time // nil: not broken now
		extra   int64
	}{
		// broke two days ago, still writing today: its break is in the days before.
		{"old", func(s string) { working(s, 5, 10); calls(s, 6, 9, 10, 1000, 0); calls(s, 8, 9, 3, 1000, 0) },
			ptr(at(6, 9, 0)), 13*writeCost - 13*515_000/5},
		// broke, then read back today: not broken now, whatever the days before hold.
		{"healed", func(s string) { working(s, 5, 10); calls(s, 6, 9, 10, 1000, 0); calls(s, 8, 9, 1, 0, 1000) }, nil, 0},
		// read back today, then broken: the hours that read include the days before.
		{"rebroke", func(s string) { working(s, 5, 10); calls(s, 8, 8, 1, 0, 1000); calls(s, 8, 10, 10, 1000, 0) },
			ptr(at(8, 10, 0)), 10*writeCost - 10*(515_000+80_000)/6},
		// read back today, then too few writes to count.
		{"few", func(s string) { working(s, 5, 10); calls(s, 8, 8, 1, 0, 1000); calls(s, 8, 10, 3, 1000, 0) }, nil, 0},
		// never read, no call today.
		{"quiet", func(s string) { calls(s, 5, 9, 10, 1000, 0) }, ptr(at(5, 9, 0)), 0},
		// never read, first called today.
		{"fresh", func(s string) { calls(s, 8, 12, 10, 1000, 0) }, ptr(at(8, 12, 0)), 0},
	}
	for _, tt := range tests {
		tt.build(tt.service)
	}
	l.add(p, recs...)
	summarizeCacheDaysAt(t, l.st.Pool, now)
	s := l.service(now)
	f := analytics.Filter{ProjectID: p, From: now.Add(-2 * time.Hour), To: now.Add(time.Hour)}
	open, err := s.OpenIncidents(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	all, err := s.Incidents(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	all.Incidents = slices.DeleteFunc(all.Incidents, func(in analytics.Incident) bool { return !in.Open() })
	if got, want := js(open), js(all); got != want {
		t.Errorf("open incidents\n%s\nwant the open ones of the incidents:\n%s", got, want)
	}
	for _, tt := range tests {
		i := slices.IndexFunc(open.Incidents, func(in analytics.Incident) bool {
			return in.Kind == analytics.KindCacheBroken && in.Service == tt.service
		})
		switch {
		case tt.since == nil && i >= 0:
			t.Errorf("%s: open break %s, want none", tt.service, js(open.Incidents[i]))
		case tt.since == nil:
		case i < 0:
			t.Errorf("%s: no open break, want one since %s", tt.service, tt.since)
		case !open.Incidents[i].StartedAt.Equal(*tt.since):
			t.Errorf("%s: broken since %s, want %s", tt.service, open.Incidents[i].StartedAt, tt.since)
		case tt.extra != 0 && (open.Incidents[i].ExtraUSD == nil || int64(*open.Incidents[i].ExtraUSD) != tt.extra):
			t.Errorf("%s: extra %s, want %d", tt.service, js(open.Incidents[i].ExtraUSD), tt.extra)
		}
	}
}

// TestCacheDaysKept checks that a Service reads a day's summaries once and keeps them while the
// day is not summed again: with the rows of a summed day deleted behind its back (its row of
// rollup_cache_days untouched), it answers as before, where a new Service, which reads them,
// does not.
func TestCacheDaysKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	// Working on the 5th at 10:00 (1 write, 4 reads), broken from 02:00 on the 6th (12 writes).
	recs := []schema.Attempt{botCall(5, 10, 0).cache(1000, 0).done()}
	for i := range 4 {
		recs = append(recs, botCall(5, 10, 1+i).cache(0, 1000).done())
	}
	for i := range 12 {
		recs = append(recs, botCall(6, 2, i).cache(1000, 0).done())
	}
	l.add(p, recs...)
	now := oct(8, 0, 0)
	summarizeCacheDays(t, l.st.Pool, now)
	f := analytics.Filter{ProjectID: p, From: oct(4, 0, 0), To: now}
	report := func(s *analytics.Service) string {
		t.Helper()
		rows, err := s.Cache(ctx, f, 0)
		if err != nil {
			t.Fatal(err)
		}
		return js(rows)
	}
	s := l.service(now)
	before := report(s)
	if !strings.Contains(before, `"broken_since":"2026-10-06T02:00:00Z"`) || !strings.Contains(before, "read back until 2026-10-05 10:00") {
		t.Fatalf("before: %s, want broken since the 6th 02:00 after reads until the 5th 10:00", before)
	}
	if _, err := l.st.Pool.Exec(ctx, `DELETE FROM rollup_cache_daily WHERE project_id = $1 AND bucket = '2026-10-05'`, p); err != nil {
		t.Fatal(err)
	}
	if got := report(s); got != before {
		t.Errorf("the same Service after the rows were deleted: %s, want as before: %s", got, before)
	}
	if got := report(l.service(now)); got == before {
		t.Errorf("a new Service after the rows were deleted: %s, want it to miss the 5th", got)
	}
}

// oct is a time of October 2026, UTC, when the cache days' tests take place.
func oct(d, h, m int) time.Time { return time.Date(2026, 10, d, h, m, 0, 0, time.UTC) }

// botCall is a call of the bot's answers on sonnet under the prompt sys-v1, at oct(d, h, m).
func botCall(d, h, m int) *rec {
	return newRec(oct(d, h, m), "sonnet").service("bot", "answer").tokens(200, 100).hash("sys-v1")
}

// TestCachePrefixesKept checks that a Service which keeps the summed days' prefixes added up
// answers the cache report and the incidents as a new Service does, read after read: as today's
// calls come in (a hash new today, a read that heals the cache), after a late call in a kept day
// (read from its hours until that day is summed again), and after it is summed again. Each
// question is asked twice, so a read that changed what the next one shares would show.
func TestCachePrefixesKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	now := oct(8, 15, 30)
	calls := func(d, h, n int, hash string, write, read int64) {
		t.Helper()
		var recs []schema.Attempt
		for i := range n {
			recs = append(recs, botCall(d, h, i).hash(hash).cache(write, read).done())
		}
		l.add(p, recs...)
	}
	// Working on the 5th at 10:00, broken from 02:00 on the 6th; another prompt on the 7th; two
	// more writes this morning, in today's summary (up to 15:00).
	calls(5, 10, 1, "sys-v1", 1000, 0)
	calls(5, 10, 4, "sys-v1", 0, 1000)
	calls(6, 2, 12, "sys-v1", 1000, 0)
	calls(7, 9, 1, "sys-v2", 1000, 0)
	calls(7, 9, 3, "sys-v2", 0, 1000)
	calls(8, 9, 2, "sys-v1", 1000, 0)
	summarizeCacheDaysAt(t, l.st.Pool, now)
	kept := l.service(now)
	filters := []analytics.Filter{
		{ProjectID: p},
		{ProjectID: p, From: oct(4, 0, 0), To: oct(9, 0, 0)},
		{ProjectID: p, From: now.Add(-2 * time.Hour), To: now.Add(time.Hour)},
		{ProjectID: p, Service: "bot", From: oct(5, 0, 0), To: now},
	}
	answers := func(s *analytics.Service) string {
		t.Helper()
		var b strings.Builder
		for _, f := range filters {
			rows, err := s.Cache(ctx, f, 1)
			if err != nil {
				t.Fatal(err)
			}
			in, err := s.Incidents(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(js(rows) + "\n" + js(in) + "\n")
		}
		return b.String()
	}
	check := func(what string, wantIn ...string) {
		t.Helper()
		want := answers(l.service(now))
		for _, w := range wantIn {
			if !strings.Contains(want, w) {
				t.Fatalf("%s: a new Service answers %s, without %s", what, want, w)
			}
		}
		for i := range 2 {
			if got := answers(kept); got != want {
				t.Errorf("%s, read %d: the Service that keeps the past days answers\n%s\nwant a new Service's\n%s", what, i+1, got, want)
			}
		}
	}
	check("summed", `"broken_since":"2026-10-06T02:00:00Z"`)
	// After the summary's through: a prompt new today, then a read that heals sys-v1.
	calls(8, 15, 2, "sys-v3", 1000, 0)
	calls(8, 15, 1, "sys-v1", 0, 1000)
	// The model's week counts the hash new today with the two kept ones.
	check("today's hours", `"prompt_hash":"sys-v3"`, `"prompt_hash":null,"prompt_hashes":3`)
	// A late write on the 6th: that day is read from its hours until summed again.
	calls(6, 3, 1, "sys-v1", 1000, 0)
	check("late", `"calls_affected":13`)
	summarizeCacheDaysAt(t, l.st.Pool, now)
	check("summed again", `"calls_affected":13`)
}
