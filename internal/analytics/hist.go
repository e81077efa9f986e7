package analytics

import (
	"bytes"
	"errors"
	"math"
	"strconv"
)

// histogram is a merged latency histogram: counts[i] is the number of attempts in bucket lo+i,
// where bucket b spans (2^((b-1)/16), 2^(b/16)] ms and bucket 0 holds 1 ms or less (Prometheus
// native-histogram schema 4, as latency_bucket in the schema counts them).
type histogram struct {
	lo     int
	counts []int64
}

// add merges the counts of a rollup's histogram whose first bucket is lo.
func (h *histogram) add(lo int, counts []int64) {
	if len(counts) == 0 {
		return
	}
	if len(h.counts) == 0 {
		h.lo, h.counts = lo, append([]int64(nil), counts...)
		return
	}
	// Grown at most once, to the union of both ranges: a month's histogram merged into a day's
	// reaches past it on both sides.
	end := max(lo+len(counts), h.lo+len(h.counts))
	if first := min(lo, h.lo); first < h.lo || end > h.lo+len(h.counts) {
		grown := make([]int64, end-first)
		copy(grown[h.lo-first:], h.counts)
		h.lo, h.counts = first, grown
	}
	for i, c := range counts {
		h.counts[lo-h.lo+i] += c
	}
}

func (h *histogram) merge(o *histogram) { h.add(o.lo, o.counts) }

// errHistFormat reports a latency histogram that is not the text of a one-dimensional int8[] of
// counts.
var errHistFormat = errors.New("latency histogram: not an int8[] of counts")

// addText merges a rollup's histogram given as PostgreSQL writes an int8[] in text: "{3,0,1}"
// (first bucket 1) or "[37:39]={3,0,1}". The summary reads histograms as text because PostgreSQL
// writes the text of a mostly small-numbered array in less time and a fifth of the bytes of the
// binary form, which spends twelve bytes and an allocation on every bucket; the text is read in
// place here, its counts into buf (returned for the next call to reuse: a month by tenant merges
// hundreds of thousands of histograms, and a slice allocated for each is garbage the merge need
// not make). A histogram that is not such an array is not merged at all.
func (h *histogram) addText(b []byte, buf []int64) ([]int64, error) {
	lo := 1
	if len(b) > 0 && b[0] == '[' {
		end := bytes.IndexByte(b, ':')
		n, err := strconv.Atoi(string(b[1:max(end, 1)]))
		if end < 0 || err != nil {
			return buf, errHistFormat
		}
		lo = n
		if b = b[bytes.IndexByte(b, '=')+1:]; !bytes.HasPrefix(b, []byte("{")) {
			return buf, errHistFormat
		}
	}
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return buf, errHistFormat
	}
	body := b[1 : len(b)-1]
	if len(body) == 0 {
		return buf, nil // an empty array
	}
	counts := buf[:0]
	start := 0
	for i := 0; i <= len(body); i++ {
		if i < len(body) && body[i] != ',' {
			continue
		}
		f := body[start:i]
		if len(f) == 0 || len(f) > 18 {
			return counts, errHistFormat
		}
		var n int64
		for _, c := range f {
			if c < '0' || c > '9' {
				return counts, errHistFormat
			}
			n = n*10 + int64(c-'0')
		}
		counts = append(counts, n)
		start = i + 1
	}
	h.add(lo, counts)
	return counts, nil
}

func (h *histogram) total() int64 {
	var n int64
	for _, c := range h.counts {
		n += c
	}
	return n
}

// quantile returns the latency at per-mille q (500 for the median) of the histogram's n
// observations (its total, which the caller adds up once for a group's three quantiles): the
// geometric midpoint of the bucket holding the observation of nearest rank ceil(q·n/1000), within
// 2^(1/32)-1 < 2.2% of any latency in that bucket. Bucket 0 (1 ms or less) reports 1. The
// histogram must not be empty.
func (h *histogram) quantile(q, n int64) float64 {
	rank := max(1, (q*n+999)/1000)
	var cum int64
	for i, c := range h.counts {
		cum += c
		if cum >= rank {
			return bucketValue(h.lo + i)
		}
	}
	return bucketValue(h.lo + len(h.counts) - 1)
}

// bucketValue is the geometric midpoint of bucket b in ms.
func bucketValue(b int) float64 {
	if b <= 0 {
		return 1
	}
	return math.Exp2((float64(b) - 0.5) / 16)
}
