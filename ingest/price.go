package ingest

import (
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/pricing"
	"github.com/ledgerd/ledgerd/schema"
)

// CatalogPrice adapts the catalog to the writer: an attempt the catalog cannot price is stored as
// unpriced.
func CatalogPrice(c *pricing.Catalog) PriceFunc {
	return func(a *schema.Attempt) Costing {
		cost, err := c.Cost(pricing.Usage{Provider: a.Provider, Model: a.Model, At: a.StartedAt,
			InputTokens: a.InputTokens, OutputTokens: a.OutputTokens, CacheWriteTokens: a.CacheWriteTokens,
			CacheWrite1hTokens: a.CacheWrite1hTokens, CacheReadTokens: a.CacheReadTokens,
			ReasoningTokens: a.ReasoningTokens, Batch: a.Batch})
		if err != nil {
			return Costing{}
		}
		v := cost.Version
		return Costing{Cost: cost.Total, NoCache: cost.NoCache, Priced: true,
			Version: store.PriceVersion{Key: v.Key, Provider: v.Provider, Model: v.Model, EffectiveFrom: v.EffectiveFrom}}
	}
}
