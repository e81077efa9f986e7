// Package pricing is ledgerd's price catalog and cost engine: it knows what each model costs per
// token at each point in time and turns one attempt's token counts into an exact cost.
//
// # The catalog
//
// Prices are data, not code. The catalog embedded in the binary (catalog.yaml) lists each model
// with its provider, canonical id, aliases and a list of price versions, each with the date it
// took effect and the page its figures came from. A user file (Load's argument) is merged on top:
// either the same YAML/JSON format or a copy of LiteLLM's model_prices_and_context_window.json,
// detected by its shape. A model in the user file replaces the embedded model of the same
// provider and id, versions and all.
//
// A price version holds, in dollars per million tokens: input, output, 5-minute cache write,
// 1-hour cache write and cache read (and optionally a separate reasoning price), a batch discount,
// and long-context tiers. A cache price the file leaves out is billed at the input price (the
// provider has no separate rate for it); a tier price left out is the base price of the same kind.
// A version without a batch discount has no known batch price, so a batch attempt on it is
// unpriced rather than guessed.
//
// # The rules
//
//   - The ledger's token counts never overlap: input (uncached), cache writes, cache reads and
//     output. CacheWrite1hTokens is the part of CacheWriteTokens written with the 1-hour TTL.
//   - Reasoning tokens are part of OutputTokens and are billed once, at the output price (or at the
//     version's reasoning price when it has one, in place of the output price for those tokens).
//   - The price version used is the latest whose effective_from is at or before the attempt's
//     start. An attempt before a model's first version is unpriced.
//   - Long context: when total input (input + cache writes + cache reads) of one request exceeds a
//     tier's threshold, every token of that request, output included, is billed at the tier's
//     prices. The threshold is per request, never per day or per bucket.
//   - Batch: the batch discount multiplies every component, cache writes and reads included; it
//     stacks with long-context prices and cache prices by plain multiplication. A version may
//     give the output its own batch discount (BatchOutputDiscount); input and cache components
//     keep BatchDiscount.
//   - A model with no price, or no price in effect, is unpriced: errors.Is(err, ErrUnpriced).
//     It is never priced at $0.
//
// # Rounding
//
// Prices are held exactly as integer nano-dollars per million tokens. A cost is computed exactly
// (in int64 when every intermediate provably fits, as for any real request, and in big integers
// otherwise, to the same result): each component is tokens × price per million × (1 − batch
// discount), the components are summed exactly, and the sum is divided by one million and rounded
// half away from zero to whole nano-dollars once per record. Each component of the breakdown is
// rounded the same way on its own, so the components may differ from Total by a few nano-dollars;
// Total is the amount of record. Imported prices with more than nine decimals per million tokens
// (LiteLLM's per-token floats written to more than fifteen places) are rounded to nine, half away
// from zero.
//
// # Out of scope
//
// Gemini's explicit context caching also bills cache storage per token-hour. One attempt does not
// show how long a cache lived, so storage is not part of any cost the ledger computes.
package pricing

import (
	"errors"
	"time"

	"github.com/ledgerd/ledgerd/money"
)

// ErrUnpriced reports a model, or a moment, for which the catalog has no price. Costs of such
// attempts are unknown, never $0.
var ErrUnpriced = errors.New("unpriced")

// ErrUsage reports token counts that cannot describe a real request, such as negative counts or a
// 1-hour cache write larger than the whole cache write.
var ErrUsage = errors.New("invalid usage")

// ErrCatalog reports a price file that cannot be read as a catalog.
var ErrCatalog = errors.New("invalid price catalog")

// Usage is what one request consumed, in the ledger's non-overlapping token counts, with what is
// needed to choose its price.
type Usage struct {
	Provider string
	Model    string
	// At is when the request was made; it selects the price version.
	At                 time.Time
	InputTokens        int64
	OutputTokens       int64
	CacheWriteTokens   int64
	CacheWrite1hTokens int64
	CacheReadTokens    int64
	ReasoningTokens    int64
	Batch              bool
}

// Version names one price version, for recording which prices a stored cost used.
type Version struct {
	// Key is stable and unique: provider/model@effective-date#fingerprint, where the fingerprint
	// is a hash of the prices, so the same key always means the same prices even when a user file
	// overrides a model at the same date.
	Key           string    `json:"key"`
	Provider      string    `json:"provider"`
	Model         string    `json:"model"`
	EffectiveFrom time.Time `json:"effective_from"`
}

// Cost is the priced breakdown of one record (or of several identical ones, see CostTimes).
type Cost struct {
	Total        money.Nanos `json:"total_usd"`
	Input        money.Nanos `json:"input_usd"`
	Output       money.Nanos `json:"output_usd"`
	CacheWrite5m money.Nanos `json:"cache_write_5m_usd"`
	CacheWrite1h money.Nanos `json:"cache_write_1h_usd"`
	CacheRead    money.Nanos `json:"cache_read_usd"`
	// NoCache is what the same usage would cost with caching off: cache writes and reads billed as
	// plain input, under the same batch and long-context rules.
	NoCache money.Nanos `json:"nocache_usd"`
	// LongContext says the request exceeded a long-context threshold and used the tier's prices.
	LongContext bool    `json:"long_context"`
	Version     Version `json:"version"`
}

// Rates are the prices of each kind of token, in dollars per million tokens.
type Rates struct {
	Input        money.Nanos `json:"input_per_mtok"`
	Output       money.Nanos `json:"output_per_mtok"`
	CacheWrite5m money.Nanos `json:"cache_write_5m_per_mtok"`
	CacheWrite1h money.Nanos `json:"cache_write_1h_per_mtok"`
	CacheRead    money.Nanos `json:"cache_read_per_mtok"`
	// Reasoning, when set, prices the reasoning part of the output instead of Output.
	Reasoning *money.Nanos `json:"reasoning_per_mtok,omitempty"`
}

// Tier is a long-context price tier: requests whose total input exceeds AboveInputTokens are
// billed entirely at its rates.
type Tier struct {
	AboveInputTokens int64 `json:"above_input_tokens"`
	Rates
}

// Price is one price version of a model: the rates in effect from EffectiveFrom until the next
// version of the same model.
type Price struct {
	Key           string    `json:"key"`
	EffectiveFrom time.Time `json:"effective_from"`
	// Source says where the figures came from: a pricing page, a file name, a contract.
	Source string `json:"source"`
	Rates
	// BatchDiscount is the fraction taken off every component of a batch request; nil means the
	// batch price is unknown and a batch request is unpriced.
	BatchDiscount *Ratio `json:"batch_discount,omitempty"`
	// BatchOutputDiscount, when set, is the fraction taken off the output (reasoning included) of
	// a batch request in place of BatchDiscount, for providers whose batch prices cut input and
	// output by different fractions (Azure's gpt-4.1-nano: 45.45% off input, 50% off output).
	// BatchDiscount still applies to input, cache writes and cache reads, and must be set too.
	BatchOutputDiscount *Ratio `json:"batch_output_discount,omitempty"`
	// LongContext lists the tiers in ascending order of threshold.
	LongContext []Tier `json:"long_context,omitempty"`
}

// Model is one priced model of one provider.
type Model struct {
	Provider string   `json:"provider"`
	ID       string   `json:"id"`
	Name     string   `json:"name,omitempty"`
	Aliases  []string `json:"aliases,omitempty"`
	// Prices lists the price versions in ascending order of EffectiveFrom.
	Prices []Price `json:"prices"`
}

// PriceAt returns the price version in effect at t: the latest one that took effect at or
// before t.
func (m Model) PriceAt(t time.Time) (Price, bool) {
	if i := priceIndex(m.Prices, t); i >= 0 {
		return m.Prices[i], true
	}
	return Price{}, false
}

// priceIndex is the index in prices, ascending by EffectiveFrom, of the version in effect at t,
// or -1 for none.
func priceIndex(prices []Price, t time.Time) int {
	for i := len(prices) - 1; i >= 0; i-- {
		if !prices[i].EffectiveFrom.After(t) {
			return i
		}
	}
	return -1
}

// version names p as a Version of m.
func (m Model) version(p Price) Version {
	return Version{Key: p.Key, Provider: m.Provider, Model: m.ID, EffectiveFrom: p.EffectiveFrom}
}
