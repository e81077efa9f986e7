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

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/seed"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/pricing"
)

var (
	benchRecords = flag.Int("records", 200_000, "synthetic attempts BenchmarkPages loads")
	benchDB      = flag.String("bench-db", "", "URL of a database BenchmarkPages loads once and keeps, "+
		"reusing it when it already holds -records attempts (default: a scratch database)")
)

// BenchmarkPages loads -records synthetic attempts (30 days of package synth's services, with its
// incidents) over three projects, then renders each page of the busiest one with its default
// filter (the last 30 days) and reports the p50 and p95 time to answer it, measured at the
// client over loopback. The pages read rollups only, so the time follows the number of series and
// days, not of records. For the figure at scale:
//
//	go test -run '^$' -bench Pages -benchtime 20x -timeout 3h ./web/ -args -records=10000000
//
// With -bench-db=URL (an empty database of its own) the ledger is loaded once and kept.
func BenchmarkPages(b *testing.B) {
	ctx := context.Background()
	catalog, err := pricing.Load("")
	if err != nil {
		b.Fatal(err)
	}
	st, have := benchStore(b)
	loaded := time.Now()
	if have == 0 {
		if _, err := seed.Load(ctx, st, seed.Options{Records: *benchRecords, Seed: 42, End: now, Days: 30, Price: ingest.CatalogPrice(catalog)}); err != nil {
			b.Fatal(err)
		}
	} else if have != *benchRecords {
		b.Fatalf("-bench-db holds %d attempts, not %d: give it an empty database", have, *benchRecords)
	}
	if _, err := st.Pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		b.Fatal(err)
	}
	b.Logf("ledger of %d records ready in %v", *benchRecords, time.Since(loaded).Round(time.Second))
	key, err := st.CreateKey(ctx, "synth-a") // the busiest project
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

// benchStore is a scratch database, or the -bench-db one, with the attempts it holds.
func benchStore(b *testing.B) (*store.Store, int) {
	if *benchDB == "" {
		return store.New(dbtest.New(b)), 0
	}
	pool, n := dbtest.Kept(b, *benchDB)
	return store.New(pool), n
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
