package main

import (
	"math/big"
	"strings"

	"github.com/ledgerd/ledgerd/internal/numfmt"
)

// decimal formats an exact rational with at most places decimals, trailing zeros dropped.
func decimal(r *big.Rat, places int) string {
	s := r.FloatString(places)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// count formats a possibly fractional count: whole numbers with thousands separators.
func count(r *big.Rat) string {
	if r.IsInt() && r.Num().IsInt64() {
		return numfmt.Count(r.Num().Int64())
	}
	return decimal(r, 4)
}
