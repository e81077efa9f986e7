package pricing_test

import (
	"errors"
	"fmt"
	"log"
	"math/big"
	"time"

	"github.com/ledgerd/ledgerd/pricing"
)

// A ticket router sends about 333 input and 9 output tokens per call to Claude Haiku 5.5.
func ExampleCatalog_Cost() {
	c, err := pricing.Load("")
	if err != nil {
		log.Fatal(err)
	}
	cost, err := c.Cost(pricing.Usage{
		Provider:     "anthropic",
		Model:        "claude-haiku-5-5",
		At:           time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC),
		InputTokens:  333,
		OutputTokens: 9,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("total:", cost.Total)
	fmt.Println("input:", cost.Input, "output:", cost.Output)
	fmt.Println("price version from:", cost.Version.EffectiveFrom.Format("2006-01-02"))
	// Output:
	// total: 0.000037800
	// input: 0.000033300 output: 0.000004500
	// price version from: 2026-10-07
}

// CostTimes prices many identical calls with one rounding: 2,000 calls a day for 30 days.
func ExampleCatalog_CostTimes() {
	c, err := pricing.Load("")
	if err != nil {
		log.Fatal(err)
	}
	u := pricing.Usage{Provider: "anthropic", Model: "claude-sonnet-5-5", At: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC),
		InputTokens: 333, OutputTokens: 9}
	month, err := c.CostTimes(u, big.NewRat(2000*30, 1))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a month:", month.Total.USD())
	// Output:
	// a month: $45.36
}

// A prompt cache write that is never read costs more than sending the prompt uncached; NoCache
// tells by how much.
func ExampleCost_noCache() {
	c, err := pricing.Load("")
	if err != nil {
		log.Fatal(err)
	}
	cost, err := c.Cost(pricing.Usage{Provider: "anthropic", Model: "claude-haiku-5-5",
		At: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC), CacheWriteTokens: 3856})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("with the cache write:", cost.Total, "without caching:", cost.NoCache)
	// Output:
	// with the cache write: 0.000482000 without caching: 0.000385600
}

// Lookup resolves aliases, case and provider spellings; Suggest helps with unknown ids.
func ExampleCatalog_Lookup() {
	c, err := pricing.Load("")
	if err != nil {
		log.Fatal(err)
	}
	m, ok := c.Lookup("Anthropic", "claude-sonnet-4-0")
	fmt.Println(m.ID, ok)
	_, ok = c.Lookup("anthropic", "claude-haiku-5.5")
	fmt.Println(ok, c.Suggest("claude-haiku-5.5", 2))
	// Output:
	// claude-sonnet-4-20250514 true
	// false [claude-haiku-5-5 claude-haiku-4-5]
}

// A model without a price is unpriced, never $0.
func ExampleErrUnpriced() {
	c, err := pricing.Load("")
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Cost(pricing.Usage{Provider: "openai", Model: "gpt-unknown", At: time.Now(), InputTokens: 10})
	fmt.Println(errors.Is(err, pricing.ErrUnpriced))
	// Output:
	// true
}
