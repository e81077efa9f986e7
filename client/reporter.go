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
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/internal/backoff"
	"github.com/ledgerd/ledgerd/internal/retryafter"
	"github.com/ledgerd/ledgerd/schema"
)

// ReporterOptions configures a Reporter. Zero values mean the defaults named below.
type ReporterOptions struct {
	// Endpoint is ledgerd's base URL, such as "http://ledgerd:8080"; records are posted to
	// Endpoint + "/v1/attempts". Required.
	Endpoint string
	// APIKey is the project's ingest key, sent as a bearer token. Required; never logged.
	APIKey string
	// HTTPClient sends the batches; nil means a client of the Reporter's own, whose idle connections
	// Close closes. Do not give it a Transport of this package: it would record its own sends.
	HTTPClient *http.Client
	// MaxBatch is the most records sent in one request (default 500).
	MaxBatch int
	// FlushInterval is the longest a record waits for its batch to fill (default 1s).
	FlushInterval time.Duration
	// QueueSize is how many records wait to be sent at most (default 10000); Report drops records
	// beyond it. Memory is bounded by QueueSize + MaxBatch records.
	QueueSize int
	// GzipThreshold is the body size in bytes above which a batch is sent gzip-compressed (default
	// 8 KiB); negative never compresses.
	GzipThreshold int
	// SendTimeout bounds each request to ledgerd (default 30s).
	SendTimeout time.Duration
	// MaxRetries is how often a batch is retried after 429, 5xx or a network error before it is
	// dropped (default 8; negative means never).
	MaxRetries int
	// MinBackoff and MaxBackoff bound the exponential backoff between retries (defaults 200ms and
	// 30s): retry n waits a random pick up to MinBackoff·2^(n-1), capped at MaxBackoff, and never
	// less than the Retry-After ledgerd sent.
	MinBackoff, MaxBackoff time.Duration
	// Registerer receives the Reporter's metrics (ledgerd_client_*); nil registers none. Register one
	// Reporter per registry, or wrap it with prometheus.WrapRegistererWith.
	Registerer prometheus.Registerer
	// Logger receives warnings about dropped and refused records; nil discards.
	Logger *slog.Logger

	// sleep waits between retries; tests replace it to run without waiting.
	sleep func(ctx context.Context, d time.Duration) error
}

// Reporter sends attempt records to ledgerd in the background. Report never blocks: records are
// queued and sent in batches by size (MaxBatch) and time (FlushInterval) by one goroutine, which
// retries with backoff on 408, 429, 5xx and network errors and never on other 4xx. A full queue drops
// records and counts them. Close sends what is queued. A Reporter is safe for concurrent use.
type Reporter struct {
	url       string // ledgerd's ingest URL
	redacted  string // url, without any password, for logs
	key       string
	client    *http.Client
	ownClient bool

	maxBatch      int
	flushInterval time.Duration
	gzipThreshold int
	sendTimeout   time.Duration
	maxRetries    int
	backoff       backoff.Exponential
	sleep         func(ctx context.Context, d time.Duration) error
	log           *slog.Logger
	m             reporterMetrics

	mu        sync.RWMutex // write-held only by Close, to close queue
	closed    bool
	queue     chan schema.Attempt
	closeOnce sync.Once
	dropping  atomic.Bool // a drop has been logged and no record was queued since

	ctx    context.Context // cancelled when Close gives up: aborts sends and waits
	cancel context.CancelFunc
	done   chan struct{} // closed when the sending goroutine exits
	gz     *gzip.Writer  // used by the sending goroutine only
}

// reporterMetrics are the Reporter's Prometheus metrics.
type reporterMetrics struct {
	queued, sent, rejected, retries      prometheus.Counter
	droppedFull, droppedClosed, droppedF prometheus.Counter
	sendDuration                         prometheus.Histogram
}

// Reasons for dropped records, the label of ledgerd_client_dropped_total.
const (
	dropQueueFull  = "queue_full"  // Report found the queue full
	dropClosed     = "closed"      // reported after Close, or still queued when Close gave up
	dropSendFailed = "send_failed" // retries exhausted, or ledgerd refused the batch as a whole (not 400)
)

func newReporterMetrics(reg prometheus.Registerer, queueLen func() float64) (reporterMetrics, error) {
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ledgerd_client_dropped_total",
		Help: "Attempt records lost before ledgerd judged them, by reason (queue_full, closed, send_failed).",
	}, []string{"reason"})
	m := reporterMetrics{
		queued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ledgerd_client_queued_total", Help: "Attempt records queued for sending.",
		}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ledgerd_client_sent_total",
			Help: "Attempt records ledgerd committed (accepted or already stored).",
		}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ledgerd_client_rejected_total", Help: "Attempt records ledgerd refused as invalid.",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ledgerd_client_retries_total", Help: "Batch sends retried after 429, 5xx or a network error.",
		}),
		droppedFull:   dropped.WithLabelValues(dropQueueFull),
		droppedClosed: dropped.WithLabelValues(dropClosed),
		droppedF:      dropped.WithLabelValues(dropSendFailed),
		sendDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ledgerd_client_send_duration_seconds",
			Help:    "Duration of each request to ledgerd's ingest API, retries included.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}),
	}
	if reg == nil {
		return m, nil
	}
	length := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "ledgerd_client_queue_length", Help: "Attempt records waiting to be sent.",
	}, queueLen)
	all := []prometheus.Collector{m.queued, m.sent, m.rejected, m.retries, dropped, m.sendDuration, length}
	for i, c := range all {
		if err := reg.Register(c); err != nil {
			for _, done := range all[:i] {
				reg.Unregister(done)
			}
			return m, fmt.Errorf("register metrics: %w", err)
		}
	}
	return m, nil
}

// NewReporter starts a Reporter; Close must be called to stop it.
func NewReporter(opts ReporterOptions) (*Reporter, error) {
	u, err := url.Parse(opts.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("ledgerd client: new reporter: Endpoint must be an http or https URL")
	}
	if opts.APIKey == "" {
		return nil, errors.New("ledgerd client: new reporter: APIKey is required")
	}
	u = u.JoinPath("v1", "attempts")
	r := &Reporter{
		url: u.String(), redacted: u.Redacted(), key: opts.APIKey, client: opts.HTTPClient,
		maxBatch: opts.MaxBatch, flushInterval: opts.FlushInterval, gzipThreshold: opts.GzipThreshold,
		sendTimeout: opts.SendTimeout, maxRetries: opts.MaxRetries, sleep: opts.sleep, log: opts.Logger, done: make(chan struct{}),
	}
	r.maxBatch = orDefault(r.maxBatch, 500)
	r.flushInterval = orDefault(r.flushInterval, time.Second)
	r.sendTimeout = orDefault(r.sendTimeout, 30*time.Second)
	minBackoff := orDefault(opts.MinBackoff, 200*time.Millisecond)
	r.backoff = backoff.Exponential{Min: minBackoff, Max: max(orDefault(opts.MaxBackoff, 30*time.Second), minBackoff)}
	if r.gzipThreshold == 0 {
		r.gzipThreshold = 8 << 10
	}
	if r.maxRetries == 0 {
		r.maxRetries = 8
	}
	r.maxRetries = max(r.maxRetries, 0)
	queueSize := orDefault(opts.QueueSize, 10_000)
	r.queue = make(chan schema.Attempt, queueSize)
	if r.client == nil {
		r.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		r.ownClient = true
	}
	if r.sleep == nil {
		r.sleep = backoff.Sleep
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.m, err = newReporterMetrics(opts.Registerer, func() float64 { return float64(len(r.queue)) })
	if err != nil {
		return nil, fmt.Errorf("ledgerd client: new reporter: %w", err)
	}
	r.gz, _ = gzip.NewWriterLevel(io.Discard, gzip.BestSpeed) // the level is valid: no error
	r.ctx, r.cancel = context.WithCancel(context.Background())
	go r.run()
	return r, nil
}

// orDefault returns v, or def when v is not positive.
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Report queues a record for sending. It never blocks: when the queue is full, or after Close, the
// record is dropped and counted in ledgerd_client_dropped_total.
func (r *Reporter) Report(a schema.Attempt) {
	r.mu.RLock()
	if r.closed {
		r.mu.RUnlock()
		r.m.droppedClosed.Inc()
		return
	}
	select {
	case r.queue <- a:
		r.mu.RUnlock()
		r.m.queued.Inc()
		if r.dropping.Load() {
			r.dropping.Store(false)
		}
	default:
		r.mu.RUnlock()
		r.m.droppedFull.Inc()
		if !r.dropping.Swap(true) {
			r.log.Warn("ledgerd client: queue full, dropping attempt records", "queue_size", cap(r.queue))
		}
	}
}

// Close stops accepting records and sends those queued, retrying as usual, until they are sent or
// ctx is done; then it drops the rest, counts them and returns an error wrapping ctx.Err(). It
// returns when the sending goroutine has stopped. Calling it again waits the same way.
func (r *Reporter) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		r.mu.Lock()
		r.closed = true
		close(r.queue)
		r.mu.Unlock()
	})
	var err error
	select {
	case <-r.done: // checked first: a finished flush wins over a context that is also done
	default:
		select {
		case <-r.done:
		case <-ctx.Done():
			r.cancel()
			<-r.done
			err = fmt.Errorf("ledgerd client: close reporter: queued records dropped: %w", ctx.Err())
		}
	}
	r.cancel()
	if r.ownClient {
		r.client.CloseIdleConnections()
	}
	return err
}

// run batches queued records and sends them, until the queue is closed and drained.
func (r *Reporter) run() {
	defer close(r.done)
	timer := time.NewTimer(r.flushInterval)
	timer.Stop()
	batch := make([]schema.Attempt, 0, r.maxBatch)
	for {
		select {
		case a, ok := <-r.queue:
			if !ok {
				timer.Stop()
				r.send(batch)
				return
			}
			batch = append(batch, a)
			if len(batch) == 1 {
				timer.Reset(r.flushInterval)
			}
			if len(batch) >= r.maxBatch {
				timer.Stop()
				r.send(batch)
				batch = batch[:0]
			}
		case <-timer.C:
			r.send(batch)
			batch = batch[:0]
		}
	}
}

// result is what one request to ledgerd came to.
type result int

const (
	resultDone     result = iota // 2xx: committed
	resultRetry                  // 429, 5xx or a network error
	resultTooLarge               // 413
	resultRefused                // 400: the body, or every record, refused
	resultFailed                 // any other answer: the batch cannot be sent
)

// send delivers one batch, retrying as needed; a batch ledgerd finds too large is split in halves.
func (r *Reporter) send(batch []schema.Attempt) {
	if len(batch) == 0 {
		return
	}
	n := len(batch)
	body, gzipped, err := r.encode(batch)
	if err != nil {
		r.m.droppedF.Add(float64(n))
		r.log.Error("ledgerd client: encode batch", "records", n, "err", err)
		return
	}
	for try := 0; ; try++ {
		if r.ctx.Err() != nil {
			r.m.droppedClosed.Add(float64(n))
			r.log.Warn("ledgerd client: reporter closed before records were sent", "records", n)
			return
		}
		res, ans, wait, detail := r.post(body, gzipped)
		switch res {
		case resultDone:
			r.account(batch, ans)
			return
		case resultTooLarge:
			if n > 1 {
				r.send(batch[:n/2])
				r.send(batch[n/2:])
				return
			}
			r.m.droppedF.Inc()
			r.log.Error("ledgerd client: record too large for ledgerd", "attempt_id", batch[0].AttemptID)
			return
		case resultRefused:
			r.m.rejected.Add(float64(n))
			r.log.Error("ledgerd client: ledgerd refused the batch", "records", n, "answer", detail)
			return
		case resultFailed:
			r.m.droppedF.Add(float64(n))
			r.log.Error("ledgerd client: batch cannot be sent", "records", n, "answer", detail)
			return
		}
		if r.ctx.Err() != nil {
			continue // counted as dropped at the top of the loop
		}
		if try >= r.maxRetries {
			r.m.droppedF.Add(float64(n))
			r.log.Error("ledgerd client: batch dropped after retries", "records", n, "tries", try+1, "last", detail)
			return
		}
		r.m.retries.Inc()
		d := max(r.backoff.Wait(try+1), wait)
		r.log.Debug("ledgerd client: retrying batch", "records", n, "in", d, "after", detail)
		if r.sleep(r.ctx, d) != nil {
			r.m.droppedClosed.Add(float64(n))
			r.log.Warn("ledgerd client: reporter closed before records were sent", "records", n)
			return
		}
	}
}

// encode marshals a batch, gzip-compressed when larger than the threshold.
func (r *Reporter) encode(batch []schema.Attempt) ([]byte, bool, error) {
	raw, err := json.Marshal(batch)
	if err != nil {
		return nil, false, fmt.Errorf("marshal %d records: %w", len(batch), err)
	}
	if r.gzipThreshold < 0 || len(raw) <= r.gzipThreshold {
		return raw, false, nil
	}
	var buf bytes.Buffer
	buf.Grow(len(raw) / 4)
	r.gz.Reset(&buf)
	if _, err := r.gz.Write(raw); err != nil {
		return nil, false, fmt.Errorf("gzip batch: %w", err)
	}
	if err := r.gz.Close(); err != nil {
		return nil, false, fmt.Errorf("gzip batch: %w", err)
	}
	return buf.Bytes(), true, nil
}

// maxAnswer caps how much of ledgerd's answer is read.
const maxAnswer = 1 << 20

// post makes one request. It returns what it came to, the 2xx answer, the Retry-After wait, and a
// description of a failure for logs (never the API key).
func (r *Reporter) post(body []byte, gzipped bool) (result, schema.IngestResponse, time.Duration, string) {
	var ans schema.IngestResponse
	ctx, cancel := context.WithTimeout(r.ctx, r.sendTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return resultFailed, ans, 0, fmt.Sprintf("build request to %s: %v", r.redacted, err)
	}
	req.Header.Set("Authorization", "Bearer "+r.key)
	req.Header.Set("Content-Type", "application/json")
	if gzipped {
		req.Header.Set("Content-Encoding", "gzip")
	}
	start := time.Now()
	resp, err := r.client.Do(req)
	r.m.sendDuration.Observe(time.Since(start).Seconds())
	if err != nil {
		return resultRetry, ans, 0, err.Error()
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer)) // let the connection be reused
	detail := fmt.Sprintf("%s: %s: %s", r.redacted, resp.Status, snippet(raw))
	switch code := resp.StatusCode; {
	case code >= 200 && code <= 299:
		if err != nil || json.Unmarshal(raw, &ans) != nil {
			// A 2xx means committed: count the whole batch as sent.
			r.log.Warn("ledgerd client: unreadable answer to a committed batch", "answer", detail)
			ans = schema.IngestResponse{Accepted: -1}
		}
		return resultDone, ans, 0, ""
	case code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500:
		wait, _ := retryafter.Parse(resp.Header, time.Now())
		return resultRetry, ans, wait, detail
	case code == http.StatusRequestEntityTooLarge:
		return resultTooLarge, ans, 0, detail
	case code == http.StatusBadRequest:
		return resultRefused, ans, 0, detail
	}
	return resultFailed, ans, 0, detail
}

// snippet shortens an answer body for a log line.
func snippet(b []byte) string {
	const n = 300
	b = bytes.TrimSpace(b)
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// account counts a committed batch and logs the records ledgerd refused.
func (r *Reporter) account(batch []schema.Attempt, ans schema.IngestResponse) {
	if ans.Accepted < 0 {
		r.m.sent.Add(float64(len(batch)))
		return
	}
	r.m.sent.Add(float64(ans.Accepted + ans.Duplicates))
	r.m.rejected.Add(float64(len(ans.Rejected)))
	const logged = 10
	for i, rej := range ans.Rejected {
		if i == logged {
			r.log.Warn("ledgerd client: more records refused", "count", len(ans.Rejected)-logged)
			break
		}
		id := ""
		if rej.Index >= 0 && rej.Index < len(batch) {
			id = batch[rej.Index].AttemptID
		}
		r.log.Warn("ledgerd client: ledgerd refused a record", "attempt_id", id, "field", rej.Field,
			"error", rej.Error)
	}
}
