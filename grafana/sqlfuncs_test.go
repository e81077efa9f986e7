package grafana_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ledgerd/ledgerd/internal/dbtest"
)

// TestHistQuantile checks hist_quantile on histograms whose answer is known: the geometric
// midpoint of the bucket holding the observation of nearest rank.
func TestHistQuantile(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	mid := bucketMidpoint
	cases := []struct {
		name string
		hist string // int8[] literal; array lower bound = bucket index
		q    float64
		want *float64
	}{
		{"median of one observation per bucket 1..10", "{1,1,1,1,1,1,1,1,1,1}", 0.5, ptr(mid(5))}, // rank 5 of 10
		{"median falls on the last of a run", "[20:22]={5,0,5}", 0.5, ptr(mid(20))},               // rank 5 is in bucket 20
		{"just past the median skips the empty bucket", "[20:22]={5,0,5}", 0.51, ptr(mid(22))},    // rank 6
		{"q=0 is the lowest observation", "[20:22]={0,3,1}", 0, ptr(mid(21))},                     // rank 1, leading empty bucket
		{"q=1 is the highest observation", "[20:22]={0,3,1}", 1, ptr(mid(22))},                    // rank n
		{"p99 of 100 observations", "[100:101]={99,1}", 0.99, ptr(mid(100))},                      // rank 99
		{"p99 past the 99th", "[100:101]={98,2}", 0.99, ptr(mid(101))},                            // rank 99 is in the second bucket
		{"bucket 0 holds latencies up to 1 ms", "[0:0]={4}", 0.5, ptr(mid(0))},                    // ≈0.98 ms
		{"empty histogram", "{}", 0.5, nil},                                                       // no observation
		{"all buckets empty", "[3:4]={0,0}", 0.5, nil},                                            // no observation
		{"q above 1", "[3:4]={1,1}", 1.5, nil},                                                    // out of range
		{"q below 0", "[3:4]={1,1}", -0.1, nil},                                                   // out of range
	}
	for _, c := range cases {
		var got *float64
		if err := pool.QueryRow(context.Background(), `SELECT hist_quantile($1::int8[], $2)`, c.hist, c.q).Scan(&got); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		switch {
		case (got == nil) != (c.want == nil):
			t.Errorf("%s: got %v, want %v", c.name, deref(got), deref(c.want))
		case got != nil && math.Abs(*got-*c.want) > *c.want*1e-12:
			t.Errorf("%s: got %v, want %v", c.name, *got, *c.want)
		}
	}
}

// TestHistQuantileOfLatencies builds histograms from real latencies with the writer's own
// functions (latency_bucket, hist_agg, hist_sum) and checks each percentile lies within 2.2% of the
// exact nearest-rank value.
func TestHistQuantileOfLatencies(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	var lat []int64
	for i := int64(1); i <= 997; i++ {
		lat = append(lat, 40+(i*i*7919)%30000) // spread over 40 ms to 30 s
	}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	for _, q := range []float64{0.5, 0.9, 0.99} {
		var got float64
		// Two halves merged with hist_sum, as dashboards merge rollup rows.
		err := pool.QueryRow(context.Background(), `SELECT hist_quantile(hist_sum(h), $2) FROM (
			SELECT hist_agg(latency_bucket(ms::int)) AS h FROM unnest($1::int8[]) WITH ORDINALITY AS t(ms, n) GROUP BY n % 2) halves`,
			lat, q).Scan(&got)
		if err != nil {
			t.Fatal(err)
		}
		exact := float64(sorted[int(math.Ceil(q*float64(len(sorted))))-1])
		if math.Abs(got-exact)/exact > 0.022 {
			t.Errorf("p%v = %.1f ms, exact %.0f ms: more than 2.2%% apart", q*100, got, exact)
		}
		if want := bucketMidpoint(latencyBucket(int64(exact))); math.Abs(got-want) > want*1e-12 {
			t.Errorf("p%v = %v, want the midpoint %v of the exact value's bucket", q*100, got, want)
		}
	}
}

// TestGrafanaRole checks what the ledgerd_grafana role may read: the rollups and the names they
// refer to, never API keys or raw attempts.
func TestGrafanaRole(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	cases := []struct {
		table   string
		allowed bool
	}{
		{"rollup_hourly", true},       // cost and reliability panels
		{"rollup_daily", true},        // per-day panels
		{"rollup_cache_hourly", true}, // cache panels
		{"series", true},              // names and filters
		{"projects", true},            // project variable
		{"settings", true},            // ledger timezone
		{"api_keys", false},           // key hashes stay private
		{"attempts", false},           // raw records stay private
		{"price_versions", false},     // not needed by any panel
	}
	for _, c := range cases {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL ROLE ledgerd_grafana`); err != nil {
				t.Fatalf("set role: %v", err)
			}
			_, err := tx.Exec(ctx, `SELECT count(*) FROM `+c.table)
			return err
		})
		var pgErr *pgconn.PgError
		denied := errors.As(err, &pgErr) && pgErr.Code == "42501"
		if err != nil && !denied {
			t.Fatalf("%s: %v", c.table, err)
		}
		if denied == c.allowed {
			t.Errorf("ledgerd_grafana reading %s: allowed %v, want %v", c.table, !denied, c.allowed)
		}
	}
	var login bool
	if err := pool.QueryRow(ctx, `SELECT rolcanlogin FROM pg_roles WHERE rolname = 'ledgerd_grafana'`).Scan(&login); err != nil {
		t.Fatal(err)
	}
	if login {
		t.Errorf("ledgerd_grafana can log in; it must be NOLOGIN")
	}
}

func ptr(f float64) *float64 { return &f }

func deref(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}
