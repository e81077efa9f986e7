// Package load drives a running ledgerd with synthetic traffic over its HTTP API, the way a fleet of
// services would: batched POST /v1/attempts at a set rate from many clients, retrying 503 and 429
// after Retry-After with the same records (ingest is idempotent), optionally redelivering and
// replaying records on purpose. It keeps exact counts and an optional ack log of every
// acknowledged record, so drills can check the database against what ledgerd confirmed.
package load

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/backoff"
	"github.com/ledgerd/ledgerd/internal/retryafter"
	"github.com/ledgerd/ledgerd/internal/synth"
	"github.com/ledgerd/ledgerd/schema"
)

// Source returns the attempts of the next logical call; now is when the load generator asks.
type Source func(now time.Time) []schema.Attempt

// Live is a source of calls that start when they are generated.
func Live(g *synth.Generator) Source { return g.Call }

// History is a source of calls spread over the generator's window (a backdated history).
func History(g *synth.Generator) Source { return func(time.Time) []schema.Attempt { return g.Next() } }

// Options configures a Run. Zero values take the defaults shown.
type Options struct {
	// URL is ledgerd's base URL, such as http://127.0.0.1:8080. Required.
	URL string
	// Key is the project's API key. Required.
	Key    string
	Source Source
	// Rate is records per second offered (redeliveries not counted); 0 sends as fast as ledgerd
	// acknowledges.
	Rate float64
	// Concurrency is the number of clients posting at once (8).
	Concurrency int
	// Batch is the number of records per request (100).
	Batch int
	// Duration and Count end the run: whichever comes first. At least one is required.
	Duration time.Duration
	Count    int64
	// Redeliver is the share of records posted a second time in a later request.
	Redeliver float64
	// ReplayBlock is the number of the run's first records posted again, together, at its end.
	ReplayBlock int
	// Gzip compresses request bodies.
	Gzip bool
	// Timeout bounds one HTTP request (30 s).
	Timeout time.Duration
	// GiveUp is how long a batch is retried before its records count as failed (2 min).
	GiveUp time.Duration
	// AckLog, when set, receives one JSON line per acknowledged record (see Ack).
	AckLog io.Writer
	// Price prices records for the ack log; nil leaves them unpriced.
	Price ingest.PriceFunc
	// Progress, when set, receives a status line every second.
	Progress io.Writer
	// Client sends the requests (a client with Concurrency idle connections and no compression).
	Client *http.Client
	// Observe, when set, is told about every HTTP request; it must be safe for concurrent use.
	Observe func(Response)
	// Now is the clock (time.Now).
	Now func() time.Time
}

// Response describes one HTTP request of a run, for callers that study a time window.
type Response struct {
	Start   time.Time
	Took    time.Duration
	Status  int // 0 when no response came (connection refused or reset, timeout)
	Records int
	// RetryAfter is the Retry-After header of the answer, if any.
	RetryAfter string
}

type batch struct {
	recs  []schema.Attempt
	extra int // how many of recs are redeliveries
}

type runner struct {
	opt  Options
	url  string
	acks *ackLog

	sent, redelivered, acked, accepted, dups     atomic.Int64
	rejected, failed, requests, netErrs, retries atomic.Int64
	inflight                                     atomic.Int64
	maxShed                                      atomic.Int64

	statusMu sync.Mutex
	status   map[int]int64

	seenMu sync.Mutex
	seen   map[string]bool // acknowledged identities, when records are posted more than once

	ack, req histogram
}

// Run sends load until Duration or Count is reached, waits for the batches in flight (each
// retried for at most GiveUp), and returns what happened. Cancelling ctx abandons batches in
// flight; their records count as failed.
func Run(ctx context.Context, opt Options) (Summary, error) {
	if err := opt.defaults(); err != nil {
		return Summary{}, err
	}
	r := &runner{opt: opt, url: strings.TrimSuffix(opt.URL, "/") + "/v1/attempts", status: map[int]int64{}}
	if opt.AckLog != nil {
		r.acks = newAckLog(opt.AckLog)
	}
	if opt.Redeliver > 0 || opt.ReplayBlock > 0 {
		r.seen = map[string]bool{}
	}
	start := opt.Now()
	batches := make(chan batch, opt.Concurrency)
	var wg sync.WaitGroup
	for range opt.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				r.post(ctx, b)
			}
		}()
	}
	stopProgress := r.progress(start)
	r.dispatch(ctx, start, batches)
	close(batches)
	wg.Wait()
	stopProgress()
	s := r.summary(opt.Now().Sub(start))
	if r.acks != nil {
		if err := r.acks.close(); err != nil {
			return s, err
		}
	}
	if err := ctx.Err(); err != nil {
		return s, fmt.Errorf("load run: %w", err)
	}
	return s, nil
}

func (o *Options) defaults() error {
	if o.URL == "" || o.Key == "" {
		return errors.New("load: URL and Key are required")
	}
	if o.Source == nil {
		return errors.New("load: Source is required")
	}
	if o.Duration <= 0 && o.Count <= 0 {
		return errors.New("load: set Duration or Count")
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.Batch <= 0 {
		o.Batch = 100
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.GiveUp <= 0 {
		o.GiveUp = 2 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Client == nil {
		o.Client = &http.Client{Transport: &http.Transport{
			MaxIdleConns: o.Concurrency * 2, MaxIdleConnsPerHost: o.Concurrency * 2,
			IdleConnTimeout: 90 * time.Second, DisableCompression: true,
		}}
	}
	return nil
}

// redelivery is a record waiting to be posted again in a later batch.
type redelivery struct {
	rec schema.Attempt
	due int64 // batch number it rides with
}

// dispatch generates batches at the configured rate until the run ends, then the redeliveries
// still due and the replay block.
func (r *runner) dispatch(ctx context.Context, start time.Time, out chan<- batch) {
	var (
		pending []schema.Attempt
		again   []redelivery
		replay  []schema.Attempt
		sent    int64
		n       int64
		rng     = rand.New(rand.NewPCG(uint64(start.UnixNano()), 7))
		end     = start.Add(r.opt.Duration)
	)
	send := func(b batch) bool {
		select {
		case out <- b:
			return true
		case <-ctx.Done():
			r.failed.Add(int64(len(b.recs) - b.extra))
			return false
		}
	}
	for ctx.Err() == nil {
		if r.opt.Count > 0 && sent >= r.opt.Count {
			break
		}
		if r.opt.Rate > 0 {
			due := start.Add(time.Duration(float64(sent) / r.opt.Rate * float64(time.Second)))
			if backoff.Sleep(ctx, due.Sub(r.opt.Now())) != nil {
				break
			}
		}
		now := r.opt.Now()
		if r.opt.Duration > 0 && !now.Before(end) {
			break
		}
		size := int64(r.opt.Batch)
		if r.opt.Count > 0 {
			size = min(size, r.opt.Count-sent)
		}
		recs := make([]schema.Attempt, 0, size)
		for int64(len(recs)) < size {
			if len(pending) == 0 {
				pending = r.opt.Source(now)
			}
			take := min(len(pending), int(size)-len(recs))
			recs = append(recs, pending[:take]...)
			pending = pending[take:]
		}
		for _, rec := range recs {
			if r.opt.Redeliver > 0 && rng.Float64() < r.opt.Redeliver {
				again = append(again, redelivery{rec: rec, due: n + 1 + rng.Int64N(4)})
			}
		}
		if len(replay) < r.opt.ReplayBlock {
			replay = append(replay, recs[:min(len(recs), r.opt.ReplayBlock-len(replay))]...)
		}
		b := batch{recs: recs}
		kept := again[:0]
		for _, d := range again {
			if d.due <= n {
				b.recs = append(b.recs, d.rec)
				b.extra++
			} else {
				kept = append(kept, d)
			}
		}
		again = kept
		sent += int64(len(recs))
		r.sent.Add(int64(len(recs)))
		r.redelivered.Add(int64(b.extra))
		n++
		if !send(b) {
			return
		}
	}
	var tail []schema.Attempt
	for _, d := range again {
		tail = append(tail, d.rec)
	}
	tail = append(tail, replay...)
	for len(tail) > 0 && ctx.Err() == nil {
		k := min(len(tail), r.opt.Batch)
		b := batch{recs: tail[:k:k], extra: k}
		r.redelivered.Add(int64(k))
		tail = tail[k:]
		if !send(b) {
			return
		}
	}
}

// post sends one batch until it is acknowledged, refused, or given up on.
func (r *runner) post(ctx context.Context, b batch) {
	body, err := r.encode(b.recs)
	if err != nil {
		r.rejected.Add(int64(len(b.recs) - b.extra))
		return
	}
	r.inflight.Add(1)
	defer r.inflight.Add(-1)
	first := r.opt.Now()
	for try := 0; ; try++ {
		if try > 0 {
			r.retries.Add(1)
		}
		status, resp, wait := r.send(ctx, body, len(b.recs))
		switch {
		case resp != nil:
			r.ack.observe(r.opt.Now().Sub(first))
			r.acknowledge(b, resp)
			return
		case status >= 400 && status < 500 && status != http.StatusTooManyRequests && status != http.StatusRequestTimeout:
			r.rejected.Add(int64(len(b.recs) - b.extra))
			return
		}
		if wait == 0 {
			wait = retryBackoff.Wait(try + 1)
		}
		if r.opt.Now().Add(wait).Sub(first) > r.opt.GiveUp || backoff.Sleep(ctx, wait) != nil {
			r.failed.Add(int64(len(b.recs) - b.extra))
			return
		}
	}
}

// retryBackoff spaces the retries of a batch that ledgerd answered without a Retry-After.
var retryBackoff = backoff.Exponential{Min: 100 * time.Millisecond, Max: 1600 * time.Millisecond}

func (r *runner) encode(recs []schema.Attempt) ([]byte, error) {
	raw, err := json.Marshal(recs)
	if err != nil {
		return nil, fmt.Errorf("encode records: %w", err)
	}
	if !r.opt.Gzip {
		return raw, nil
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(raw); err != nil {
		return nil, fmt.Errorf("gzip records: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("gzip records: %w", err)
	}
	return buf.Bytes(), nil
}

// send makes one request. It returns the status (0 without a response), the decoded answer of a
// 200 or of a 400 that refused every record, and how long the server asked to wait.
func (r *runner) send(ctx context.Context, body []byte, records int) (int, *schema.IngestResponse, time.Duration) {
	rctx, cancel := context.WithTimeout(ctx, r.opt.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, r.url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, 0
	}
	req.Header.Set("Authorization", "Bearer "+r.opt.Key)
	req.Header.Set("Content-Type", "application/json")
	if r.opt.Gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	start := r.opt.Now()
	resp, err := r.opt.Client.Do(req)
	var (
		status int
		answer *schema.IngestResponse
		wait   time.Duration
		ra     string
	)
	if err == nil {
		status, ra = resp.StatusCode, resp.Header.Get("Retry-After")
		raw, rerr := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		resp.Body.Close()
		if rerr != nil {
			status = 0
		} else if status == http.StatusOK || status == http.StatusBadRequest {
			var ir schema.IngestResponse
			if json.Unmarshal(raw, &ir) == nil && (status == http.StatusOK || len(ir.Rejected) > 0) {
				answer = &ir
			}
		}
		if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
			wait = retryAfter(ra, r.opt.Now())
		}
	}
	took := r.opt.Now().Sub(start)
	r.requests.Add(1)
	r.req.observe(took)
	if status == 0 {
		r.netErrs.Add(1)
	} else {
		r.statusMu.Lock()
		r.status[status]++
		r.statusMu.Unlock()
	}
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		for {
			cur := r.maxShed.Load()
			if int64(took) <= cur || r.maxShed.CompareAndSwap(cur, int64(took)) {
				break
			}
		}
	}
	if r.opt.Observe != nil {
		r.opt.Observe(Response{Start: start, Took: took, Status: status, Records: records, RetryAfter: ra})
	}
	return status, answer, wait
}

// retryAfter reads a Retry-After header (seconds or an HTTP date), one second when absent, at most
// 30 seconds, with up to 20% jitter so that shed clients do not return in step.
func retryAfter(h string, now time.Time) time.Duration {
	d, ok := retryafter.Parse(http.Header{"Retry-After": {h}}, now)
	if !ok {
		d = time.Second
	}
	d = min(max(d, 100*time.Millisecond), 30*time.Second)
	return d + time.Duration(rand.Int64N(int64(d)/5+1))
}

// acknowledge counts the records of a batch ledgerd confirmed: all but those it refused.
func (r *runner) acknowledge(b batch, resp *schema.IngestResponse) {
	r.accepted.Add(int64(resp.Accepted))
	r.dups.Add(int64(resp.Duplicates))
	refused := make(map[int]bool, len(resp.Rejected))
	for _, rj := range resp.Rejected {
		refused[rj.Index] = true
	}
	var acks []Ack
	var newly, rejected int64
	for i := range b.recs {
		original := i < len(b.recs)-b.extra
		if refused[i] {
			if original {
				rejected++
			}
			continue
		}
		a := &b.recs[i]
		if r.seen != nil {
			k := identityOf(a.AttemptID, a.StartedAt.UTC().Truncate(time.Microsecond))
			r.seenMu.Lock()
			dup := r.seen[k]
			r.seen[k] = true
			r.seenMu.Unlock()
			if dup {
				continue
			}
		} else if !original {
			continue
		}
		newly++
		if r.acks != nil {
			acks = append(acks, AckOf(a, r.opt.Price))
		}
	}
	r.acked.Add(newly)
	r.rejected.Add(rejected)
	if r.acks != nil {
		r.acks.write(acks)
	}
}

// progress prints a status line every second until the returned function is called.
func (r *runner) progress(start time.Time) func() {
	if r.opt.Progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var last int64
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			acked := r.acked.Load()
			r.statusMu.Lock()
			shed := r.status[503] + r.status[429]
			r.statusMu.Unlock()
			fmt.Fprintf(r.opt.Progress, "%6.0fs  sent %d  acked %d (%d/s)  rejected %d  dup %d  503/429 %d  retries %d  neterr %d  failed %d  in flight %d  ack p99 %s\n",
				r.opt.Now().Sub(start).Seconds(), r.sent.Load(), acked, acked-last, r.rejected.Load(), r.dups.Load(),
				shed, r.retries.Load(), r.netErrs.Load(), r.failed.Load(), r.inflight.Load(), ms(r.ack.quantile(0.99)))
			last = acked
		}
	}()
	return func() { close(done); <-finished }
}

func (r *runner) summary(elapsed time.Duration) Summary {
	r.statusMu.Lock()
	status := make(map[int]int64, len(r.status))
	for k, v := range r.status {
		status[k] = v
	}
	r.statusMu.Unlock()
	return Summary{
		Sent: r.sent.Load(), Redelivered: r.redelivered.Load(), Acknowledged: r.acked.Load(),
		Accepted: r.accepted.Load(), Duplicates: r.dups.Load(), Rejected: r.rejected.Load(),
		Failed: r.failed.Load(), Requests: r.requests.Load(), Status: status,
		NetworkErrors: r.netErrs.Load(), Retries: r.retries.Load(), Elapsed: elapsed,
		Ack: r.ack.summary(), Request: r.req.summary(), MaxShed: time.Duration(r.maxShed.Load()),
	}
}
