package numfmt

import (
	"math"
	"testing"
)

func TestCount(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   int64
		want string
	}{
		{0, "0"},                   // zero has no separator
		{999, "999"},               // three digits, no separator
		{1000, "1,000"},            // the first separator
		{2007, "2,007"},            // the cache explanation's calls
		{23_811_000, "23,811,000"}, // the cache explanation's tokens
		{123_456, "123,456"},       // a whole group leads
		{-1234, "-1,234"},          // the sign stays outside the groups
		{-999, "-999"},             // a short negative
		{math.MaxInt64, "9,223,372,036,854,775,807"},  // the largest count
		{math.MinInt64, "-9,223,372,036,854,775,808"}, // the smallest, whose magnitude overflows int64
	}
	for _, c := range cases {
		if got := Count(c.in); got != c.want {
			t.Errorf("Count(%d) = %q, want %q", c.in, got, c.want)
		}
	}
}
