package web_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/analytics/gen"
	"github.com/ledgerd/ledgerd/app"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/pricing"
	"github.com/ledgerd/ledgerd/store"
)

var benchRecords = flag.Int("records", 200_000, "synthetic attempts BenchmarkPages loads")

// BenchmarkPages loads -records synthetic attempts (30 days of package synth's services, with its
// incidents) over three projects, then renders each page of the busiest one with its default
// filter (the last 30 days) and reports the p50 and p95 time to answer it, measured at the
// client over loopback. The pages read rollups only, so the time follows the number of series and
// days, not of records. For the figure at scale:
//
//	go test -run '^$' -bench Pages -benchtime 20x -timeout 3h ./web/ -args -records=10000000
func BenchmarkPages(b *testing.B) {
	ctx := context.Background()
	catalog, err := pricing.Load("")
	if err != nil {
		b.Fatal(err)
	}
	st := store.New(dbtest.New(b))
	loaded := time.Now()
	res, err := gen.Load(ctx, st, gen.Options{Records: *benchRecords, Seed: 42, End: now, Days: 30, Price: app.PriceFunc(catalog)})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.Pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d records in %v; busiest project %s has %d", *benchRecords, time.Since(loaded).Round(time.Second),
		res.Projects[0].Name, res.Records[0])
	key, err := st.CreateKey(ctx, res.Projects[0].Name)
	if err != nil {
		b.Fatal(err)
	}
	base, _, _ := serve(b, st, newClock(now), "")
	for _, path := range []string{"/", "/models", "/services", "/services?service=support-bot", "/cache",
		"/reliability", "/alerts", "/prices"} {
		b.Run(path, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				if err := page(base+path, key); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(ms(took[(len(took)-1)/2]), "p50-ms")
			b.ReportMetric(ms(took[(len(took)*95+99)/100-1]), "p95-ms")
		})
	}
}

func page(url, key string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
