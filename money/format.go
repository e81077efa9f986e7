package money

import (
	"strconv"
	"strings"

	"github.com/ledgerd/ledgerd/internal/numfmt"
)

// How ledgerd prints money for people. Two precisions, one rule:
//   - USD, dollars and cents, is for totals: spend, budgets, projections, a month's cost.
//   - USDFine is for amounts where cents would hide the figure: a cost per call ($0.0000378 for a
//     short Haiku call prints as $0.00 in cents, and two models that differ tenfold would look
//     alike), a price per million tokens ($0.125), a cache's extra cost over a few calls.
//
// Both round half away from zero at the last digit they print (the rule ParseUSD applies at the
// ninth decimal), group whole dollars in thousands ("$2,002.44"), and never print "-$0.00". Only
// the printed string is rounded: costs are summed in exact Nanos. JSON and CSV carry String's nine
// decimals instead.

// pow10[i] is 10 to the power i, for the decimal places of a nano-dollar amount.
var pow10 = [...]uint64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

// USD formats n in dollars and cents: "$1,234.57", "-$0.42". An amount smaller than half a cent
// prints "$0.00" without a sign, whichever its sign: use USDFine where such amounts matter.
func (n Nanos) USD() string { return n.format(2, false) }

// USDFine formats n with four significant digits, so that sub-cent amounts keep their figure:
// "$0.1936", "$0.0000378", "$1.875". It prints at least two decimals ("$3.00", "$0.25": trailing
// zeros beyond the cents are dropped) and at most nine, the last nano-dollar, so an amount of
// fewer than four significant digits prints exactly. From $100 up it is USD's dollars and cents
// ("$2,002.44"). A price with more than four significant digits prints rounded; the cost computed
// from it is not.
func (n Nanos) USDFine() string {
	places := 2
	if u, _ := n.magnitude(); u < uint64(100*PerDollar) {
		// An amount of d digits in nano-dollars has its fourth significant digit at decimal 13-d.
		places = min(9, 13-len(strconv.FormatUint(u, 10)))
	}
	return n.format(places, true)
}

// magnitude returns |n| (safe for math.MinInt64) and whether n is negative.
func (n Nanos) magnitude() (uint64, bool) {
	if n < 0 {
		return uint64(-(n + 1)) + 1, true
	}
	return uint64(n), false
}

// format rounds n half away from zero to places decimals (2 to 9) and writes it with a dollar
// sign and grouped thousands; trim drops trailing zeros beyond the second decimal.
func (n Nanos) format(places int, trim bool) string {
	u, neg := n.magnitude()
	unit := pow10[9-places]
	q := u / unit
	if 2*(u%unit) >= unit {
		q++
	}
	whole, frac := q/pow10[places], q%pow10[places]
	var b strings.Builder
	if neg && q != 0 {
		b.WriteByte('-')
	}
	b.WriteByte('$')
	b.WriteString(numfmt.Group(strconv.FormatUint(whole, 10)))
	digits := strconv.FormatUint(frac, 10)
	digits = strings.Repeat("0", places-len(digits)) + digits
	if trim {
		for len(digits) > 2 && digits[len(digits)-1] == '0' {
			digits = digits[:len(digits)-1]
		}
	}
	b.WriteByte('.')
	b.WriteString(digits)
	return b.String()
}
