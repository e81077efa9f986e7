package seed_test

import (
	"context"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/ingest"
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
