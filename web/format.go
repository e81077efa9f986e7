package web

import (
	"math/big"
	"strconv"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/numfmt"
	"github.com/ledgerd/ledgerd/money"
)

// perCall divides an amount by a number of calls exactly, rounding half away from zero.
func perCall(n money.Nanos, calls int64) money.Nanos {
	return money.Nanos(money.RoundRat(big.NewRat(int64(n), calls)).Int64())
}

// percent formats a ratio (0.123 → "12.3%"); nil, a ratio with nothing to divide, is "–".
func percent(r *float64) string {
	if r == nil {
		return "–"
	}
	return strconv.FormatFloat(*r*100, 'f', 1, 64) + "%"
}

// ratio formats a ratio such as attempts per call with two decimals; nil is "–".
func ratio(r *float64) string {
	if r == nil {
		return "–"
	}
	return strconv.FormatFloat(*r, 'f', 2, 64)
}

// millis formats a latency: "840 ms", "12.4 s".
func millis(ms float64) string {
	if ms < 1000 {
		return strconv.FormatFloat(ms, 'f', 0, 64) + " ms"
	}
	return strconv.FormatFloat(ms/1000, 'f', 1, 64) + " s"
}

// failures counts a group's attempts that did not succeed: errors of every class and
// cancellations.
func failures(st analytics.Stats) int64 {
	n := st.Cancelled
	for _, e := range st.Errors {
		n += e
	}
	return n
}

// plural writes a count with its noun: "1 hash", "3 hashes".
func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return numfmt.Count(n) + " " + many
}
