package rollup

import "testing"

// TestCacheSumsBeginWithCalls pins what the cache fold relies on: the first cache sum counts the
// calls, which decide whether a prompt hash has a row of its own.
func TestCacheSumsBeginWithCalls(t *testing.T) {
	t.Parallel()
	if c := CacheSums[0]; c.Col != "calls" || c.Expr != "count(*)" {
		t.Errorf("CacheSums begins with %s (%s), want calls (count(*))", c.Col, c.Expr)
	}
}
