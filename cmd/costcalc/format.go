package main

import (
	"fmt"
	"math/big"
	"os"
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

// progress tells a person at a terminal what a slow step is doing, on stderr; it says nothing
// when stderr is a file or a pipe, so scripts and golden outputs see only the results.
func progress(e env, format string, args ...any) {
	f, ok := e.stderr.(*os.File)
	if !ok {
		return
	}
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return
	}
	fmt.Fprintf(f, format+"\n", args...)
}
