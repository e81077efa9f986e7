package rollup

import (
	"testing"
	"time"
)

// TestCacheSumsBeginWithCalls pins what the cache fold relies on: the first cache sum counts the
// calls, which decide whether a prompt hash has a row of its own.
func TestCacheSumsBeginWithCalls(t *testing.T) {
	t.Parallel()
	if c := CacheSums[0]; c.Col != "calls" || c.Expr != "count(*)" {
		t.Errorf("CacheSums begins with %s (%s), want calls (count(*))", c.Col, c.Expr)
	}
}

// TestSpendBlocks checks that the blocks of a range tile its days exactly, each aligned to its
// span, with the fewest blocks.
func TestSpendBlocks(t *testing.T) {
	t.Parallel()
	day := func(s string) time.Time {
		d, err := time.Parse(time.DateOnly, s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, c := range []struct {
		from, to string
		blocks   int
	}{
		{"2026-11-04", "2026-11-04", 0},
		{"2026-11-04", "2026-11-05", 1},
		{"2026-10-06", "2026-11-05", 9}, // 30 days: 2 days, 3 blocks of 8, 4 days
		{"2026-01-01", "2027-01-01", 22},
		{"1999-12-25", "2000-01-10", 9}, // across the epoch: 7 days, a block of 8, a day
	} {
		blocks := SpendBlocks(day(c.from), day(c.to))
		next := day(c.from)
		for _, b := range blocks {
			if !b.Start.Equal(next) {
				t.Fatalf("%s to %s: block %+v, want one starting %s", c.from, c.to, b, next.Format(time.DateOnly))
			}
			if n := int(b.Start.Sub(spendEpoch).Hours()) / 24; n%b.Span != 0 {
				t.Errorf("%s to %s: block %+v is not aligned", c.from, c.to, b)
			}
			next = b.Start.AddDate(0, 0, b.Span)
		}
		if !next.Equal(day(c.to)) || len(blocks) != c.blocks {
			t.Errorf("%s to %s: %d blocks ending %s, want %d ending %s", c.from, c.to, len(blocks), next.Format(time.DateOnly), c.blocks, c.to)
		}
	}
}

// TestHeadroomBelow checks the order of headroom the writer and RaisePeaks keep the lowest of: it
// must agree with SQL headroom_below, which the rebuild uses, and compare shares exactly where a
// float would not.
func TestHeadroomBelow(t *testing.T) {
	t.Parallel()
	none := Headroom{}
	for _, c := range []struct {
		name string
		h, o Headroom
		want bool
	}{
		{"smaller share", Headroom{1, 10}, Headroom{5, 10}, true},
		{"larger share", Headroom{5, 10}, Headroom{1, 10}, false},
		{"share across limits", Headroom{9, 100}, Headroom{1, 10}, true},
		{"equal shares, larger limit", Headroom{10, 100}, Headroom{1, 10}, true},
		{"equal shares, smaller limit", Headroom{1, 10}, Headroom{10, 100}, false},
		{"same", Headroom{3, 7}, Headroom{3, 7}, false},
		{"any below none", Headroom{999, 1000}, none, true},
		{"none never below", none, Headroom{0, 10}, false},
		{"none against none", none, none, false},
		// 1e12-2 of 1e12-1 against 1e12-1 of 1e12: the shares differ by 1e-24, beyond a float64.
		{"exact beyond float", Headroom{999_999_999_998, 999_999_999_999}, Headroom{999_999_999_999, 1_000_000_000_000}, true},
	} {
		if got := c.h.Below(c.o); got != c.want {
			t.Errorf("%s: %v below %v = %v, want %v", c.name, c.h, c.o, got, c.want)
		}
	}
}
