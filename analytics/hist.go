package analytics

import (
	"encoding/binary"
	"errors"
	"math"
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
	if lo < h.lo {
		grown := make([]int64, h.lo-lo+len(h.counts))
		copy(grown[h.lo-lo:], h.counts)
		h.lo, h.counts = lo, grown
	}
	if end := lo + len(counts) - h.lo; end > len(h.counts) {
		h.counts = append(h.counts, make([]int64, end-len(h.counts))...)
	}
	for i, c := range counts {
		h.counts[lo-h.lo+i] += c
	}
}

func (h *histogram) merge(o *histogram) { h.add(o.lo, o.counts) }

// errHistFormat reports a latency histogram that is not a one-dimensional int8[] without NULLs in
// PostgreSQL's binary array format.
var errHistFormat = errors.New("latency histogram: not a binary int8[]")

// addBinary merges a rollup's histogram as PostgreSQL sends an int8[] in binary: dimensions, flags,
// element type, each dimension's length and lower bound, then each element's length and value.
// Reading it in place skips decoding thousands of arrays into slices per summary.
func (h *histogram) addBinary(b []byte) error {
	if len(b) < 12 {
		return errHistFormat
	}
	ndim, nulls := binary.BigEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
	if ndim == 0 {
		return nil // an empty array
	}
	if ndim != 1 || nulls != 0 || len(b) < 20 {
		return errHistFormat
	}
	n, lo := int(int32(binary.BigEndian.Uint32(b[12:]))), int(int32(binary.BigEndian.Uint32(b[16:])))
	body := b[20:]
	if n < 0 || len(body) != n*12 {
		return errHistFormat
	}
	counts := make([]int64, n)
	for i := range counts {
		e := body[i*12:]
		if binary.BigEndian.Uint32(e) != 8 {
			return errHistFormat
		}
		counts[i] = int64(binary.BigEndian.Uint64(e[4:]))
	}
	h.add(lo, counts)
	return nil
}

func (h *histogram) total() int64 {
	var n int64
	for _, c := range h.counts {
		n += c
	}
	return n
}

// quantile returns the latency at per-mille q (500 for the median): the geometric midpoint of the
// bucket holding the observation of nearest rank ceil(q·n/1000), within 2^(1/32)-1 < 2.2% of any
// latency in that bucket. Bucket 0 (1 ms or less) reports 1. The histogram must not be empty.
func (h *histogram) quantile(q int64) float64 {
	n := h.total()
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
