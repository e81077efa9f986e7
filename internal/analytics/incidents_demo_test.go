package analytics_test

import (
	"context"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/seed"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/internal/synth"
	"github.com/ledgerd/ledgerd/pricing"
)

// TestDemoIncidents checks that the demo ledger (make demo's 200,000 records in one project)
// shows its incidents (synth.Demo): the outage of claude-sonnet-5-5 five days back from 09:30 to
// 11:30, answered by gpt-4o, over with a recovery time; support-bot's cache broken three days back
// at 16:00, still; the retry storm on claude-haiku-5-5 of the last 45 minutes, open.
func TestDemoIncidents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)
	catalog, err := pricing.Load("")
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(dbtest.New(t))
	res, err := seed.Load(ctx, st, seed.Options{Records: 200_000, Seed: 1, End: now, Days: synth.DemoDays,
		Projects: []string{"demo"}, Price: ingest.CatalogPrice(catalog)})
	if err != nil {
		t.Fatal(err)
	}
	s := analytics.New(analytics.Options{Pool: st.Pool, Now: func() time.Time { return now }})
	list, err := s.Incidents(ctx, analytics.Filter{ProjectID: res.Projects[0].ID, From: now.AddDate(0, 0, -30), To: now})
	if err != nil {
		t.Fatal(err)
	}
	day := func(back, h, m int) time.Time {
		d := now.AddDate(0, 0, -back)
		return time.Date(d.Year(), d.Month(), d.Day(), h, m, 0, 0, time.UTC)
	}
	var outage, cache, storm *analytics.Incident
	for i, in := range list.Incidents {
		switch {
		case in.Kind == analytics.KindErrorSpike && in.Model == synth.Sonnet55.Name && !in.StartedAt.Before(day(5, 9, 30)) && in.StartedAt.Before(day(5, 9, 35)):
			outage = &list.Incidents[i]
		case in.Kind == analytics.KindCacheBroken && in.Service == "support-bot" && in.Model == synth.Sonnet55.Name:
			cache = &list.Incidents[i]
		case in.Kind == analytics.KindRetryStorm && in.Model == synth.Haiku55.Name:
			storm = &list.Incidents[i]
		}
	}
	switch {
	case outage == nil:
		t.Errorf("no outage of sonnet-5-5 from 09:30 five days back in %s", js(list.Incidents))
	case outage.EndedAt == nil || outage.EndedAt.Before(day(5, 11, 25)) || outage.EndedAt.After(day(5, 11, 31)) ||
		outage.FallbackAnswers == 0 || outage.RecoverySeconds == nil:
		t.Errorf("outage %s: want it over by 11:30 with fallback answers and a recovery time", js(outage))
	}
	if cache == nil || !cache.StartedAt.Equal(day(3, 16, 0)) || cache.EndedAt != nil || cache.ExtraUSD == nil || *cache.ExtraUSD <= 0 {
		t.Errorf("support-bot's cache: %s, want broken since 16:00 three days back, open, with its extra cost", js(cache))
	}
	if storm == nil || storm.EndedAt != nil || storm.StartedAt.Before(now.Add(-46*time.Minute)) || storm.StartedAt.After(now.Add(-40*time.Minute)) {
		t.Errorf("haiku's storm: %s, want open since about 45 minutes ago", js(storm))
	}
	// "Last hour" shows the storm minute by minute: haiku's calls take one attempt or so before it,
	// two or more in every minute of it after the first (whose calls' retries fall in the next).
	sum, err := s.Summary(ctx, analytics.Filter{ProjectID: res.Projects[0].ID, From: now.Add(-time.Hour), To: now,
		Model: synth.Haiku55.Name}, analytics.ByMinute)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range sum.Groups {
		storm := g.Key.Minute.After(now.Add(-45 * time.Minute))
		if g.Key.Minute.Equal(now.Add(-45 * time.Minute)) {
			continue
		}
		if apc := g.AttemptsPerCall; apc != nil && g.Requests >= 3 && (*apc >= 2) != storm {
			t.Errorf("minute %v: %.2f attempts per call (storm %v)", g.Key.Minute, *apc, storm)
		}
	}
	t.Logf("%d incidents in the demo's 30 days", len(list.Incidents))
}
