// Package money holds exact US-dollar amounts as integer nano-dollars, so that no cost is ever
// computed or stored in floating point.
package money

import (
	"errors"
	"math/big"
	"strconv"
	"strings"
)

// Nanos is an amount of US dollars in units of 1e-9 dollars. Summing int64 nano-dollars is exact up
// to about 9.2 billion dollars, well beyond any ledger's bucket.
type Nanos int64

// PerDollar is the number of Nanos in one dollar.
const PerDollar Nanos = 1_000_000_000

// ErrSyntax reports a string that is not a plain decimal amount.
var ErrSyntax = errors.New("not a decimal amount")

// ErrRange reports an amount that does not fit in int64 nano-dollars.
var ErrRange = errors.New("amount out of range")

// ParseUSD reads a decimal dollar amount such as "12.5", "-0.0000378" or "3e-06". Digits beyond
// the ninth decimal place are rounded half away from zero, the rule used everywhere in ledgerd.
func ParseUSD(s string) (Nanos, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 64 {
		return 0, ErrSyntax
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E') {
			return 0, ErrSyntax
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0, ErrSyntax
	}
	return FromRat(r)
}

// FromRat converts an exact rational number of dollars to Nanos, rounding half away from zero.
func FromRat(r *big.Rat) (Nanos, error) {
	n := new(big.Rat).Mul(r, big.NewRat(int64(PerDollar), 1))
	q := RoundRat(n)
	if !q.IsInt64() {
		return 0, ErrRange
	}
	return Nanos(q.Int64()), nil
}

// RoundRat rounds r to the nearest integer, halves away from zero.
func RoundRat(r *big.Rat) *big.Int {
	num, den := r.Num(), r.Denom()
	q, m := new(big.Int).QuoRem(num, den, new(big.Int))
	// |2m| >= den means the remainder is at least one half.
	m2 := new(big.Int).Abs(m)
	m2.Lsh(m2, 1)
	if m2.Cmp(den) >= 0 {
		if num.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return q
}

// String formats n as a dollar amount with all nine decimal places, e.g. "0.000037800".
func (n Nanos) String() string { return string(n.appendTo(nil)) }

// MarshalText writes n as String does, which encoding/json writes as a JSON string, so no JSON
// reader turns money into a float. A MarshalJSON had each amount's output checked again by the
// encoder: the cache report's 9,500 rows took a third longer to encode.
func (n Nanos) MarshalText() ([]byte, error) {
	return n.appendTo(nil), nil
}

// AppendText appends n as MarshalText writes it (encoding.TextAppender), for writers of JSON that
// build their output without reflection.
func (n Nanos) AppendText(b []byte) ([]byte, error) {
	return n.appendTo(b), nil
}

// appendTo appends String's form of n to b.
func (n Nanos) appendTo(b []byte) []byte {
	u := uint64(n)
	if n < 0 {
		b = append(b, '-')
		u = uint64(-(n + 1)) + 1 // safe for math.MinInt64
	}
	b = strconv.AppendUint(b, u/uint64(PerDollar), 10)
	frac := u % uint64(PerDollar)
	b = append(b, '.')
	for p := uint64(PerDollar) / 10; p > 0; p /= 10 {
		b = append(b, byte('0'+frac/p%10))
	}
	return b
}

// UnmarshalJSON accepts a decimal string or a JSON number.
func (n *Nanos) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	v, err := ParseUSD(s)
	if err != nil {
		return err
	}
	*n = v
	return nil
}
