package drills

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/load"
	"github.com/ledgerd/ledgerd/internal/synth"
	"github.com/ledgerd/ledgerd/money"
)

// TestStandbyReads runs ledgerd on a primary with its query API and dashboard reading from an
// asynchronous hot standby (--read-database-url), under ingest load. A client polls the summary
// and checks read-your-writes: the total it reads counts at least every record acknowledged
// before it asked. Midway the standby's replay is paused, so reads must go to the primary after
// the wait, and still be right. Afterwards the figures read on the standby equal the primary's,
// the summary served from the standby equals the ack log, and Grafana's role reads the standby.
func TestStandbyReads(t *testing.T) {
	parallelShort(t)
	ctx := context.Background()
	primary := dbtest.StartServer(t)
	standby := dbtest.StartStandby(t, primary, false)
	srv := startLedgerd(t, primary.URL(), "--migrate", "--read-database-url", standby.URL())
	pool, onStandby := connect(t, primary.URL()), connect(t, standby.URL())
	p := newProject(t, pool, "drill-standby")
	duration, pause := pick(10*time.Second, 2*time.Minute), pick(2*time.Second, 15*time.Second)

	var ackedSoFar atomic.Int64
	var acks ackBuffer
	done := goLoad(ctx, srv.url(), p, load.Options{Source: load.Live(synth.New(synth.Options{Seed: 31})),
		Duration: duration, Rate: pick(2000.0, 4000.0), Batch: 50, Concurrency: 8,
		Observe: func(x load.Response) {
			if x.Status == http.StatusOK {
				ackedSoFar.Add(int64(x.Records))
			}
		}}, &acks)
	reads := pollSummary(srv.url(), p.Key, &ackedSoFar)
	lag := watchMetrics(srv.url(), "ledgerd_standby_replay_lag_seconds", "ledgerd_standby_replay_lag_bytes")
	time.Sleep(duration * 2 / 5)
	if _, err := onStandby.Exec(ctx, `SELECT pg_wal_replay_pause()`); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	time.Sleep(pause)
	if _, err := onStandby.Exec(ctx, `SELECT pg_wal_replay_resume()`); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	s := wait(t, done)
	all := reads.stop()
	maxLag := lag.stop()

	// Fold what is pending, as ledgerd does before a read, so both servers hold the final rollups.
	foldPending(ctx, t, pool)
	waitReplayed(t, pool, onStandby)
	onPrimaryTotals, err := readTotals(ctx, pool, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	onStandbyTotals, err := readTotals(ctx, onStandby, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if onStandbyTotals != onPrimaryTotals {
		t.Errorf("figures read on the standby differ from the primary's:\n standby %+v\n primary %+v", onStandbyTotals, onPrimaryTotals)
	}
	acked := acks.acks(t)
	truth := load.Sum(acked)
	var sum summaryTotal
	if status, body := get(srv.url()+"/v1/summary", p.Key); status != http.StatusOK || json.Unmarshal(body, &sum) != nil {
		t.Fatalf("summary after the run: %d %s", status, body)
	}
	if sum.Total.Attempts != truth.Records || int64(sum.Total.CostUSD) != truth.CostNanos {
		t.Errorf("summary read through the standby: %d attempts costing %s; the ack log says %d costing %s",
			sum.Total.Attempts, sum.Total.CostUSD, truth.Records, money.Nanos(truth.CostNanos))
	}
	grafana := grafanaOnStandby(t, pool, onStandby, standby.URL(), p.ID)
	if grafana != truth.Records {
		t.Errorf("Grafana's role read %d attempts on the standby, want %d", grafana, truth.Records)
	}

	m := metrics(srv.url())
	during := readsBetween(all, paused, resumed)
	var missed, failed int
	for _, x := range all {
		if x.status != http.StatusOK {
			failed++
		} else if x.attempts < x.acked {
			missed++
			t.Errorf("read-your-writes: a summary asked at %s counted %d attempts, %d had been acknowledged before",
				x.at.Format(time.TimeOnly), x.attempts, x.acked)
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d summary reads failed", failed, len(all))
	}
	fromStandby, lagging := m[`ledgerd_reads_total{reason="replayed",server="standby"}`], m[`ledgerd_reads_total{reason="lagging",server="primary"}`]
	waits, waitSum := m["ledgerd_standby_wait_seconds_count"], m["ledgerd_standby_wait_seconds_sum"]
	r := &report{name: "standby reads", sent: s}
	r.note("summary read every 50 ms during ingest: %d reads, %d counted fewer records than acknowledged before them, %d failed; took %s",
		len(all), missed, failed, latencies(all))
	r.note("standby replay paused for %s: %d reads then took %s (the wait, then the primary)", pause, len(during), latencies(during))
	r.note("read connections: standby %.0f (replayed in time; waits mean %.2f ms), primary %.0f (standby lagging past the wait), %.0f (standby unreachable or its check failed)",
		fromStandby, 1000*waitSum/max(waits, 1), lagging, m[`ledgerd_reads_total{reason="standby_error",server="primary"}`])
	r.note("replay lag in /metrics, read every 250 ms: at most %.3f s and %.0f bytes (replay paused %s)",
		maxLag["ledgerd_standby_replay_lag_seconds"], maxLag["ledgerd_standby_replay_lag_bytes"], pause)
	r.note("figures on the standby equal the primary's (raw and rollups); summary through the standby %d attempts, %s; Grafana's role on the standby %d attempts",
		sum.Total.Attempts, sum.Total.CostUSD, grafana)
	verify(t, pool, p.ID, r, acked)
	if fromStandby == 0 || lagging == 0 {
		t.Errorf("reads went to the standby %v times and to the primary for lag %v times; want both", fromStandby, lagging)
	}
}

// summaryTotal is the part of GET /v1/summary the drills read.
type summaryTotal struct {
	Total struct {
		Attempts int64       `json:"attempts"`
		CostUSD  money.Nanos `json:"cost_usd"`
	} `json:"total"`
}

// summaryRead is one GET /v1/summary: when it was asked, how many records had been acknowledged
// before, what it counted, and how long it took.
type summaryRead struct {
	at       time.Time
	took     time.Duration
	status   int
	acked    int64
	attempts int64
}

// summaryPoller reads the summary every 50 ms until stopped.
type summaryPoller struct {
	mu    sync.Mutex
	reads []summaryRead
	quit  chan struct{}
	done  chan struct{}
}

func pollSummary(base, key string, acked *atomic.Int64) *summaryPoller {
	p := &summaryPoller{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			x := summaryRead{at: time.Now(), acked: acked.Load()}
			status, body := get(base+"/v1/summary", key)
			x.took, x.status = time.Since(x.at), status
			var sum summaryTotal
			if status == http.StatusOK && json.Unmarshal(body, &sum) == nil {
				x.attempts = sum.Total.Attempts
			}
			p.mu.Lock()
			p.reads = append(p.reads, x)
			p.mu.Unlock()
			select {
			case <-p.quit:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return p
}

func (p *summaryPoller) stop() []summaryRead {
	close(p.quit)
	<-p.done
	return p.reads
}

func readsBetween(all []summaryRead, from, to time.Time) []summaryRead {
	var out []summaryRead
	for _, x := range all {
		if !x.at.Before(from) && x.at.Before(to) {
			out = append(out, x)
		}
	}
	return out
}

// latencies formats the p50, p99 and maximum time of reads.
func latencies(reads []summaryRead) string {
	if len(reads) == 0 {
		return "nothing"
	}
	d := make([]time.Duration, len(reads))
	for i, x := range reads {
		d[i] = x.took
	}
	slices.Sort(d)
	q := func(f float64) time.Duration {
		return d[min(len(d)-1, int(f*float64(len(d))))].Round(100 * time.Microsecond)
	}
	return fmt.Sprintf("p50 %s, p99 %s, max %s", q(0.5), q(0.99), d[len(d)-1].Round(100*time.Microsecond))
}

// waitReplayed waits until the standby has replayed everything the primary has written.
func waitReplayed(t *testing.T, primary, standby *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	var lsn string
	if err := primary.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var ok bool
		if err := standby.QueryRow(ctx, `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn`, lsn).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby did not replay %s within a minute", lsn)
		}
	}
}

// grafanaOnStandby gives Grafana a login in ledgerd_grafana on the primary, as grafana/README.md
// says, and returns the attempts that login reads from the hourly rollup on the standby.
func grafanaOnStandby(t *testing.T, primary, standby *pgxpool.Pool, standbyURL string, projectID int64) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := primary.Exec(ctx, `CREATE USER grafana IN ROLE ledgerd_grafana PASSWORD 'drill'`); err != nil {
		t.Fatal(err)
	}
	waitReplayed(t, primary, standby)
	cfg, err := pgx.ParseConfig(standbyURL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Password = "grafana", "drill"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("Grafana's login on the standby: %v", err)
	}
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, `SELECT coalesce(sum(attempts), 0)::int8 FROM rollup_hourly WHERE project_id = $1`, projectID).Scan(&n); err != nil {
		t.Fatalf("Grafana's role reading the standby: %v", err)
	}
	return n
}

// TestFailoverSynchronous runs ledgerd against a primary with a synchronous standby, through a
// multi-host DATABASE_URL with target_session_attrs=read-write, kills the primary with SIGKILL
// under load and promotes the standby. Meanwhile ledgerd must answer 503 with Retry-After; then
// reconnect without a restart; every record it acknowledged must be there once; the alert that
// fired before must not page again, and alert evaluation must resume on the new primary.
func TestFailoverSynchronous(t *testing.T) { failover(t, true) }

// TestFailoverAsynchronous is the same drill with an asynchronous standby, which may lack what the
// primary acknowledged last: it reports how many acknowledged records were lost and how far the
// standby trailed, and checks that what survived is consistent (no record twice, rollups equal to
// the raw rows, every row's series the one it was sent with).
func TestFailoverAsynchronous(t *testing.T) { failover(t, false) }

func failover(t *testing.T, sync bool) {
	parallelShort(t)
	ctx := context.Background()
	name := map[bool]string{true: "failover, synchronous standby", false: "failover, asynchronous standby"}[sync]
	primary := dbtest.StartServer(t)
	standby := dbtest.StartStandby(t, primary, sync)
	dbURL := dbtest.MultiHostURL("read-write", primary, standby)
	pages := newPager(t)
	srv := startLedgerd(t, dbURL, "--migrate", "--config", alertConfig(t, pages.url()))
	pid := srv.pid()
	pool := connect(t, dbURL)
	p := newProject(t, pool, "drill-failover")
	leader := watchLeader(srv)
	wal := watchWAL(connect(t, primary.URL()))

	before, down, after := pick(4*time.Second, 20*time.Second), pick(2*time.Second, 10*time.Second), pick(5*time.Second, 30*time.Second)
	const slack = 10 * time.Second // how much longer the promotion may wait for an answer sent after the kill
	var seen responses
	var acks ackBuffer
	done := goLoad(ctx, srv.url(), p, load.Options{Source: load.Live(synth.New(synth.Options{Seed: 21})),
		Duration: before + down + slack + after, Rate: pick(2000.0, 3000.0), Batch: 20, Concurrency: 32, Timeout: 30 * time.Second,
		Observe: seen.observe}, &acks)
	time.Sleep(before)
	pages.waitFiring(t, 20*time.Second)
	trail := wal.stop()
	if err := primary.Kill(); err != nil {
		t.Fatalf("kill the primary: %v", err)
	}
	killed := time.Now()
	time.Sleep(down)
	// On a loaded machine the clients may still be waiting on answers to requests sent before the
	// kill: hold the promotion until a request sent after the kill was answered, so the drill
	// always sees what ledgerd answers while no primary is up.
	for deadline := time.Now().Add(slack); len(seen.between(killed, time.Now())) == 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	// The standby takes writes from some moment inside Promote: requests sent from its start on
	// may be answered by the new primary, so "while no primary is up" ends there.
	promoting := time.Now()
	dbtest.Promote(t, standby)
	promoted := time.Now()
	s := wait(t, done)
	leads := leader.stop()

	r := &report{name: name, sent: s}
	during := seen.between(killed, promoting)
	var shed int
	var slowest time.Duration
	for _, x := range during {
		slowest = max(slowest, x.Took)
		if x.Status == http.StatusServiceUnavailable && x.RetryAfter != "" {
			shed++
			continue
		}
		t.Errorf("between the kill and the promotion a request got status %d (Retry-After %q) after %s; want 503 with Retry-After",
			x.Status, x.RetryAfter, x.Took)
	}
	recovered := time.Duration(-1)
	for _, x := range seen.between(promoted, time.Now()) {
		if x.Status == http.StatusOK {
			recovered = x.Start.Add(x.Took).Sub(promoted)
			break
		}
	}
	lost, back := leads.lostAndBack(killed, promoted)
	r.note("primary killed with SIGKILL under %.0f records/s, standby promoted %s later; meanwhile %d requests: %d answered 503 with Retry-After, slowest in %s",
		s.AckRate(), down, len(during), shed, slowest.Round(time.Millisecond))
	r.note("first commit %s after the promotion; ledgerd pid %d -> %d (no restart)", recovered.Round(time.Millisecond), pid, srv.pid())
	r.note("alert evaluation: leader lost %s after the kill, leading again %s after the promotion (interval 1s); pages of the alert that fired before the kill: %d",
		lost.Round(10*time.Millisecond), back.Round(10*time.Millisecond), pages.count())
	acked := acks.acks(t)
	if sync {
		verify(t, pool, p.ID, r, acked)
		if n := pages.count(); n != 1 {
			t.Errorf("the alert paged %d times, want once", n)
		}
	} else {
		lostRecords := verifyConsistent(t, pool, p.ID, r, acked)
		perRecord := float64(trail.walBytes) / float64(max(trail.acked(seen.between(trail.start, trail.end)), 1))
		r.note("lost: %d acknowledged records; the standby trailed the primary's WAL by at most %d bytes (%d at the last sample before the kill, %.0f WAL bytes a record: about %.0f records at most)",
			lostRecords, trail.maxBehind, trail.lastBehind, perRecord, float64(trail.maxBehind)/max(perRecord, 1))
		t.Log(r.String())
	}
	if len(during) == 0 {
		t.Errorf("no request was sent between the kill and the promotion")
	}
	if recovered < 0 {
		t.Errorf("no request committed after the promotion")
	}
	if srv.pid() != pid || !srv.running() {
		t.Errorf("ledgerd was restarted or died: pid %d, then %d", pid, srv.pid())
	}
	if back < 0 {
		t.Errorf("alert evaluation did not resume on the new primary")
	}
}

// verifyConsistent checks a ledger that may lack acknowledged records (after a failover to an
// asynchronous standby): nothing stored twice or never acknowledged, every rollup equal to the raw
// rows, every row's series existing and naming the provider and model the record was sent with.
// It logs the report and returns how many acknowledged records are missing.
func verifyConsistent(t *testing.T, pool *pgxpool.Pool, projectID int64, r *report, acks []load.Ack) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	foldPending(ctx, t, pool)
	got, err := readLedger(ctx, pool, projectID, acks)
	if err != nil {
		t.Fatal(err)
	}
	r.truth, r.got = load.Sum(acks), got
	var orphans, wrong int64
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TEMPORARY TABLE sent (attempt_id text, started_at timestamptz, provider text, model text) ON COMMIT DROP`); err != nil {
			return err
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"sent"}, []string{"attempt_id", "started_at", "provider", "model"},
			pgx.CopyFromSlice(len(acks), func(i int) ([]any, error) {
				return []any{acks[i].AttemptID, acks[i].StartedAt, acks[i].Provider, acks[i].Model}, nil
			})); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE s.id IS NULL),
			count(*) FILTER (WHERE s.id IS NOT NULL AND (s.provider, s.model) IS DISTINCT FROM (x.provider, x.model))
			FROM attempts a JOIN sent x ON x.attempt_id = a.attempt_id AND x.started_at = a.started_at
			LEFT JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id
			WHERE a.project_id = $1`, projectID).Scan(&orphans, &wrong)
	})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		what      string
		got, want int64
	}{
		{"stored records never acknowledged", got.rows - got.present, 0},
		{"raw rows vs distinct identities (duplicated rows)", got.rows, got.distinctIDs},
		{"rows whose series does not exist", orphans, 0},
		{"rows whose series names another provider or model", wrong, 0},
		{"hourly rollup attempts vs raw rows", got.hourlyAttempts, got.rows},
		{"daily rollup attempts vs raw rows", got.dailyAttempts, got.rows},
		{"hourly latency histogram count vs raw rows", got.histAttempts, got.rows},
		{"hourly billed cost vs raw (nanos)", got.hourlyCost, got.rawCost},
		{"daily billed cost vs raw (nanos)", got.dailyCost, got.rawCost},
		{"hourly unpriced vs raw", got.hourlyUnpriced, got.rawUnpriced},
		{"daily input tokens vs raw", got.dailyInput, got.rawInput},
		{"hourly latency sum vs raw", got.hourlyLatencySum, got.rawLatencySum},
		{"cache rollup calls vs raw cache rows", got.cacheCalls, got.rawCacheRows},
		{"records the client gave up on", r.sent.Failed, 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %s: got %d, want %d", r.name, c.what, c.got, c.want)
		}
	}
	return r.truth.Records - got.present
}

// walTrail samples, every 100 ms, how far the primary's standby trails it: WAL the primary has
// written that the standby has not yet written itself, which a crash of the primary takes with it.
type walTrail struct {
	pool       *pgxpool.Pool
	start, end time.Time
	startLSN   int64
	walBytes   int64 // WAL written from start to the last sample
	maxBehind  int64
	lastBehind int64
	quit, done chan struct{}
}

func watchWAL(pool *pgxpool.Pool) *walTrail {
	w := &walTrail{pool: pool, start: time.Now(), quit: make(chan struct{}), done: make(chan struct{})}
	const sampleSQL = `SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::int8,
		coalesce((SELECT max(pg_current_wal_lsn() - write_lsn) FROM pg_stat_replication), 0)::int8`
	_ = pool.QueryRow(context.Background(), sampleSQL).Scan(&w.startLSN, &w.lastBehind)
	go func() {
		defer close(w.done)
		for {
			var lsn, behind int64
			if pool.QueryRow(context.Background(), sampleSQL).Scan(&lsn, &behind) == nil {
				w.walBytes, w.lastBehind, w.maxBehind, w.end = lsn-w.startLSN, behind, max(w.maxBehind, behind), time.Now()
			}
			select {
			case <-w.quit:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *walTrail) stop() *walTrail {
	close(w.quit)
	<-w.done
	return w
}

// acked counts the records acknowledged by responses.
func (w *walTrail) acked(rs []load.Response) int64 {
	var n int64
	for _, x := range rs {
		if x.Status == http.StatusOK {
			n += int64(x.Records)
		}
	}
	return n
}

// pager is a webhook receiver that counts the pages (firing notifications) it gets.
type pager struct {
	srv   *httptest.Server
	mu    sync.Mutex
	pages map[string]int // by alert fingerprint
	fired chan struct{}  // closed at the first page
}

func newPager(t *testing.T) *pager {
	p := &pager{pages: map[string]int{}, fired: make(chan struct{})}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n struct {
			Status      string `json:"status"`
			Fingerprint string `json:"fingerprint"`
		}
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if n.Status == "firing" {
			p.mu.Lock()
			if len(p.pages) == 0 {
				close(p.fired)
			}
			p.pages[n.Fingerprint]++
			p.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *pager) url() string { return p.srv.URL + "/hook" }

// count is the number of pages, all alerts together.
func (p *pager) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.pages {
		n += c
	}
	return n
}

func (p *pager) waitFiring(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case <-p.fired:
	case <-time.After(within):
		t.Fatalf("no alert paged within %s", within)
	}
}

// alertConfig writes a configuration whose one rule fires once a project's spend today passes a
// cent, evaluated every second, paging hook.
func alertConfig(t *testing.T, hook string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledgerd.yaml")
	cfg := fmt.Sprintf("alerts:\n  interval: 1s\n  rules:\n    - {name: spend, kind: daily_spend, threshold_usd: \"0.01\", projection: false}\n"+
		"receivers:\n  - {name: pager, webhook: {url: %q}}\n", hook)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// leaderWatch polls ledgerd_alert_leader of each process every 50 ms and keeps its changes.
type leaderWatch struct {
	procs   []*proc
	mu      sync.Mutex
	changes []leaderChange
	quit    chan struct{}
	done    chan struct{}
}

// leaderChange is a process starting (leads) or ceasing to report that it evaluates alerts.
type leaderChange struct {
	at    time.Time
	proc  int
	leads bool
}

func watchLeader(procs ...*proc) *leaderWatch {
	w := &leaderWatch{procs: procs, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		state := make([]bool, len(procs))
		for {
			for i, p := range procs {
				leads := metric(p.url(), "ledgerd_alert_leader") == 1
				if leads != state[i] {
					state[i] = leads
					w.mu.Lock()
					w.changes = append(w.changes, leaderChange{time.Now(), i, leads})
					w.mu.Unlock()
				}
			}
			select {
			case <-w.quit:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *leaderWatch) stop() *leaderWatch {
	close(w.quit)
	<-w.done
	return w
}

// leader returns the process leading now (-1 when none).
func (w *leaderWatch) leader() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	leads := map[int]bool{}
	for _, c := range w.changes {
		leads[c.proc] = c.leads
	}
	for i := range w.procs {
		if leads[i] {
			return i
		}
	}
	return -1
}

// leadsAfter returns how long after t a process other than except first reported leading (-1
// when none did).
func (w *leaderWatch) leadsAfter(t time.Time, except int) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.changes {
		if c.at.After(t) && c.leads && c.proc != except {
			return c.at.Sub(t)
		}
	}
	return -1
}

// lostAndBack returns, for a single process, how long after killed it stopped leading and how long
// after promoted it led again (-1 when it did not).
func (w *leaderWatch) lostAndBack(killed, promoted time.Time) (lost, back time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	lost, back = -1, -1
	for _, c := range w.changes {
		switch {
		case c.at.After(killed) && !c.leads && lost < 0:
			lost = c.at.Sub(killed)
		case c.at.After(promoted) && c.leads && back < 0:
			back = c.at.Sub(promoted)
		}
	}
	return lost, back
}

// metrics reads every sample of ledgerd's /metrics, keyed as exposed: name{label="value",...}.
func metrics(base string) map[string]float64 {
	out := map[string]float64{}
	status, body := get(base+"/metrics", "")
	if status != http.StatusOK {
		return out
	}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// metricWatch keeps the largest value of some unlabelled gauges, read every 250 ms.
type metricWatch struct {
	mu   sync.Mutex
	max  map[string]float64
	quit chan struct{}
	done chan struct{}
}

func watchMetrics(base string, names ...string) *metricWatch {
	w := &metricWatch{max: map[string]float64{}, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			m := metrics(base)
			w.mu.Lock()
			for _, n := range names {
				w.max[n] = max(w.max[n], m[n])
			}
			w.mu.Unlock()
			select {
			case <-w.quit:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *metricWatch) stop() map[string]float64 {
	close(w.quit)
	<-w.done
	return w.max
}
