package client

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ledgerd/ledgerd/schema"
)

const testKey = "ldk_test_5ecret_key"

// ledgerStub stands in for ledgerd's POST /v1/attempts: it decodes bodies with the real decoder and
// answers as the plan says.
type ledgerStub struct {
	t   testing.TB
	srv *httptest.Server
	// plan gives the status of call number n (from 1) carrying a batch of size records; 0 means 200,
	// -1 breaks the connection.
	plan func(n, size int) (int, http.Header)
	// hold, when set, makes each request wait for it to be closed (or for the client to go away).
	hold chan struct{}
	// arrived, when set, is sent a value as each request arrives.
	arrived chan struct{}

	mu        sync.Mutex
	calls     int
	committed [][]schema.Attempt
	gzipped   []bool
}

func newLedgerStub(t testing.TB, plan func(n, size int) (int, http.Header)) *ledgerStub {
	t.Helper()
	s := &ledgerStub{t: t, plan: plan}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *ledgerStub) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/attempts" || r.Method != http.MethodPost {
		s.t.Errorf("request to %s %s", r.Method, r.URL.Path)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
		s.t.Errorf("Authorization %q", got)
	}
	var body io.Reader = r.Body
	gz := r.Header.Get("Content-Encoding") == "gzip"
	if gz {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			s.t.Errorf("gzip: %v", err)
			return
		}
		body = zr
	}
	batch, err := schema.DecodeBody(body, false, time.Now())
	if err != nil {
		s.t.Errorf("ledgerd could not decode the body: %v", err)
	}
	if s.arrived != nil {
		s.arrived <- struct{}{}
	}
	if s.hold != nil {
		select {
		case <-s.hold:
		case <-r.Context().Done():
			return
		}
	}
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.mu.Unlock()
	status, header := 0, http.Header(nil)
	if s.plan != nil {
		status, header = s.plan(n, batch.Len())
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	switch status {
	case 0, http.StatusOK:
		s.mu.Lock()
		s.committed = append(s.committed, batch.Records)
		s.gzipped = append(s.gzipped, gz)
		s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(schema.IngestResponse{Accepted: len(batch.Records), Rejected: batch.Rejected})
	case -1:
		panic(http.ErrAbortHandler)
	default:
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":"status %d"}`, status)
	}
}

// sizes returns the sizes of the committed batches.
func (s *ledgerStub) sizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, b := range s.committed {
		out = append(out, len(b))
	}
	return out
}

// batches returns the committed batches and whether each came gzip-compressed.
func (s *ledgerStub) batches() ([][]schema.Attempt, []bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]schema.Attempt(nil), s.committed...), append([]bool(nil), s.gzipped...)
}

func (s *ledgerStub) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// sleeps records the waits a Reporter asks for, without waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// record returns a valid attempt numbered i.
func record(i int) schema.Attempt {
	return schema.Attempt{
		AttemptID: fmt.Sprintf("att-%04d", i), RequestID: fmt.Sprintf("req-%04d", i), AttemptNo: 1,
		StartedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), LatencyMS: 812, Provider: "anthropic",
		Model: "claude-haiku-5-5", Service: "triage", Status: schema.StatusOK, InputTokens: 70,
		CacheReadTokens: 3856, OutputTokens: 9,
	}
}

// newTestReporter starts a Reporter against stub; opts fields left zero get test defaults.
func newTestReporter(t *testing.T, stub *ledgerStub, opts ReporterOptions) *Reporter {
	t.Helper()
	opts.Endpoint, opts.APIKey = stub.srv.URL, testKey
	opts.HTTPClient = stub.srv.Client()
	if opts.FlushInterval == 0 {
		opts.FlushInterval = time.Hour
	}
	if opts.sleep == nil {
		opts.sleep = (&sleeps{}).sleep
	}
	r, err := NewReporter(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func closeReporter(t *testing.T, r *Reporter) {
	t.Helper()
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestReporterBatchesBySize(t *testing.T) {
	t.Parallel()
	stub := newLedgerStub(t, nil)
	r := newTestReporter(t, stub, ReporterOptions{MaxBatch: 3})
	for i := range 7 {
		r.Report(record(i))
	}
	closeReporter(t, r)
	if got := stub.sizes(); fmt.Sprint(got) != "[3 3 1]" {
		t.Errorf("batches %v, want [3 3 1] (the last sent by Close)", got)
	}
	if q, s := testutil.ToFloat64(r.m.queued), testutil.ToFloat64(r.m.sent); q != 7 || s != 7 {
		t.Errorf("queued %v sent %v", q, s)
	}
	if b, _ := stub.batches(); b[2][0].AttemptID != "att-0006" {
		t.Errorf("order lost: %s", b[2][0].AttemptID)
	}
}

func TestReporterFlushesByTime(t *testing.T) {

	t.Parallel()
	stub := newLedgerStub(t, nil)
	r := newTestReporter(t, stub, ReporterOptions{MaxBatch: 100, FlushInterval: 20 * time.Millisecond})
	defer closeReporter(t, r)
	r.Report(record(1))
	r.Report(record(2))
	deadline := time.Now().Add(5 * time.Second)
	for testutil.ToFloat64(r.m.sent) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("not sent by time: batches %v", stub.sizes())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestReporterRetries(t *testing.T) {
	t.Parallel()
	retryAfter7 := http.Header{"Retry-After": {"7"}}
	cases := []struct {
		name     string
		plan     func(n, size int) (int, http.Header)
		retries  int // MaxRetries (0: default)
		calls    int
		waits    []time.Duration // exact waits; nil: check backoff bounds
		sent     float64
		rejected float64
		dropped  float64 // send_failed
	}{
		// 503 with Retry-After (a DB outage): waits what it was told, then succeeds
		{"503 retry-after", func(n, _ int) (int, http.Header) {
			if n == 1 {
				return 503, retryAfter7
			}
			return 200, nil
		}, 0, 2, []time.Duration{7 * time.Second}, 3, 0, 0},
		// 429 without Retry-After: exponential backoff with jitter
		{"429 backoff", func(n, _ int) (int, http.Header) {
			if n <= 2 {
				return 429, nil
			}
			return 200, nil
		}, 0, 3, nil, 3, 0, 0},
		// 408: ledgerd gave up waiting for the body (a slow network): retried
		{"408 retried", func(n, _ int) (int, http.Header) {
			if n == 1 {
				return 408, nil
			}
			return 200, nil
		}, 0, 2, nil, 3, 0, 0},
		// a broken connection is retried like a 5xx
		{"network error", func(n, _ int) (int, http.Header) {
			if n == 1 {
				return -1, nil
			}
			return 200, nil
		}, 0, 2, nil, 3, 0, 0},
		// 400: ledgerd refused every record: never retried, counted as rejected
		{"400 never retried", func(int, int) (int, http.Header) { return 400, nil }, 0, 1, []time.Duration{}, 0, 3, 0},
		// 401: a bad key: never retried, the batch is dropped
		{"401 never retried", func(int, int) (int, http.Header) { return 401, nil }, 0, 1, []time.Duration{}, 0, 0, 3},
		// retries run out: the batch is dropped and counted
		{"retries exhausted", func(int, int) (int, http.Header) { return 500, nil }, 2, 3, nil, 0, 0, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stub := newLedgerStub(t, tc.plan)
			sl := &sleeps{}
			r := newTestReporter(t, stub, ReporterOptions{MaxBatch: 3, MaxRetries: tc.retries, sleep: sl.sleep,
				MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second})
			for i := range 3 {
				r.Report(record(i))
			}
			closeReporter(t, r)
			if got := stub.callCount(); got != tc.calls {
				t.Errorf("%d calls, want %d", got, tc.calls)
			}
			waits := sl.all()
			if tc.waits != nil && fmt.Sprint(waits) != fmt.Sprint(tc.waits) {
				t.Errorf("waits %v, want %v", waits, tc.waits)
			}
			if tc.waits == nil {
				for i, d := range waits { // step i is 100ms·2^i capped at 1s, jittered in [0, step]
					step := min(100*time.Millisecond<<i, time.Second)
					if d < 0 || d > step {
						t.Errorf("wait %d is %v, want within [0, %v]", i, d, step)
					}
				}
				if len(waits) != tc.calls-1 {
					t.Errorf("%d waits for %d calls", len(waits), tc.calls)
				}
			}
			if got := testutil.ToFloat64(r.m.retries); got != float64(len(waits)) {
				t.Errorf("retries metric %v, want %d", got, len(waits))
			}
			if s, rj, d := testutil.ToFloat64(r.m.sent), testutil.ToFloat64(r.m.rejected), testutil.ToFloat64(r.m.droppedF); s != tc.sent || rj != tc.rejected || d != tc.dropped {
				t.Errorf("sent %v rejected %v dropped %v, want %v %v %v", s, rj, d, tc.sent, tc.rejected, tc.dropped)
			}
		})
	}
}

func TestReporterPerRecordRejections(t *testing.T) {
	t.Parallel()
	stub := newLedgerStub(t, nil)
	var logs bytes.Buffer
	r := newTestReporter(t, stub, ReporterOptions{MaxBatch: 3,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	bad := record(1)
	bad.Model = "" // the ledger refuses it; the others are committed
	r.Report(record(0))
	r.Report(bad)
	r.Report(record(2))
	closeReporter(t, r)
	if stub.callCount() != 1 {
		t.Errorf("%d calls: a 200 with rejections must not be retried", stub.callCount())
	}
	if s, rj := testutil.ToFloat64(r.m.sent), testutil.ToFloat64(r.m.rejected); s != 2 || rj != 1 {
		t.Errorf("sent %v rejected %v", s, rj)
	}
	if !strings.Contains(logs.String(), "att-0001") || !strings.Contains(logs.String(), "field=model") {
		t.Errorf("rejection not logged with its attempt id and field:\n%s", logs.String())
	}
}

func TestReporterSplitsTooLargeBatches(t *testing.T) {
	t.Parallel()
	stub := newLedgerStub(t, func(_, size int) (int, http.Header) {
		if size > 2 {
			return http.StatusRequestEntityTooLarge, nil
		}
		return 200, nil
	})
	r := newTestReporter(t, stub, ReporterOptions{MaxBatch: 5})
	for i := range 5 {
		r.Report(record(i))
	}
	closeReporter(t, r)
	if got := fmt.Sprint(stub.sizes()); got != "[2 1 2]" {
		t.Errorf("committed batches %s, want [2 1 2] (5 → 2 + 3, then 3 → 1 + 2)", got)
	}
	if s := testutil.ToFloat64(r.m.sent); s != 5 {
		t.Errorf("sent %v", s)
	}
}

func TestReporterDropsWhenFull(t *testing.T) {
	t.Parallel()
	stub := newLedgerStub(t, nil)
	stub.hold = make(chan struct{})
	stub.arrived = make(chan struct{}, 10)
	var logs bytes.Buffer
	r := newTestReporter(t, stub, ReporterOptions{MaxBatch: 1, QueueSize: 2, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	r.Report(record(0))
	<-stub.arrived // the sender is now stuck in a request: the queue no longer drains
	start := time.Now()
	for i := 1; i <= 5; i++ {
		r.Report(record(i)) // 2 fit in the queue, 3 are dropped, none blocks
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Report blocked for %v", d)
	}
	if q, d := testutil.ToFloat64(r.m.queued), testutil.ToFloat64(r.m.droppedFull); q != 3 || d != 3 {
		t.Errorf("queued %v dropped %v, want 3 3", q, d)
	}
	if n := strings.Count(logs.String(), "queue full"); n != 1 {
		t.Errorf("drop logged %d times, want once per streak", n)
	}
	close(stub.hold)
	closeReporter(t, r)
	if s := testutil.ToFloat64(r.m.sent); s != 3 {
		t.Errorf("sent %v, want 3", s)
	}
}

func TestReporterCloseGivesUp(t *testing.T) {
	t.Parallel()
	stub := newLedgerStub(t, nil)
	stub.hold = make(chan struct{}) // never released: ledgerd hangs
	r := newTestReporter(t, stub, ReporterOptions{MaxBatch: 2})
	for i := range 5 {
		r.Report(record(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := r.Close(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v, want a deadline error", err)
	}
	if d := testutil.ToFloat64(r.m.droppedClosed); d != 5 {
		t.Errorf("dropped on close %v, want 5", d)
	}
	r.Report(record(9)) // after Close: dropped, never a panic
	if d := testutil.ToFloat64(r.m.droppedClosed); d != 6 {
		t.Errorf("dropped after close %v, want 6", d)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestReporterGzip(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		threshold int
		want      bool
	}{
		{"above threshold", 100, true},      // a batch of 3 records is ~1 KiB: compressed
		{"below threshold", 1 << 20, false}, // small batches are sent as they are
		{"never", -1, false},                // compression off
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			stub := newLedgerStub(t, nil)
			r := newTestReporter(t, stub, ReporterOptions{GzipThreshold: tc.threshold})
			for i := range 3 {
				r.Report(record(i))
			}
			closeReporter(t, r)
			committed, gzipped := stub.batches()
			if len(gzipped) != 1 || gzipped[0] != tc.want {
				t.Fatalf("gzipped %v, want [%v]", gzipped, tc.want)
			}
			if got := committed[0][1]; !reflectEqualAttempt(got, record(1)) {
				t.Errorf("record changed in transit: %+v", got)
			}
		})
	}
}

// reflectEqualAttempt compares attempts as the ledger stores them.
func reflectEqualAttempt(got, want schema.Attempt) bool {
	_ = want.Validate(time.Now()) // fills the defaults the decoder fills
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(want)
	return bytes.Equal(a, b)
}

func TestReporterNeverLogsKey(t *testing.T) {
	t.Parallel()
	stub := newLedgerStub(t, func(n, _ int) (int, http.Header) {
		return []int{503, 401}[min(n-1, 1)], nil
	})
	var logs bytes.Buffer
	r := newTestReporter(t, stub, ReporterOptions{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	r.Report(record(0))
	closeReporter(t, r)
	if !strings.Contains(logs.String(), "401") {
		t.Fatalf("failure not logged:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), testKey) {
		t.Errorf("API key in logs:\n%s", logs.String())
	}
}

func TestNewReporterErrors(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	first, err := NewReporter(ReporterOptions{Endpoint: "http://ledgerd:8080", APIKey: testKey, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer closeReporter(t, first)
	cases := []struct {
		name string
		opts ReporterOptions
	}{
		{"no endpoint", ReporterOptions{APIKey: testKey}},                                          // nowhere to send
		{"not http", ReporterOptions{Endpoint: "ftp://ledgerd", APIKey: testKey}},                  // wrong scheme
		{"no host", ReporterOptions{Endpoint: "http://", APIKey: testKey}},                         // no host
		{"no key", ReporterOptions{Endpoint: "http://ledgerd:8080"}},                               // ledgerd needs one
		{"metrics twice", ReporterOptions{Endpoint: "http://x", APIKey: testKey, Registerer: reg}}, // same registry again
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := NewReporter(tc.opts)
			if err == nil {
				closeReporter(t, r)
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error shows the key: %v", err)
			}
		})
	}
	want := []string{"ledgerd_client_queue_length", "ledgerd_client_queued_total"}
	n, err := testutil.GatherAndCount(reg, want...)
	if err != nil || n != 2 {
		t.Errorf("metrics %v: %d of %v", err, n, want)
	}
}
