package drills

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/load"
	"github.com/ledgerd/ledgerd/internal/rollup"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/pricing"
)

// ledgerdBin is the ledgerd binary TestMain builds once for every drill.
var ledgerdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ledgerd-drills-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "drills:", err)
		os.Exit(1)
	}
	ledgerdBin = filepath.Join(dir, "ledgerd")
	build := exec.Command(goTool(), "build", "-o", ledgerdBin, "../../cmd/ledgerd")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "drills: build ledgerd:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}

// long tells whether the long versions of the drills were asked for (LEDGERD_DRILLS=long).
func long() bool { return os.Getenv("LEDGERD_DRILLS") == "long" }

// pick returns the short or the long variant of a drill parameter.
func pick[T any](short, long_ T) T {
	if long() {
		return long_
	}
	return short
}

// parallelShort lets the short version of a drill run beside the other parallel drills, to keep
// `go test ./...` short, and runs the long version alone, so that the figures `make drills` prints
// are not those of a machine shared with other drills.
func parallelShort(t *testing.T) {
	if !long() {
		t.Parallel()
	}
}

// freeAddr returns a 127.0.0.1 address with a port nobody listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// proc is a ledgerd process the drill can start, kill -9 and restart on the same address.
type proc struct {
	t      *testing.T
	dbURL  string
	addr   string
	extra  []string
	log    string
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// startLedgerd runs `ledgerd serve` on a free port against dbURL and waits until it is ready.
func startLedgerd(t *testing.T, dbURL string, extra ...string) *proc {
	t.Helper()
	p := &proc{t: t, dbURL: dbURL, addr: freeAddr(t), extra: extra, log: filepath.Join(t.TempDir(), "ledgerd.log")}
	p.start()
	t.Cleanup(func() {
		if p.running() {
			p.stop()
		}
	})
	return p
}

func (p *proc) url() string { return "http://" + p.addr }

func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// start (re)starts the process on its address and waits for /readyz.
func (p *proc) start() {
	p.t.Helper()
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	// Reads wait for the rollups to count every acknowledged record, however slow a loaded machine
	// folds: the drills check what they wrote.
	args := append([]string{"serve", "--listen", p.addr, "--database-url", p.dbURL, "--log-level", "warn",
		"--fold-wait", "1m"}, p.extra...)
	cmd := exec.Command(ledgerdBin, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+p.dbURL)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	exited := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that started the child exits: keep this goroutine on its
		// thread until the child is gone.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	if err := <-started; err != nil {
		logf.Close()
		p.t.Fatalf("start ledgerd: %v", err)
	}
	p.mu.Lock()
	p.cmd, p.exited = cmd, exited
	p.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			p.t.Fatalf("ledgerd exited during start:\n%s", p.logTail())
		default:
		}
		if status, _ := get(p.url()+"/readyz", ""); status == http.StatusOK {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.t.Fatalf("ledgerd not ready after 30s:\n%s", p.logTail())
}

// kill9 kills the process with SIGKILL and waits for it to be gone.
func (p *proc) kill9() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// stop asks the process to shut down (SIGTERM) and kills it after 20 s.
func (p *proc) stop() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		p.kill9()
	}
}

func (p *proc) logTail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// get fetches a URL with an optional API key and returns the status and body (status 0 when no
// answer came within 5 s).
func get(url, key string) (int, []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// project is a project with a key, in a database the drill can inspect.
type project struct {
	ID  int64
	Key string
}

func newProject(t *testing.T, pool *pgxpool.Pool, name string) project {
	t.Helper()
	ctx := context.Background()
	st := store.New(pool)
	key, err := st.CreateKey(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.ProjectByName(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return project{ID: p.ID, Key: key}
}

func connect(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// ackBuffer collects an ack log in memory.
type ackBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (a *ackBuffer) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.buf.Write(p)
}

func (a *ackBuffer) acks(t *testing.T) []load.Ack {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	acks, err := load.ReadAcks(bytes.NewReader(a.buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return acks
}

// rssSampler records the largest resident set of a process (VmRSS in /proc/PID/status) every
// 50 ms; pid is asked each time, so restarts are followed.
type rssSampler struct {
	maxKiB int64
	stop   chan struct{}
	done   chan struct{}
}

func sampleRSS(pid func() int) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if kib := vmRSS(pid()); kib > s.maxKiB {
				s.maxKiB = kib
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// max stops sampling and returns the largest RSS seen, in MiB.
func (s *rssSampler) max() float64 {
	close(s.stop)
	<-s.done
	return float64(s.maxKiB) / 1024
}

func vmRSS(pid int) int64 {
	if pid == 0 {
		return 0
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			v, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return v
		}
	}
	return 0
}

// metric reads one unlabelled sample from ledgerd's /metrics (0 when absent).
func metric(baseURL, name string) float64 {
	status, body := get(baseURL+"/metrics", "")
	if status != http.StatusOK {
		return 0
	}
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return 0
}

// ledgerTotals is what the database holds for one project: raw rows and both rollups.
type ledgerTotals struct {
	rows, distinctIDs, present                    int64
	hourlyAttempts, dailyAttempts                 int64
	hourlyRequests, dailyRequests                 int64
	rawCost, hourlyCost, dailyCost                int64
	rawUnpriced, hourlyUnpriced, dailyUnpriced    int64
	rawInput, hourlyInput, dailyInput             int64
	rawCacheRows, cacheCalls                      int64
	rawCacheWriteCalls, hourlyCacheWriteCalls     int64
	rawCacheReadCalls, hourlyCacheReadCalls       int64
	rawLatencySum, hourlyLatencySum, histAttempts int64
}

// Queries that read a project's ledger back; $1 is the project id.
const (
	rawTotalsSQL = `SELECT count(*), count(DISTINCT (attempt_id, started_at)), count(*) FILTER (WHERE attempt_no = 1),
		coalesce(sum(cost_nanos), 0), count(*) FILTER (WHERE cost_nanos IS NULL), coalesce(sum(input_tokens), 0),
		count(*) FILTER (WHERE cache_write_tokens > 0 OR cache_read_tokens > 0 OR prompt_hash IS NOT NULL),
		count(*) FILTER (WHERE cache_write_tokens > 0), count(*) FILTER (WHERE cache_read_tokens > 0),
		coalesce(sum(latency_ms), 0)
		FROM attempts WHERE project_id = $1`
	hourlyTotalsSQL = `SELECT coalesce(sum(attempts), 0), coalesce(sum(requests), 0), coalesce(sum(cost_nanos), 0),
		coalesce(sum(unpriced_attempts), 0), coalesce(sum(input_tokens), 0), coalesce(sum(cache_write_calls), 0),
		coalesce(sum(cache_read_calls), 0), coalesce(sum(latency_sum_ms), 0),
		coalesce((SELECT sum(v) FROM rollup_hourly r2, unnest(r2.latency_hist) v WHERE r2.project_id = $1), 0)
		FROM rollup_hourly WHERE project_id = $1`
	dailyTotalsSQL = `SELECT coalesce(sum(attempts), 0), coalesce(sum(requests), 0), coalesce(sum(cost_nanos), 0),
		coalesce(sum(unpriced_attempts), 0), coalesce(sum(input_tokens), 0)
		FROM rollup_daily WHERE project_id = $1`
	cacheTotalsSQL = `SELECT coalesce(sum(calls), 0) FROM rollup_cache_hourly WHERE project_id = $1`
	createAckedSQL = `CREATE TEMPORARY TABLE acked (attempt_id text NOT NULL, started_at timestamptz NOT NULL) ON COMMIT DROP`
	presentSQL     = `SELECT count(*) FROM acked a WHERE EXISTS (SELECT 1 FROM attempts t
		WHERE t.project_id = $1 AND t.attempt_id = a.attempt_id AND t.started_at = a.started_at)`
)

// readLedger reads a project's totals and counts how many of the acknowledged records it holds.
func readLedger(ctx context.Context, pool *pgxpool.Pool, projectID int64, acks []load.Ack) (ledgerTotals, error) {
	l, err := readTotals(ctx, pool, projectID)
	if err != nil {
		return l, err
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, createAckedSQL); err != nil {
			return err
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"acked"}, []string{"attempt_id", "started_at"},
			pgx.CopyFromSlice(len(acks), func(i int) ([]any, error) {
				return []any{acks[i].AttemptID, acks[i].StartedAt}, nil
			})); err != nil {
			return err
		}
		return tx.QueryRow(ctx, presentSQL, projectID).Scan(&l.present)
	})
	if err != nil {
		return l, fmt.Errorf("look up acknowledged records: %w", err)
	}
	return l, nil
}

// readTotals reads a project's raw and rollup totals with read-only queries, which a standby
// answers too.
func readTotals(ctx context.Context, pool *pgxpool.Pool, projectID int64) (ledgerTotals, error) {
	var l ledgerTotals
	var rawRequests int64
	if err := pool.QueryRow(ctx, rawTotalsSQL, projectID).Scan(&l.rows, &l.distinctIDs, &rawRequests, &l.rawCost,
		&l.rawUnpriced, &l.rawInput, &l.rawCacheRows, &l.rawCacheWriteCalls, &l.rawCacheReadCalls, &l.rawLatencySum); err != nil {
		return l, fmt.Errorf("read raw totals: %w", err)
	}
	if err := pool.QueryRow(ctx, hourlyTotalsSQL, projectID).Scan(&l.hourlyAttempts, &l.hourlyRequests, &l.hourlyCost,
		&l.hourlyUnpriced, &l.hourlyInput, &l.hourlyCacheWriteCalls, &l.hourlyCacheReadCalls, &l.hourlyLatencySum, &l.histAttempts); err != nil {
		return l, fmt.Errorf("read hourly rollup: %w", err)
	}
	if err := pool.QueryRow(ctx, dailyTotalsSQL, projectID).Scan(&l.dailyAttempts, &l.dailyRequests, &l.dailyCost,
		&l.dailyUnpriced, &l.dailyInput); err != nil {
		return l, fmt.Errorf("read daily rollup: %w", err)
	}
	if err := pool.QueryRow(ctx, cacheTotalsSQL, projectID).Scan(&l.cacheCalls); err != nil {
		return l, fmt.Errorf("read cache rollup: %w", err)
	}
	return l, nil
}

// report is a drill's figures: the truth from the ack log, the ledger, and notes of its own.
type report struct {
	name  string
	sent  load.Summary
	truth load.Totals
	got   ledgerTotals
	notes []string
}

func (r *report) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// foldPending folds the rollup deltas still pending, as ledgerd does before a read it answers:
// the last commits of a run (or of a killed ledgerd) may be a fold away from the rollups.
func foldPending(ctx context.Context, t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := rollup.Fold(ctx, tx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// verify reads the ledger of a project back, compares it with the ack log, logs the figures, and
// fails the test if any acknowledged record is missing, any record is counted twice, or any billed
// total differs from the truth.
func verify(t *testing.T, pool *pgxpool.Pool, projectID int64, r *report, acks []load.Ack) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	foldPending(ctx, t, pool)
	got, err := readLedger(ctx, pool, projectID, acks)
	if err != nil {
		t.Fatal(err)
	}
	r.truth, r.got = load.Sum(acks), got
	t.Log(r.String())
	lost := r.truth.Records - got.present
	checks := []struct {
		what      string
		got, want int64
	}{
		{"acknowledged records missing from the ledger (lost)", lost, 0},
		{"stored records never acknowledged", got.rows - got.present, 0},
		{"raw rows vs distinct identities (duplicated rows)", got.rows, got.distinctIDs},
		{"hourly rollup attempts vs raw rows", got.hourlyAttempts, got.rows},
		{"daily rollup attempts vs raw rows", got.dailyAttempts, got.rows},
		{"hourly latency histogram count vs raw rows", got.histAttempts, got.rows},
		{"hourly rollup requests vs ack log", got.hourlyRequests, r.truth.Requests},
		{"daily rollup requests vs ack log", got.dailyRequests, r.truth.Requests},
		{"raw billed cost vs ack log (nanos)", got.rawCost, r.truth.CostNanos},
		{"hourly billed cost vs ack log (nanos)", got.hourlyCost, r.truth.CostNanos},
		{"daily billed cost vs ack log (nanos)", got.dailyCost, r.truth.CostNanos},
		{"raw unpriced vs ack log", got.rawUnpriced, r.truth.Unpriced},
		{"hourly unpriced vs ack log", got.hourlyUnpriced, r.truth.Unpriced},
		{"daily unpriced vs ack log", got.dailyUnpriced, r.truth.Unpriced},
		{"raw input tokens vs ack log", got.rawInput, r.truth.InputTokens},
		{"hourly input tokens vs ack log", got.hourlyInput, r.truth.InputTokens},
		{"daily input tokens vs ack log", got.dailyInput, r.truth.InputTokens},
		{"hourly latency sum vs raw", got.hourlyLatencySum, got.rawLatencySum},
		{"cache rollup calls vs raw cache rows", got.cacheCalls, got.rawCacheRows},
		{"hourly cache write calls vs raw", got.hourlyCacheWriteCalls, got.rawCacheWriteCalls},
		{"hourly cache read calls vs raw", got.hourlyCacheReadCalls, got.rawCacheReadCalls},
		{"records the client gave up on", r.sent.Failed, 0},
		{"records ledgerd refused", r.sent.Rejected, 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %s: got %d, want %d", r.name, c.what, c.got, c.want)
		}
	}
}

func (r *report) String() string {
	var b strings.Builder
	s, g := r.sent, r.got
	fmt.Fprintf(&b, "\nDRILL %s\n", r.name)
	fmt.Fprintf(&b, "  records   sent %d (+%d posted again), acknowledged %d, present %d, lost %d, duplicated %d, failed %d\n",
		s.Sent, s.Redelivered, r.truth.Records, g.present, r.truth.Records-g.present,
		max(g.rows-g.distinctIDs, g.hourlyAttempts-g.rows, g.dailyAttempts-g.rows, 0), s.Failed)
	fmt.Fprintf(&b, "  ledger    raw rows %d, rollup attempts hourly %d daily %d, requests %d (ack log %d)\n",
		g.rows, g.hourlyAttempts, g.dailyAttempts, g.hourlyRequests, r.truth.Requests)
	fmt.Fprintf(&b, "  billed    ack log %s, raw %s, hourly %s, daily %s; unpriced %d (ack log %d)\n",
		money.Nanos(r.truth.CostNanos), money.Nanos(g.rawCost), money.Nanos(g.hourlyCost), money.Nanos(g.dailyCost),
		g.rawUnpriced, r.truth.Unpriced)
	fmt.Fprintf(&b, "  server    answered accepted %d, duplicates %d; requests %d (200: %d, 503: %d, 429: %d, no answer: %d), retries %d\n",
		s.Accepted, s.Duplicates, s.Requests, s.Status[200], s.Status[503], s.Status[429], s.NetworkErrors, s.Retries)
	fmt.Fprintf(&b, "  latency   ack %s\n", s.Ack)
	for _, n := range r.notes {
		fmt.Fprintf(&b, "  %s\n", n)
	}
	return b.String()
}

// prices is the embedded catalog's pricing, as ledgerd applies it, for the ack log.
var prices = sync.OnceValues(func() (ingest.PriceFunc, error) {
	c, err := pricing.Load("")
	if err != nil {
		return nil, err
	}
	return ingest.CatalogPrice(c), nil
})

// runLoad runs load against a ledgerd with a project's key, pricing the ack log it writes to acks.
// It may run on a goroutine of its own; the error says why the run could not be made.
func runLoad(ctx context.Context, base string, p project, opt load.Options, acks io.Writer) (load.Summary, error) {
	price, err := prices()
	if err != nil {
		return load.Summary{}, err
	}
	opt.URL, opt.Key, opt.AckLog, opt.Price = base, p.Key, acks, price
	s, err := load.Run(ctx, opt)
	if err != nil {
		return s, fmt.Errorf("load: %w", err)
	}
	return s, nil
}

// loadResult is the outcome of a runLoad started on a goroutine.
type loadResult struct {
	s   load.Summary
	err error
}

// goLoad starts runLoad on a goroutine; receive from the channel to wait for it.
func goLoad(ctx context.Context, base string, p project, opt load.Options, acks io.Writer) <-chan loadResult {
	ch := make(chan loadResult, 1)
	go func() {
		s, err := runLoad(ctx, base, p, opt, acks)
		ch <- loadResult{s, err}
	}()
	return ch
}

// wait receives a goLoad result and fails the test if the run could not be made.
func wait(t *testing.T, ch <-chan loadResult) load.Summary {
	t.Helper()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.s
}
