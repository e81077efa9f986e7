package money

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
)

func TestParseUSD(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want Nanos
		err  error
	}{
		{"0", 0, nil},                                      // zero
		{"12.5", 12_500_000_000, nil},                      // plain decimal
		{"0.0000378", 37_800, nil},                         // a Haiku call
		{"3e-06", 3_000, nil},                              // LiteLLM per-token float notation
		{"0.0000000005", 1, nil},                           // half a nano rounds away from zero
		{"-0.0000000005", -1, nil},                         // negative half rounds away from zero
		{"0.00000000049", 0, nil},                          // below half rounds down
		{"0.000037800000000000004", 37_800, nil},           // float noise from a client is rounded off
		{"1e30", 0, ErrRange},                              // too large for int64 nanos
		{"abc", 0, ErrSyntax},                              // not a number
		{"", 0, ErrSyntax},                                 // empty
		{"0x10", 0, ErrSyntax},                             // hex is not a decimal amount
		{"1/3", 0, ErrSyntax},                              // big.Rat fractions are not accepted
		{"9223372036.854775807", 9223372036854775807, nil}, // the largest amount
	}
	for _, c := range cases {
		got, err := ParseUSD(c.in)
		if !errors.Is(err, c.err) || got != c.want {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d, %v", c.in, got, err, c.want, c.err)
		}
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   Nanos
		want string
	}{
		{0, "0.000000000"},                              // zero keeps its nine decimals
		{37_800, "0.000037800"},                         // a Haiku call
		{-1, "-0.000000001"},                            // the smallest loss
		{12_345_000_000, "12.345000000"},                // whole dollars
		{-9223372036854775808, "-9223372036.854775808"}, // the smallest amount, whose magnitude overflows int64
	}
	for _, c := range cases {
		if got := c.in.String(); got != c.want {
			t.Errorf("Nanos(%d).String() = %q, want %q", int64(c.in), got, c.want)
		}
		// AppendText appends the same after what the buffer holds.
		if got, err := c.in.AppendText([]byte("x=")); err != nil || string(got) != "x="+c.want {
			t.Errorf("Nanos(%d).AppendText = %q, %v, want %q", int64(c.in), got, err, "x="+c.want)
		}
		// In JSON an amount is a string, also through a pointer.
		for _, v := range []any{c.in, &c.in} {
			if got, err := json.Marshal(v); err != nil || string(got) != `"`+c.want+`"` {
				t.Errorf("json.Marshal(%T %d) = %s, %v, want %q", v, int64(c.in), got, err, c.want)
			}
		}
	}
}

func FuzzParseUSD(f *testing.F) {
	for _, s := range []string{"0", "12.5", "3e-06", "-0.0000000005", "1e30"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseUSD(s)
		if err != nil {
			return
		}
		back, err := ParseUSD(n.String())
		if err != nil || back != n {
			t.Fatalf("round trip of %q: %v -> %q -> %v, %v", s, n, n.String(), back, err)
		}
		if n < Nanos(math.MaxInt64)-PerDollar && n > Nanos(math.MinInt64)+PerDollar {
			checkFormats(t, n)
		}
	})
}

// BenchmarkJSON encodes 10,000 rows of three amounts, as a large answer of the API carries them
// (the cache report's rows at 10,000 tenants: docs/performance.md).
func BenchmarkJSON(b *testing.B) {
	type row struct {
		Cost, NoCache, Savings *Nanos
	}
	rows := make([]row, 10_000)
	for i := range rows {
		v := Nanos(123_456_789 + i)
		rows[i] = row{&v, &v, &v}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(rows); err != nil {
			b.Fatal(err)
		}
	}
}
