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
