package drills

import (
	"context"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/load"
	"github.com/ledgerd/ledgerd/internal/synth"
)

// TestCrash kills ledgerd with SIGKILL three times while clients post records, restarting it each
// time. Clients retry what was not answered with the same records. Every acknowledged record must
// be in the ledger afterwards, and the retries of records whose commit survived but whose answer
// was lost must not count twice: rollup attempts = raw rows = distinct acknowledged records.
func TestCrash(t *testing.T) {
	t.Parallel()
	const kills = 3
	ctx := context.Background()
	dbURL := dbtest.NewURL(t)
	pool := connect(t, dbURL)
	p := newProject(t, pool, "drill-crash")
	srv := startLedgerd(t, dbURL)
	rss := sampleRSS(srv.pid)
	duration := pick(24*time.Second, 3*time.Minute)
	down := pick(500*time.Millisecond, 3*time.Second)

	var acks ackBuffer
	done := goLoad(ctx, srv.url(), p, load.Options{Source: load.Live(synth.New(synth.Options{Seed: 12})),
		Duration: duration, Rate: pick(3000.0, 5000.0), Batch: 50, Concurrency: 16}, &acks)
	var restarts []time.Duration
	for range kills {
		time.Sleep(duration / (kills + 1))
		srv.kill9()
		time.Sleep(down)
		start := time.Now()
		srv.start()
		restarts = append(restarts, time.Since(start).Round(time.Millisecond))
	}
	s := wait(t, done)
	r := &report{name: "crash", sent: s}
	r.note("kill -9: %d times during %s of load, down %s each; restart to ready took %v", kills, duration, down, restarts)
	r.note("answers lost to the kills and retried: %d network errors, %d retries; %d records answered as duplicates on retry",
		s.NetworkErrors, s.Retries, s.Duplicates)
	r.note("max RSS %.0f MiB", rss.max())
	verify(t, pool, p.ID, r, acks.acks(t))
}
