package drills

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/embeddedpg"
	"github.com/ledgerd/ledgerd/internal/load"
	"github.com/ledgerd/ledgerd/internal/synth"
)

// startPG starts (or restarts) a private PostgreSQL server in dir on port, so the drill can stop
// it without touching the machine's shared server.
func startPG(t *testing.T, dir string, port uint32) *embeddedpg.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := embeddedpg.Start(ctx, embeddedpg.Options{Dir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop(context.Background()) })
	return pg
}

func freePort(t *testing.T) uint32 {
	t.Helper()
	_, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.ParseUint(port, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return uint32(p)
}

// responses collects what load.Observe reports.
type responses struct {
	mu  sync.Mutex
	all []load.Response
}

func (r *responses) observe(x load.Response) {
	r.mu.Lock()
	r.all = append(r.all, x)
	r.mu.Unlock()
}

// between returns the responses to requests sent in [from, to).
func (r *responses) between(from, to time.Time) []load.Response {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []load.Response
	for _, x := range r.all {
		if !x.Start.Before(from) && x.Start.Before(to) {
			out = append(out, x)
		}
	}
	return out
}

// TestDatabaseOutage stops ledgerd's PostgreSQL during load and starts it again. While it is down
// ledgerd must answer every ingest request 503 with Retry-After within a second (no request hangs);
// once it is back ledgerd must commit again without being restarted, and nothing it acknowledged
// may be lost.
func TestDatabaseOutage(t *testing.T) {
	// Not parallel: it times every answer during the outage, which other drills' load on the same
	// cores would distort.
	ctx := context.Background()
	dir, port := t.TempDir(), freePort(t)
	pg := startPG(t, dir, port)
	srv := startLedgerd(t, pg.URL(), "--migrate")
	pid := srv.pid()
	pool := connect(t, pg.URL())
	p := newProject(t, pool, "drill-outage")
	rss := sampleRSS(srv.pid)

	before, outage, after := 5*time.Second, pick(8*time.Second, 30*time.Second), pick(6*time.Second, 20*time.Second)
	var seen responses
	var acks ackBuffer
	done := goLoad(ctx, srv.url(), p, load.Options{Source: load.Live(synth.New(synth.Options{Seed: 13})),
		Duration: before + outage + after, Rate: 2000, Batch: 20, Concurrency: 32, Timeout: 30 * time.Second,
		Observe: seen.observe}, &acks)
	time.Sleep(before)
	if err := pg.Stop(ctx); err != nil {
		t.Fatalf("stop database: %v", err)
	}
	down := time.Now()
	time.Sleep(outage)
	up := time.Now()
	startPG(t, dir, port) // stopped by its own cleanup
	ready := time.Now()
	s := wait(t, done)

	r := &report{name: "database outage", sent: s}
	during := seen.between(down, up)
	var shed, other int
	var slowest time.Duration
	for _, x := range during {
		slowest = max(slowest, x.Took)
		switch {
		case x.Status == http.StatusServiceUnavailable && x.RetryAfter != "":
			shed++
		default:
			other++
			t.Errorf("during the outage a request got status %d (Retry-After %q) after %s; want 503 with Retry-After",
				x.Status, x.RetryAfter, x.Took)
		}
	}
	var recovered time.Duration = -1
	for _, x := range seen.between(ready, time.Now()) {
		if x.Status == http.StatusOK {
			recovered = x.Start.Add(x.Took).Sub(ready)
			break
		}
	}
	r.note("database stopped for %s (restart took %s); during it %d requests: %d answered 503 with Retry-After, %d otherwise",
		outage, ready.Sub(up).Round(time.Millisecond), len(during), shed, other)
	r.note("slowest answer during the outage %s; first commit %s after the database was back; ledgerd pid %d -> %d (no restart)",
		slowest.Round(time.Millisecond), recovered.Round(time.Millisecond), pid, srv.pid())
	r.note("max RSS %.0f MiB", rss.max())
	verify(t, pool, p.ID, r, acks.acks(t))
	if len(during) == 0 {
		t.Errorf("no request was sent during the outage")
	}
	if slowest >= time.Second {
		t.Errorf("slowest answer during the outage took %s, want under 1s", slowest)
	}
	if recovered < 0 {
		t.Errorf("no request committed after the database came back")
	}
	if srv.pid() != pid || !srv.running() {
		t.Errorf("ledgerd was restarted or died: pid %d, then %d", pid, srv.pid())
	}
}
