package drills

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/load"
	"github.com/ledgerd/ledgerd/internal/synth"
)

// Bounds the burst drill holds ledgerd to.
const (
	// burstMaxRSSMiB bounds ledgerd's resident memory during the burst: queue and in-flight
	// bodies are bounded, so memory must not grow with the offered load.
	burstMaxRSSMiB = 512
	// writerQueueLimit is ingest.Options.QueueLimit's default: records waiting for a commit.
	writerQueueLimit = 50_000
)

// TestBurst offers 50 times the usual rate for 10 seconds (a 9am Monday) on top of the usual
// traffic. ledgerd must shed what it cannot take with 503 or 429 and Retry-After rather than queue
// without bound: its writer queue stays within its limit, its memory stays bounded, and every
// record it acknowledged is in the ledger once.
func TestBurst(t *testing.T) {
	// Not parallel: it measures memory and shedding, which other drills' load on the same cores
	// would distort.
	ctx := context.Background()
	dbURL := dbtest.NewURL(t)
	pool := connect(t, dbURL)
	p := newProject(t, pool, "drill-burst")
	srv := startLedgerd(t, dbURL)
	rss := sampleRSS(srv.pid)
	queue := make(chan float64, 1)
	stopQueue := make(chan struct{})
	go func() {
		var most float64
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			most = max(most, metric(srv.url(), "ledgerd_writer_queue_records"))
			select {
			case <-stopQueue:
				queue <- most
				return
			case <-tick.C:
			}
		}
	}()

	const usual = 1000.0 // records/s
	before, burst, after := 5*time.Second, 10*time.Second, pick(5*time.Second, 30*time.Second)
	var usualAcks, burstAcks ackBuffer
	var seen responses
	base := goLoad(ctx, srv.url(), p, load.Options{Source: load.Live(synth.New(synth.Options{Seed: 14})),
		Duration: before + burst + after, Rate: usual, Batch: 20, Concurrency: 8}, &usualAcks)
	time.Sleep(before)
	peak := goLoad(ctx, srv.url(), p, load.Options{Source: load.Live(synth.New(synth.Options{Seed: 15})),
		Duration: burst, Rate: 50 * usual, Batch: 20, Concurrency: 512, Observe: seen.observe}, &burstAcks)
	sb := wait(t, peak)
	su := wait(t, base)
	close(stopQueue)
	maxQueue := <-queue
	maxRSS := rss.max()

	var shed, noRetryAfter int
	for _, x := range seen.all {
		if x.Status == http.StatusServiceUnavailable || x.Status == http.StatusTooManyRequests {
			shed++
			if x.RetryAfter == "" {
				noRetryAfter++
			}
		}
	}
	total := su
	total.Sent += sb.Sent
	total.Accepted += sb.Accepted
	total.Duplicates += sb.Duplicates
	total.Failed += sb.Failed
	total.Rejected += sb.Rejected
	total.Requests += sb.Requests
	total.Retries += sb.Retries
	total.NetworkErrors += sb.NetworkErrors
	for k, v := range sb.Status {
		total.Status[k] += v
	}
	r := &report{name: "burst", sent: total}
	r.note("usual traffic %.0f records/s; burst offered %.0f records/s for %s with 512 clients: %d requests, %d shed (503/429), %d without Retry-After",
		usual, 50*usual, burst, sb.Requests, shed, noRetryAfter)
	r.note("burst acknowledged %d records (%.0f/s over %s); usual clients' ack p99 %s, burst clients' ack p99 %s",
		sb.Acknowledged, sb.AckRate(), sb.Elapsed.Round(time.Millisecond), su.Ack.P99.Round(time.Millisecond), sb.Ack.P99.Round(time.Millisecond))
	r.note("slowest 503/429 answer %s; max writer queue %.0f records (limit %d); max RSS %.0f MiB (bound %d)",
		sb.MaxShed.Round(time.Millisecond), maxQueue, writerQueueLimit, maxRSS, burstMaxRSSMiB)
	verify(t, pool, p.ID, r, append(usualAcks.acks(t), burstAcks.acks(t)...))
	if noRetryAfter > 0 {
		t.Errorf("%d shed answers carried no Retry-After", noRetryAfter)
	}
	if maxQueue > writerQueueLimit {
		t.Errorf("writer queue reached %.0f records, beyond its limit of %d", maxQueue, writerQueueLimit)
	}
	if maxRSS > burstMaxRSSMiB {
		t.Errorf("ledgerd's RSS reached %.0f MiB, beyond %d MiB", maxRSS, burstMaxRSSMiB)
	}
}
