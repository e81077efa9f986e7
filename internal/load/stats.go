package load

import (
	"fmt"
	"io"
	"math"
	"sync"
	"time"
)

// histogram counts durations in logarithmic buckets 1% wide, from 1 µs to about an hour, so
// quantiles are within 1% and memory stays fixed however long the run.
type histogram struct {
	mu     sync.Mutex
	counts [histBuckets]int64
	total  int64
	max    time.Duration
}

const (
	histBuckets = 2300
	histGrowth  = 1.01
)

var logGrowth = math.Log(histGrowth)

func bucketOf(d time.Duration) int {
	us := float64(d.Microseconds())
	if us < 1 {
		return 0
	}
	return min(histBuckets-1, int(math.Log(us)/logGrowth)+1)
}

// upper is the largest duration bucket i holds.
func upper(i int) time.Duration {
	if i == 0 {
		return time.Microsecond
	}
	return time.Duration(math.Pow(histGrowth, float64(i))) * time.Microsecond
}

func (h *histogram) observe(d time.Duration) {
	i := bucketOf(d)
	h.mu.Lock()
	h.counts[i]++
	h.total++
	h.max = max(h.max, d)
	h.mu.Unlock()
}

// quantile returns the upper bound of the bucket holding quantile q (0 when empty); the maximum
// is exact.
func (h *histogram) quantile(q float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.total == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.total)))
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(upper(i), h.max)
		}
	}
	return h.max
}

func (h *histogram) summary() Latency {
	h.mu.Lock()
	n, m := h.total, h.max
	h.mu.Unlock()
	return Latency{Count: n, P50: h.quantile(0.50), P95: h.quantile(0.95), P99: h.quantile(0.99), Max: m}
}

// Latency summarises a set of durations.
type Latency struct {
	Count int64
	P50   time.Duration
	P95   time.Duration
	P99   time.Duration
	Max   time.Duration
}

// String prints the quantiles in milliseconds.
func (l Latency) String() string {
	return fmt.Sprintf("p50 %s  p95 %s  p99 %s  max %s  (n=%d)", ms(l.P50), ms(l.P95), ms(l.P99), ms(l.Max), l.Count)
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
}

// Summary is the outcome of a Run. Records are counted once each however often they were posted.
type Summary struct {
	// Sent counts distinct records posted at least once.
	Sent int64
	// Redelivered counts extra posts of records already posted (redeliveries and replays).
	Redelivered int64
	// Acknowledged counts distinct records ledgerd confirmed as stored (new or duplicate).
	Acknowledged int64
	// Accepted and Duplicates add up what ledgerd answered: newly stored, already stored.
	Accepted   int64
	Duplicates int64
	// Rejected counts records ledgerd refused (invalid records, or a whole request refused 4xx).
	Rejected int64
	// Failed counts records given up on after retrying past Options.GiveUp, or cut off by
	// cancellation: sent but never acknowledged.
	Failed int64

	Requests      int64
	Status        map[int]int64 // HTTP status of every response
	NetworkErrors int64         // requests that got no HTTP response
	Retries       int64         // requests that re-sent a batch

	Elapsed time.Duration
	// Ack is the time from a batch's first post to its acknowledgement, retries included.
	Ack Latency
	// Request is the time of each HTTP request, whatever its outcome.
	Request Latency
	// MaxShed is the slowest 503 or 429 answer.
	MaxShed time.Duration
}

// AckRate is acknowledged records per second of the run.
func (s Summary) AckRate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Acknowledged) / s.Elapsed.Seconds()
}

// Write prints the summary for people.
func (s Summary) Write(w io.Writer) {
	fmt.Fprintf(w, "records   sent %d, acknowledged %d (accepted %d, duplicates %d), rejected %d, failed %d, redelivered %d\n",
		s.Sent, s.Acknowledged, s.Accepted, s.Duplicates, s.Rejected, s.Failed, s.Redelivered)
	fmt.Fprintf(w, "requests  %d: 200 %d, 503 %d, 429 %d, other %d, network errors %d; retries %d\n",
		s.Requests, s.Status[200], s.Status[503], s.Status[429],
		s.Requests-s.NetworkErrors-s.Status[200]-s.Status[503]-s.Status[429], s.NetworkErrors, s.Retries)
	fmt.Fprintf(w, "rate      %.0f acknowledged records/s over %s\n", s.AckRate(), s.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "ack       %s\n", s.Ack)
	fmt.Fprintf(w, "request   %s; slowest 503/429 %s\n", s.Request, ms(s.MaxShed))
}
