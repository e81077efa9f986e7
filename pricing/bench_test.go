package pricing

import (
	"math/big"
	"testing"
	"time"
)

// BenchmarkCost prices one realistic record per catalog model two ways in one run: "big" is the
// exact-rational path (CostTimes with n = 1, what Cost ran before its integer path) and "fast" is
// Cost itself.
func BenchmarkCost(b *testing.B) {
	c, err := Load("")
	if err != nil {
		b.Fatal(err)
	}
	at := time.Date(2026, 11, 2, 15, 4, 5, 0, time.UTC)
	records := []struct {
		name string
		u    Usage
	}{
		{"anthropic", Usage{Provider: "anthropic", Model: "claude-sonnet-5-5", At: at, InputTokens: 3_214,
			OutputTokens: 1_187, ReasoningTokens: 612, CacheWriteTokens: 12_480, CacheWrite1hTokens: 4_096,
			CacheReadTokens: 48_913}},
		{"openai", Usage{Provider: "openai", Model: "gpt-6.1-sol", At: at, InputTokens: 2_731,
			OutputTokens: 904, ReasoningTokens: 517, CacheWriteTokens: 6_144, CacheWrite1hTokens: 1_024,
			CacheReadTokens: 30_720}},
	}
	paths := []struct {
		name string
		cost func(Usage) (Cost, error)
	}{
		{"big", func(u Usage) (Cost, error) { return c.CostTimes(u, big.NewRat(1, 1)) }},
		{"fast", c.Cost},
	}
	for _, r := range records {
		for _, p := range paths {
			b.Run(r.name+"/"+p.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.cost(r.u); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
