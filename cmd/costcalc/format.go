package main

import (
	"math/big"
	"strings"

	"github.com/ledgerd/ledgerd/money"
)

// usd formats an amount for people: a dollar sign and every significant decimal (at least two),
// so that $0.0000378 a call is not shown as $0.00.
func usd(n money.Nanos) string {
	s := n.String()
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	frac = strings.TrimRight(frac, "0")
	for len(frac) < 2 {
		frac += "0"
	}
	out := "$" + whole + "." + frac
	if neg {
		out = "-" + out
	}
	return out
}

// decimal formats an exact rational with at most places decimals, trailing zeros dropped.
func decimal(r *big.Rat, places int) string {
	s := r.FloatString(places)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// tokens formats a token count with thousands separators.
func tokens(n int64) string {
	s := big.NewInt(n).String()
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// count formats a possibly fractional count: whole numbers with thousands separators.
func count(r *big.Rat) string {
	if r.IsInt() && r.Num().IsInt64() {
		return tokens(r.Num().Int64())
	}
	return decimal(r, 4)
}
