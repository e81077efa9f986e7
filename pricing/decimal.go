package pricing

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/ledgerd/ledgerd/money"
)

// ErrDecimal reports a price or ratio that is not a plain, non-negative decimal number.
var ErrDecimal = errors.New("not a non-negative decimal number")

// maxExponent bounds the exponent of a decimal in exponent notation. Real prices need no more
// than a dozen places; the bound keeps a hostile file from making math/big build a huge number.
const maxExponent = 40

// parseDecimal reads a non-negative decimal such as "0.125", "3", "3e-06" or "1.25E-7" into an
// exact rational. It never goes through float64.
func parseDecimal(s string) (*big.Rat, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 64 {
		return nil, fmt.Errorf("%q: %w", s, ErrDecimal)
	}
	mant, exp := s, ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], s[i+1:]
		e, err := strconv.Atoi(exp)
		if err != nil || e > maxExponent || e < -maxExponent {
			return nil, fmt.Errorf("%q: %w", s, ErrDecimal)
		}
	}
	mant = strings.TrimPrefix(mant, "+")
	whole, frac, _ := strings.Cut(mant, ".")
	if whole == "" && frac == "" || !digits(whole) || !digits(frac) {
		return nil, fmt.Errorf("%q: %w", s, ErrDecimal)
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("%q: %w", s, ErrDecimal)
	}
	return r, nil
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseRate reads a price in dollars per million tokens, rounding to whole nano-dollars per
// million tokens (1e-15 dollars a token) half away from zero.
func parseRate(s string) (money.Nanos, error) {
	r, err := parseDecimal(s)
	if err != nil {
		return 0, err
	}
	n, err := money.FromRat(r)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	return n, nil
}

// perTokenRate reads a LiteLLM price in dollars per token and converts it exactly to dollars per
// million tokens, rounded as parseRate rounds.
func perTokenRate(s string) (money.Nanos, error) {
	r, err := parseDecimal(s)
	if err != nil {
		return 0, err
	}
	n, err := money.FromRat(r.Mul(r, big.NewRat(1_000_000, 1)))
	if err != nil {
		return 0, fmt.Errorf("%q: %w", s, err)
	}
	return n, nil
}

// Ratio is a fraction between 0 and 1 held exactly in parts per billion, such as a batch
// discount. It marshals to JSON as a decimal string ("0.5") so no reader sees a float.
type Ratio int64

// ratioOne is the Ratio 1.
const ratioOne Ratio = 1_000_000_000

// ParseRatio reads a decimal fraction between 0 and 1 inclusive, such as "0.5".
func ParseRatio(s string) (Ratio, error) {
	r, err := parseDecimal(s)
	if err != nil {
		return 0, err
	}
	return ratioFromRat(r)
}

func ratioFromRat(r *big.Rat) (Ratio, error) {
	if r.Sign() < 0 || r.Cmp(big.NewRat(1, 1)) > 0 {
		return 0, fmt.Errorf("%s is not between 0 and 1: %w", r.FloatString(9), ErrDecimal)
	}
	ppb := money.RoundRat(new(big.Rat).Mul(r, big.NewRat(int64(ratioOne), 1)))
	return Ratio(ppb.Int64()), nil
}

// Rat returns the ratio as an exact rational.
func (r Ratio) Rat() *big.Rat { return big.NewRat(int64(r), int64(ratioOne)) }

// String formats the ratio as a short decimal, e.g. "0.5".
func (r Ratio) String() string {
	s := strings.TrimRight(fmt.Sprintf("%d.%09d", int64(r)/int64(ratioOne), int64(r)%int64(ratioOne)), "0")
	return strings.TrimSuffix(s, ".")
}

// MarshalJSON writes the ratio as a JSON string holding its decimal value.
func (r Ratio) MarshalJSON() ([]byte, error) { return []byte(`"` + r.String() + `"`), nil }

// UnmarshalJSON accepts a decimal string or a JSON number.
func (r *Ratio) UnmarshalJSON(b []byte) error {
	v, err := ParseRatio(strings.Trim(string(b), `"`))
	if err != nil {
		return err
	}
	*r = v
	return nil
}
