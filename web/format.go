package web

import (
	"math/big"
	"strconv"
	"strings"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/money"
)

// usd formats an amount for people: "$1,234.57", "-$0.42". Amounts are rounded from exact
// nano-dollars (money.Nanos.Round), never through a float.
func usd(n money.Nanos) string { return usdPlaces(n, 2) }

// usdPlaces formats an amount with the given decimals and grouped thousands.
func usdPlaces(n money.Nanos, places int) string {
	s := n.Round(places)
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	whole, frac, _ := strings.Cut(s, ".")
	if frac != "" {
		frac = "." + frac
	}
	if sign == "-" && strings.Trim(whole+frac, "0.") == "" {
		sign = "" // "-0.00" reads as a loss that is not there
	}
	return sign + "$" + group(whole) + frac
}

// usdSmall formats a per-call amount, where cents hide the figure: four decimals, six under a
// tenth of a cent.
func usdSmall(n money.Nanos) string {
	if n > -money.PerDollar/1000 && n < money.PerDollar/1000 {
		return usdPlaces(n, 6)
	}
	return usdPlaces(n, 4)
}

// perCall divides an amount by a number of calls exactly, rounding half away from zero.
func perCall(n money.Nanos, calls int64) money.Nanos {
	return money.Nanos(money.RoundRat(big.NewRat(int64(n), calls)).Int64())
}

// group puts thousands separators in a string of digits.
func group(digits string) string {
	if len(digits) <= 3 {
		return digits
	}
	var b strings.Builder
	lead := len(digits) % 3
	if lead > 0 {
		b.WriteString(digits[:lead])
	}
	for i := lead; i < len(digits); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(digits[i : i+3])
	}
	return b.String()
}

// count formats a whole number with thousands separators.
func count(n int64) string {
	if n < 0 {
		return "-" + group(strconv.FormatInt(-n, 10))
	}
	return group(strconv.FormatInt(n, 10))
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
	return count(n) + " " + many
}
