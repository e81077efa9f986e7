package analytics_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/rollup"
	"github.com/ledgerd/ledgerd/internal/synth"
	"github.com/ledgerd/ledgerd/schema"
)

// snapshotSQL renders every row of a rollup as text, its series by name rather than id (two
// databases may number series differently) and its histogram with its bounds.
const snapshotSQL = `SELECT ((to_jsonb(r) - 'series_id' - 'latency_hist')
		|| jsonb_build_object('series', to_jsonb(s) - 'id', 'hist', r.latency_hist::text))::text AS row
	FROM %s r JOIN series s ON s.project_id = r.project_id AND s.id = r.series_id ORDER BY 1`

// The cache days folds noted are summed first (rollup.SummarizeCacheDays, as a writer's folder
// would), so that the fold's summaries compare with a rebuild's.
func snapshot(t *testing.T, l *ledger) map[string][]string {
	t.Helper()
	summarizeCacheDays(t, l.st.Pool, time.Now())
	out := map[string][]string{}
	for _, table := range []string{"rollup_hourly", "rollup_minute5", "rollup_hourly_model", "rollup_daily", "rollup_daily_model", "rollup_daily_service",
		"rollup_daily_tenant", "rollup_cache_hourly", "cache_prefixes", "rollup_load_minute", "rollup_load_peaks", "rollup_tenant_spend", "rollup_tenant_blocks",
		"rollup_cache_daily", "rollup_cache_days", "rollup_model_minute", "rollup_days"} {
		q := strings.Replace(snapshotSQL, "%s", table, 1)
		switch table {
		case "rollup_load_minute", "rollup_load_peaks", "rollup_tenant_spend", "rollup_cache_daily", "rollup_cache_days",
			"rollup_model_minute": // keyed by names, no series or histogram
			q = `SELECT to_jsonb(r)::text FROM ` + table + ` r ORDER BY 1`
		case "rollup_hourly_model", "rollup_daily_model", "rollup_daily_service", "rollup_daily_tenant", "rollup_tenant_blocks": // keyed by series columns, not a series
			q = `SELECT ((to_jsonb(r) - 'latency_hist') || jsonb_build_object('hist', r.latency_hist::text))::text
				FROM ` + table + ` r ORDER BY 1`
		case "rollup_days": // the days, not how often they were written
			q = `SELECT jsonb_build_object('project_id', project_id, 'bucket', bucket)::text FROM rollup_days ORDER BY 1`
		case "rollup_cache_hourly": // a row emptied by moves equals no row
			q = strings.Replace(q, ", 'hist', r.latency_hist::text", "", 1)
			q = strings.Replace(q, "ORDER BY", "WHERE r.calls <> 0 ORDER BY", 1)
		case "cache_prefixes": // what a hash's only call was means nothing once it has more
			q = `SELECT (CASE WHEN r.calls = 1 THEN to_jsonb(r) - 'series_id' || jsonb_build_object('series', to_jsonb(s) - 'id')
				ELSE jsonb_build_object('month', r.month, 'prompt_hash', r.prompt_hash, 'calls', r.calls) END)::text
				FROM cache_prefixes r LEFT JOIN series s ON s.project_id = r.project_id AND s.id = r.series_id AND r.calls = 1
				ORDER BY 1`
		}
		rows, err := l.st.Pool.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		out[table], err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if len(out[table]) == 0 {
			t.Fatalf("%s is empty", table)
		}
	}
	return out
}

func sameRollups(t *testing.T, what string, got, want map[string][]string) {
	t.Helper()
	for table, w := range want {
		g := got[table]
		if slices.Equal(g, w) {
			continue
		}
		for i := range max(len(g), len(w)) {
			if i >= len(g) || i >= len(w) || g[i] != w[i] {
				var gi, wi string
				if i < len(g) {
					gi = g[i]
				}
				if i < len(w) {
					wi = w[i]
				}
				t.Errorf("%s: %s differs (%d rows, want %d); first at row %d:\n got %s\nwant %s", what, table, len(g), len(w), i, gi, wi)
				break
			}
		}
	}
}

// synthetic returns the records of a varied synthetic ledger from 25 September to 5 November
// 2026: a month boundary, the end of daylight saving time in New York, retries, fallbacks,
// errors, cache use, unpriced models.
func synthetic(t *testing.T, n int) []schema.Attempt {
	t.Helper()
	end := time.Date(2026, 11, 5, 0, 0, 0, 0, time.UTC)
	opt := synth.Demo(3, end, time.UTC)
	opt.Start = time.Date(2026, 9, 25, 0, 0, 0, 0, time.UTC)
	g := synth.New(opt)
	var recs []schema.Attempt
	for len(recs) < n {
		recs = append(recs, g.Next()...)
	}
	for i := range recs {
		if err := recs[i].Validate(recs[i].StartedAt); err != nil {
			t.Fatalf("synthetic record %d: %v", i, err)
		}
	}
	return recs
}

func (l *ledger) addMany(project int64, recs []schema.Attempt) {
	l.t.Helper()
	for len(recs) > 0 {
		n := min(len(recs), 1000)
		l.add(project, recs[:n]...)
		recs = recs[n:]
	}
}

// TestRebuildEqualsWriter checks that rebuilding the rollups from the raw attempts gives exactly
// what the writer maintained, row for row, histogram for histogram.
func TestRebuildEqualsWriter(t *testing.T) {
	t.Parallel()
	recs := synthetic(t, 3000)
	for _, zone := range []string{
		"UTC",              // days are UTC days
		"America/New_York", // days cross UTC days and one lasts 25 hours
		"Asia/Kolkata",     // days begin at half past a UTC hour
	} {
		t.Run(zone, func(t *testing.T) {
			t.Parallel()
			tz := mustZone(t, zone)
			l := newLedger(t, tz)
			l.addMany(l.project("acme"), recs)
			want := snapshot(t, l)
			res, err := analytics.Rebuild(context.Background(), l.st.Pool, tz)
			if err != nil {
				t.Fatal(err)
			}
			sameRollups(t, "rebuilt", snapshot(t, l), want)
			if res.Previous != zone || res.Timezone != zone || res.KeptDays != 0 ||
				res.HourlyRows != int64(len(want["rollup_hourly"])) || res.DailyRows != int64(len(want["rollup_daily"])) {
				t.Errorf("result %+v", res)
			}
		})
	}
}

// TestRebuildAfterPrune coarsens the hourly detail of a ledger of six weeks (rollup.Prune) and
// checks that the prune removed only rollup_hourly's hours and rollup_minute5's minutes before
// their cutoffs, that a rebuild from the raw attempts then counts exactly the coarsened rollups,
// and that a late attempt in a pruned hour reaches every rollup but those two, as a rebuild counts
// it.
func TestRebuildAfterPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tz := mustZone(t, "America/New_York")
	recs := synthetic(t, 3000)
	l := newLedger(t, tz)
	p := l.project("acme")
	l.addMany(p, recs[1:])
	now := time.Date(2026, 11, 4, 15, 30, 0, 0, tz)
	cut := rollup.PruneCutoff(now)
	before := snapshot(t, l)
	kept := rowsFrom(t, l, "rollup_hourly", cut)
	if len(kept) == 0 || len(kept) == len(before["rollup_hourly"]) {
		t.Fatalf("%d of %d hourly rows from %v: the fixture should straddle the cutoff", len(kept), len(before["rollup_hourly"]), cut)
	}
	minutesCut := rollup.MinutesCutoff(now)
	keptMinutes := rowsFrom(t, l, "rollup_minute5", minutesCut)
	if len(keptMinutes) == 0 || len(keptMinutes) == len(before["rollup_minute5"]) {
		t.Fatalf("%d of %d minute rows from %v: the fixture should straddle the cutoff", len(keptMinutes), len(before["rollup_minute5"]), minutesCut)
	}
	if _, err := rollup.Prune(ctx, l.st.Pool, now); err != nil {
		t.Fatal(err)
	}
	pruned := snapshot(t, l)
	if got := rowsFrom(t, l, "rollup_hourly", time.Time{}); !slices.Equal(got, kept) {
		t.Errorf("after the prune rollup_hourly holds %d rows, want its %d rows from %v", len(got), len(kept), cut)
	}
	if got := rowsFrom(t, l, "rollup_minute5", time.Time{}); !slices.Equal(got, keptMinutes) {
		t.Errorf("after the prune rollup_minute5 holds %d rows, want its %d rows from %v", len(got), len(keptMinutes), minutesCut)
	}
	delete(before, "rollup_hourly")
	delete(before, "rollup_minute5")
	sameRollups(t, "pruned", pruned, before)

	if _, err := analytics.Rebuild(ctx, l.st.Pool, tz); err != nil {
		t.Fatal(err)
	}
	sameRollups(t, "rebuilt after the prune", snapshot(t, l), pruned)

	late := recs[0]
	late.StartedAt = cut.Add(-5 * time.Hour)
	l.add(p, late)
	folded := snapshot(t, l)
	if got := rowsFrom(t, l, "rollup_hourly", time.Time{}); !slices.Equal(got, kept) {
		t.Errorf("a late attempt before the cutoff changed rollup_hourly")
	}
	if got := rowsFrom(t, l, "rollup_minute5", time.Time{}); !slices.Equal(got, keptMinutes) {
		t.Errorf("a late attempt before the cutoff changed rollup_minute5")
	}
	if slices.Equal(folded["rollup_hourly_model"], pruned["rollup_hourly_model"]) {
		t.Errorf("a late attempt before the cutoff is missing from rollup_hourly_model")
	}
	if _, err := analytics.Rebuild(ctx, l.st.Pool, tz); err != nil {
		t.Fatal(err)
	}
	sameRollups(t, "rebuilt after a late attempt", snapshot(t, l), folded)
}

// rowsFrom is snapshot's rows of table (rollup_hourly or rollup_minute5) from the instant from on.
func rowsFrom(t *testing.T, l *ledger, table string, from time.Time) []string {
	t.Helper()
	rows, err := l.st.Pool.Query(context.Background(), strings.Replace(strings.Replace(snapshotSQL, "%s", table, 1),
		"ORDER BY", "WHERE r.bucket >= $1 ORDER BY", 1), from)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRebuildWithPending rebuilds while ingest commits go on and deltas of earlier commits are
// still pending: the rebuild folds and recounts the attempts of its snapshot, the later deltas
// stay pending and are folded once after it, and the rollups end as a writer folding as it goes
// leaves them.
func TestRebuildWithPending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	recs := synthetic(t, 3000)
	tz := mustZone(t, "America/New_York")
	want := newLedger(t, tz)
	want.addMany(want.project("acme"), recs)

	l := newLedger(t, tz)
	p := l.project("acme")
	l.addMany(p, recs[:1000])
	w := ingest.NewWriter(l.st, testPrice, ingest.Options{Timezone: tz, Registerer: prometheus.NewRegistry(), FoldEvery: time.Hour})
	if _, err := w.Submit(ctx, p, recs[1000:2000]); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for i := 2000; i < len(recs); i += 100 {
			if _, err := w.Submit(ctx, p, recs[i:i+100]); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	if _, err := analytics.Rebuild(ctx, l.st.Pool, tz); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sameRollups(t, "rebuilt during ingest", snapshot(t, l), snapshot(t, want))
	var pending int64
	if err := l.st.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM pending_rollup_hourly) + (SELECT count(*) FROM pending_cache)`).Scan(&pending); err != nil {
		t.Fatal(err)
	}
	if pending != 0 {
		t.Errorf("%d rows still pending", pending)
	}
}

// daysFrom keeps the rows of snapshot rows (JSON) whose bucket is day or later.
func daysFrom(t *testing.T, rows []string, day string) []string {
	t.Helper()
	var out []string
	for _, r := range rows {
		var row struct{ Bucket string }
		if err := json.Unmarshal([]byte(r), &row); err != nil {
			t.Fatal(err)
		}
		if row.Bucket >= day {
			out = append(out, r)
		}
	}
	return out
}

// TestRebuildTimezone checks a change of timezone: rebuilding a ledger written in UTC for New York
// gives what a writer counting in New York from the start gave, and stores the new timezone; and
// after the raw attempts of September were dropped for retention, their rollups survive every
// rebuild: kept as they are, recounted from hourly rollups for New York, and refused for India,
// whose days cannot be made of whole UTC hours; the tenant rollups, which no hourly rollup can
// recount, drop those days when the timezone changes. Once their hours are pruned, a change of
// timezone is refused.
func TestRebuildTimezone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ny := mustZone(t, "America/New_York")
	recs := synthetic(t, 3000)
	inUTC, inNY := newLedger(t, time.UTC), newLedger(t, ny)
	inUTC.addMany(inUTC.project("acme"), recs)
	inNY.addMany(inNY.project("acme"), recs)
	utcRollups, nyRollups := snapshot(t, inUTC), snapshot(t, inNY)

	if _, err := analytics.Rebuild(ctx, inUTC.st.Pool, ny); err != nil {
		t.Fatal(err)
	}
	sameRollups(t, "UTC ledger rebuilt for New York", snapshot(t, inUTC), nyRollups)
	if tz, err := inUTC.st.Setting(ctx, "timezone"); err != nil || tz != "America/New_York" {
		t.Errorf("stored timezone %q (%v), want America/New_York", tz, err)
	}

	// Drop September's raw attempts in both ledgers: rollups stay.
	for _, l := range []*ledger{inUTC, inNY} {
		if _, err := l.st.DropPartitionsBefore(ctx, time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name string
		tz   string
		want map[string][]string // nil: the rebuild must fail and change nothing
		kept int
	}{
		// Same timezone: September's days are kept, 30 September (partly October in UTC) too.
		{"same timezone", "America/New_York", nyRollups, 7},
		// Back to UTC: September recounted from its hourly rollups.
		{"to UTC", "UTC", utcRollups, 6},
		// India: days begin at 18:30 UTC, so September's days cannot be recounted.
		{"to India", "Asia/Kolkata", nil, 0},
		// And to New York again, from the UTC rollups.
		{"to New York", "America/New_York", nyRollups, 7},
	}
	last := nyRollups
	for _, s := range steps {
		res, err := analytics.Rebuild(ctx, inUTC.st.Pool, mustZone(t, s.tz))
		if s.want == nil {
			if err == nil {
				t.Errorf("%s: rebuilt, want a refusal", s.name)
			}
			sameRollups(t, s.name+" (refused)", snapshot(t, inUTC), last)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got, want := snapshot(t, inUTC), maps.Clone(s.want)
		if s.name != "same timezone" {
			// The tenant rollups lose the days whose raw attempts are gone: no hourly rollup keeps
			// tenants to recount them from in another timezone. The other days are recounted.
			for _, table := range []string{"rollup_daily_tenant", "rollup_daily_tenant_model"} {
				if early := len(got[table]) - len(daysFrom(t, got[table], "2026-10-01")); early != 0 {
					t.Errorf("%s: %s keeps %d rows of days whose raw attempts are gone, want none", s.name, table, early)
				}
				got[table], want[table] = daysFrom(t, got[table], "2026-10-01"), daysFrom(t, want[table], "2026-10-01")
			}
			// The tenants' spend and blocks follow: they are what the tenant rollup now holds, in
			// blocks.
			for table, blocks := range map[string]string{
				"rollup_tenant_spend":  rollup.SpendFrom("rollup_daily_tenant r", "r.tenant"),
				"rollup_tenant_blocks": rollup.BlocksFromDailySQL,
			} {
				var differ int
				if err := inUTC.st.Pool.QueryRow(ctx, `SELECT count(*) FROM (
					((SELECT * FROM `+table+`) EXCEPT (`+blocks+`))
					UNION ALL ((`+blocks+`) EXCEPT (SELECT * FROM `+table+`))) x`).
					Scan(&differ); err != nil {
					t.Fatal(err)
				}
				if differ != 0 {
					t.Errorf("%s: %d rows of %s differ from the tenant rollup's days", s.name, differ, table)
				}
				delete(got, table)
				delete(want, table)
			}
		}
		sameRollups(t, s.name, got, want)
		if res.KeptDays != s.kept {
			t.Errorf("%s: kept %d days, want %d", s.name, res.KeptDays, s.kept)
		}
		last = snapshot(t, inUTC)
	}

	// Once September's hours by shape are pruned (rollup.Prune on October 12), its days cannot be
	// recounted in another timezone: refused, nothing changed. In the same timezone they are kept.
	if _, err := rollup.Prune(ctx, inUTC.st.Pool, time.Date(2026, 10, 12, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	pruned := snapshot(t, inUTC)
	if _, err := analytics.Rebuild(ctx, inUTC.st.Pool, time.UTC); err == nil || !strings.Contains(err.Error(), "pruned") {
		t.Errorf("to UTC after the prune: %v, want a refusal naming the pruned hours", err)
	}
	sameRollups(t, "to UTC after the prune (refused)", snapshot(t, inUTC), pruned)
	if _, err := analytics.Rebuild(ctx, inUTC.st.Pool, ny); err != nil {
		t.Fatal(err)
	}
	sameRollups(t, "same timezone after the prune", snapshot(t, inUTC), pruned)
}
