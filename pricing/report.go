package pricing

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ledgerd/ledgerd/internal/numfmt"
)

// SkipReason says why an entry of a price file was not imported.
type SkipReason string

// The reasons an entry of a LiteLLM price map is skipped.
const (
	// SkipNotTokenPriced: no input and output price per token (image, audio, rerank and search
	// models, LiteLLM's "sample_spec" template). Nothing a ledger record could be priced with.
	SkipNotTokenPriced SkipReason = "not priced per token"
	// SkipNotObject: a top-level value that is not an entry, such as a "last_updated" string.
	SkipNotObject SkipReason = "not an entry"
	// SkipUnsupported: a price ledgerd cannot represent or read (a price that is not a number, a
	// batch price above the base price).
	SkipUnsupported SkipReason = "prices ledgerd cannot represent"
	// SkipDuplicate: a provider-prefixed entry of a model the file also lists bare.
	SkipDuplicate SkipReason = "listed twice"
)

// Skip is one entry of a price file that was not imported.
type Skip struct {
	Entry  string     `json:"entry"`
	Reason SkipReason `json:"reason"`
	// Detail says what exactly was wrong, for the warning line.
	Detail string `json:"detail,omitempty"`
}

// LoadReport says what a user price file contributed: how many models it priced and which entries
// were skipped and why. A file in the catalog format skips nothing: any error in it is fatal.
type LoadReport struct {
	File    string `json:"file"`
	Format  string `json:"format"`
	Priced  int    `json:"priced"`
	Skipped []Skip `json:"skipped,omitempty"`
}

// Warnings returns one line per skipped entry worth a person's attention, naming the entry and
// why: values that are not entries and prices ledgerd cannot represent. Entries that are not
// priced per token, and duplicates, are only counted (a LiteLLM file has hundreds of image and
// audio models; a line each would bury the lines that matter).
func (r LoadReport) Warnings() []string {
	var out []string
	for _, s := range r.Skipped {
		if s.Reason == SkipNotObject || s.Reason == SkipUnsupported {
			out = append(out, fmt.Sprintf("%s: skipped %q (%s): %s", r.File, s.Entry, s.Reason, s.Detail))
		}
	}
	return out
}

// Counts returns the number of skipped entries by reason.
func (r LoadReport) Counts() map[SkipReason]int {
	out := map[SkipReason]int{}
	for _, s := range r.Skipped {
		out[s.Reason]++
	}
	return out
}

// Summary is one line: the file, how many models it priced and how many entries each reason
// skipped, e.g. "prices.json (LiteLLM price map): 1,804 models priced; skipped 412 not priced per
// token, 1 not an entry".
func (r LoadReport) Summary() string {
	noun := "models"
	if r.Priced == 1 {
		noun = "model"
	}
	s := fmt.Sprintf("%s (%s): %s %s priced", r.File, r.Format, numfmt.Count(int64(r.Priced)), noun)
	if len(r.Skipped) > 0 {
		s += "; skipped " + r.skipCounts()
	}
	return s
}

// skipCounts lists the skip counts by reason, largest first.
func (r LoadReport) skipCounts() string {
	counts := r.Counts()
	reasons := make([]SkipReason, 0, len(counts))
	for k := range counts {
		reasons = append(reasons, k)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if counts[reasons[i]] != counts[reasons[j]] {
			return counts[reasons[i]] > counts[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	parts := make([]string, len(reasons))
	for i, k := range reasons {
		parts[i] = fmt.Sprintf("%s %s", numfmt.Count(int64(counts[k])), k)
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}
