package seed_test

import (
	"context"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/seed"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/pricing"
)

// TestLoad checks that Load copies exactly the records asked for, spread over the projects by
// their shares, and that the rebuilt rollups count every one of them.
func TestLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(dbtest.New(t))
	catalog, err := pricing.Load("")
	if err != nil {
		t.Fatal(err)
	}
	res, err := seed.Load(ctx, st, seed.Options{Records: 7_001, Seed: 1, End: time.Date(2026, 10, 20, 0, 0, 0, 0, time.UTC),
		Days: 10, Timezone: time.UTC, Price: ingest.CatalogPrice(catalog)})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range res.Records {
		total += n
	}
	var raw, hourly, daily int64
	if err := st.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM attempts), (SELECT sum(attempts) FROM rollup_hourly),
		(SELECT sum(attempts) FROM rollup_daily)`).Scan(&raw, &hourly, &daily); err != nil {
		t.Fatal(err)
	}
	if total != 7_001 || raw != 7_001 || hourly != 7_001 || daily != 7_001 {
		t.Errorf("records %v (total %d), raw %d, hourly %d, daily %d; want 7001 everywhere", res.Records, total, raw, hourly, daily)
	}
	if res.Records[0] <= res.Records[1] || res.Records[1] <= res.Records[2] {
		t.Errorf("records per project %v, want the first busiest", res.Records)
	}
}

// TestDemoRush checks that the demo ledger shows its Monday-morning rush where the Load page looks:
// on the rush Monday, acme-prod's busiest minute lies inside the rush, some of its attempts were
// refused with a 429, and the provider reported no request left; the Monday before is calm.
func TestDemoRush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.New(dbtest.New(t))
	catalog, err := pricing.Load("")
	if err != nil {
		t.Fatal(err)
	}
	end := time.Date(2026, 10, 20, 12, 0, 0, 0, time.UTC) // a Tuesday: the rush was 10-19, 09:00 to 09:40
	res, err := seed.Load(ctx, st, seed.Options{Records: 50_000, Seed: 3, End: end, Days: 10, Timezone: time.UTC,
		Price: ingest.CatalogPrice(catalog)})
	if err != nil {
		t.Fatal(err)
	}
	svc := analytics.New(analytics.Options{Pool: st.Pool, Now: func() time.Time { return end }})
	peaks, err := svc.Peaks(ctx, analytics.PeakFilter{ProjectID: res.Projects[0].ID, Org: "acme-prod",
		From: time.Date(2026, 10, 12, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 10, 20, 0, 0, 0, 0, time.UTC)}, "day")
	if err != nil {
		t.Fatal(err)
	}
	byDay := map[string]analytics.PeakGroup{}
	for _, g := range peaks.Groups {
		byDay[g.Key.Day] = g
	}
	rush, calm := byDay["2026-10-19"], byDay["2026-10-12"]
	from := time.Date(2026, 10, 19, 9, 0, 0, 0, time.UTC)
	if at := rush.Requests.Minute; at.Before(from) || !at.Before(from.Add(40*time.Minute)) {
		t.Errorf("the rush Monday's busiest minute is %s, not in the rush", at)
	}
	if rush.Requests.RateLimited == nil || *rush.Requests.RateLimited == 0 {
		t.Errorf("no 429 in the rush's busiest minute: %+v", rush.Requests)
	}
	if h := rush.Headroom.Requests; h == nil || h.Remaining != 0 {
		t.Errorf("lowest requests headroom on the rush Monday %+v, want none left", h)
	}
	if rush.Requests.Peak < 2*calm.Requests.Peak {
		t.Errorf("peak %d on the rush Monday against %d the Monday before; want at least twice", rush.Requests.Peak, calm.Requests.Peak)
	}
}
