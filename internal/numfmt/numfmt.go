// Package numfmt writes whole numbers for people the one way ledgerd prints them everywhere (the
// dashboard, alert texts, costcalc, API explanations): with thousands separators, "2,007", so a
// count in a sentence reads like the same count in a table. Dollar amounts are money's
// (money.Nanos.USD), which groups its whole dollars with Group.
package numfmt

import "strconv"

// Count writes n with thousands separators: "2,007", "-23,811,000".
func Count(n int64) string {
	if n < 0 {
		// Negate through uint64 so that math.MinInt64 keeps its digits.
		return "-" + Group(strconv.FormatUint(uint64(-(n+1))+1, 10))
	}
	return Group(strconv.FormatInt(n, 10))
}

// Group puts a comma between each group of three digits of a string of decimal digits, counted
// from the right: "1234567" becomes "1,234,567".
func Group(digits string) string {
	if len(digits) <= 3 {
		return digits
	}
	b := make([]byte, 0, len(digits)+len(digits)/3)
	lead := len(digits) % 3
	if lead == 0 {
		lead = 3
	}
	b = append(b, digits[:lead]...)
	for i := lead; i < len(digits); i += 3 {
		b = append(b, ',')
		b = append(b, digits[i:i+3]...)
	}
	return string(b)
}
