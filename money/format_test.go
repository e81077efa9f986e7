package money

import (
	"math"
	"strings"
	"testing"
)

func TestUSD(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   Nanos
		want string
	}{
		{0, "$0.00"},                             // zero
		{1_234_567_890_000_000, "$1,234,567.89"}, // thousands separators
		{2_002_439_354_571, "$2,002.44"},         // costcalc's month, once printed $2002.439354571
		{270_000_000, "$0.27"},                   // beside it, unchanged
		{2_515_000_000, "$2.52"},                 // half a cent rounds up
		{2_514_999_999, "$2.51"},                 // just under half rounds down
		{-12_345_000_000, "-$12.35"},             // a loss rounds half away from zero too
		{-420_000_000, "-$0.42"},                 // a loss under a dollar
		{-4_000_000, "$0.00"},                    // a loss that rounds to nothing has no sign
		{37_800, "$0.00"},                        // a sub-cent amount is zero in cents (USDFine keeps it)
		{5_000_000, "$0.01"},                     // exactly half a cent rounds up
		{999_995_000_000, "$1,000.00"},           // rounding carries into a new group
		{math.MaxInt64, "$9,223,372,036.85"},     // the largest amount
		{math.MinInt64, "-$9,223,372,036.85"},    // the smallest, whose magnitude overflows int64
	}
	for _, c := range cases {
		if got := c.in.USD(); got != c.want {
			t.Errorf("Nanos(%d).USD() = %q, want %q", int64(c.in), got, c.want)
		}
	}
}

func TestUSDFine(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   Nanos
		want string
	}{
		{0, "$0.00"},                          // zero
		{37_800, "$0.0000378"},                // a short Haiku call: three significant digits, exact
		{193_600_000, "$0.1936"},              // a cost per call: four significant digits
		{193_649_999, "$0.1936"},              // the fifth digit below half rounds down
		{193_650_000, "$0.1937"},              // the fifth digit at half rounds up
		{250_000_000, "$0.25"},                // trailing zeros beyond the cents are dropped
		{3 * PerDollar, "$3.00"},              // a whole price keeps its cents
		{125_000_000, "$0.125"},               // a price per million tokens
		{1_875_000_000, "$1.875"},             // a price over a dollar keeps its third decimal
		{12_345_000_000, "$12.35"},            // from $10 four digits are the cents
		{99_999_000_000, "$100.00"},           // rounding up to $100 stays in cents
		{2_002_439_354_571, "$2,002.44"},      // from $100 up it is USD
		{1, "$0.000000001"},                   // one nano-dollar prints exactly
		{-3_337_800, "-$0.003338"},            // a loss keeps its sign and its digits
		{99_999_999, "$0.10"},                 // rounding up to fewer digits keeps the cents
		{math.MinInt64, "-$9,223,372,036.85"}, // the smallest amount
	}
	for _, c := range cases {
		if got := c.in.USDFine(); got != c.want {
			t.Errorf("Nanos(%d).USDFine() = %q, want %q", int64(c.in), got, c.want)
		}
	}
}

// TestFormatRoundTrip reads each format back: USD is within half a cent of the amount, USDFine
// within half of its last printed digit, for amounts across every magnitude.
func TestFormatRoundTrip(t *testing.T) {
	t.Parallel()
	for n := Nanos(1); n < Nanos(math.MaxInt64/7); n = n*7 + 3 {
		for _, v := range []Nanos{n, -n} {
			checkFormats(t, v)
		}
	}
}

// checkFormats fails when v's USD or USDFine, read back, is further from v than their rounding
// allows.
func checkFormats(t *testing.T, v Nanos) {
	t.Helper()
	for _, f := range []struct {
		name string
		s    string
	}{{"USD", v.USD()}, {"USDFine", v.USDFine()}} {
		plain := strings.ReplaceAll(strings.Replace(f.s, "$", "", 1), ",", "")
		back, err := ParseUSD(plain)
		if err != nil {
			t.Fatalf("%s of %d = %q: does not read back: %v", f.name, int64(v), f.s, err)
		}
		_, frac, _ := strings.Cut(plain, ".")
		half := uint64(pow10[9-len(frac)]) / 2
		diff, _ := (back - v).magnitude()
		if diff > half {
			t.Fatalf("%s of %d = %q reads back as %d: off by more than half its last digit", f.name, int64(v), f.s, int64(back))
		}
	}
}
