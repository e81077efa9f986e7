package pricing

import (
	_ "embed"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

//go:embed catalog.yaml
var embedded []byte

// Catalog is an immutable set of priced models with an index for lookups by id or alias. It is
// safe for concurrent use.
type Catalog struct {
	models []Model
	// byProvider maps provider + "\x00" + lower-case id or alias to an index in models.
	byProvider map[string]int
	// byName maps a lower-case id or alias to the models that answer to it, in catalog order.
	byName map[string][]int

	// found remembers, by the caller's exact spelling, the index in models that a provider and
	// model name found, so that pricing a record neither normalizes names nor allocates. The map
	// is replaced whole, never changed, so readers need no lock; foundMu serializes writers.
	found   atomic.Pointer[map[spelling]int]
	foundMu sync.Mutex
}

// spelling is a provider and model name exactly as a caller wrote them.
type spelling struct{ provider, model string }

// maxFound bounds the spellings a catalog remembers. Real traffic uses a few dozen; the bound
// keeps a stream of made-up variants (" gpt-4o", "  gpt-4o", ...) from growing it without limit.
// Only names that found a model are remembered, so unknown names never take up room.
const maxFound = 1024

// Load returns the embedded catalog with the price file userFile merged on top ("" for none). The
// file may be in the catalog format (YAML or JSON) or a LiteLLM price map; a model it defines
// replaces the embedded model with the same provider and id.
func Load(userFile string) (*Catalog, error) {
	c, _, err := LoadReported(userFile)
	return c, err
}

// LoadReported is Load, also returning what the user file contributed: the models it priced and
// the entries it skipped, by reason (the zero report when userFile is ""). A service prints the
// report's Warnings and Summary at start, so a skipped model is never a surprise.
func LoadReported(userFile string) (*Catalog, LoadReport, error) {
	base, _, err := parseFile(embedded, "embedded catalog.yaml")
	if err != nil {
		return nil, LoadReport{}, err
	}
	if userFile == "" {
		c, err := build(base)
		return c, LoadReport{}, err
	}
	data, err := os.ReadFile(userFile)
	if err != nil {
		return nil, LoadReport{}, err
	}
	user, rep, err := parseFile(data, filepath.Base(userFile))
	if err != nil {
		return nil, rep, err
	}
	c, err := build(user, base)
	return c, rep, err
}

// build indexes layers of models, the first layer on top: a model replaces lower-layer models
// with the same provider and id, and its names shadow theirs. Two models of one layer may not
// answer to the same name.
func build(layers ...[]Model) (*Catalog, error) {
	var models []Model
	ids := map[string]bool{}     // models kept by higher layers
	names := map[string]string{} // name key -> id key of the model that answers to it
	for _, layer := range layers {
		claimed := map[string]string{} // name key -> model id, within this layer
		layerIDs := map[string]bool{}
		for _, m := range layer {
			for _, name := range append([]string{m.ID}, m.Aliases...) {
				k := nameKey(m.Provider, name)
				if prev, ok := claimed[k]; ok && prev != m.ID {
					return nil, fmt.Errorf("%w: %s/%s and %s/%s both answer to %q", ErrCatalog, m.Provider, prev, m.Provider, m.ID, name)
				}
				claimed[k] = m.ID
			}
			idKey := nameKey(m.Provider, m.ID)
			if ids[idKey] {
				continue
			}
			if layerIDs[idKey] {
				return nil, fmt.Errorf("%w: %s/%s is listed twice", ErrCatalog, m.Provider, m.ID)
			}
			layerIDs[idKey] = true
			models = append(models, m)
		}
		for k, id := range claimed {
			if _, shadowed := names[k]; !shadowed {
				provider, _, _ := strings.Cut(k, "\x00")
				if idKey := nameKey(provider, id); layerIDs[idKey] {
					names[k] = idKey
				}
			}
		}
		for k := range layerIDs {
			ids[k] = true
		}
	}
	sort.SliceStable(models, func(i, j int) bool {
		a, b := models[i], models[j]
		return a.Provider < b.Provider || a.Provider == b.Provider && a.ID < b.ID
	})
	c := &Catalog{models: models, byProvider: map[string]int{}, byName: map[string][]int{}}
	pos := map[string]int{}
	for i, m := range models {
		pos[nameKey(m.Provider, m.ID)] = i
	}
	for k, idKey := range names {
		i := pos[idKey]
		c.byProvider[k] = i
		_, name, _ := strings.Cut(k, "\x00")
		c.byName[name] = append(c.byName[name], i)
	}
	for _, idx := range c.byName {
		slices.Sort(idx)
	}
	return c, nil
}

func nameKey(provider, name string) string {
	return provider + "\x00" + strings.ToLower(strings.TrimSpace(name))
}

// providerNames maps the names records and tools use for a provider to the catalog's name, so
// that "google", "gcp.gemini" and "gemini" find the same prices.
var providerNames = map[string]string{
	"anthropic": "anthropic", "claude": "anthropic",
	"openai": "openai", "text-completion-openai": "openai",
	"gemini": "gemini", "google": "gemini", "gcp.gemini": "gemini", "google_ai_studio": "gemini",
	"google-ai-studio": "gemini", "googleai": "gemini",
	"vertex_ai": "vertex_ai", "vertex": "vertex_ai", "vertexai": "vertex_ai", "gcp.vertex_ai": "vertex_ai",
	"bedrock": "bedrock", "aws.bedrock": "bedrock", "bedrock_converse": "bedrock",
	"azure": "azure", "azure.ai.openai": "azure", "azure_ai": "azure", "az.ai.openai": "azure",
}

// NormalizeProvider returns the catalog's name for a provider: lower case, with the OpenTelemetry
// and LiteLLM spellings folded together ("gcp.gemini" → "gemini", "vertex_ai-language-models" →
// "vertex_ai"). Unknown names are returned lower-cased and trimmed.
func NormalizeProvider(p string) string {
	p = strings.ToLower(strings.TrimSpace(p))
	if n, ok := providerNames[p]; ok {
		return n
	}
	if strings.HasPrefix(p, "vertex_ai-") {
		return "vertex_ai"
	}
	return p
}

// Lookup finds a model by provider and id or alias, ignoring case. An empty provider matches any
// provider (the first in catalog order wins). A model name may carry its provider as a prefix
// ("anthropic/claude-sonnet-5-5") and Gemini's "models/" prefix.
func (c *Catalog) Lookup(provider, model string) (Model, bool) {
	i, ok := c.find(provider, model)
	if !ok {
		return Model{}, false
	}
	return c.models[i].clone(), true
}

// find is Lookup without the copy: the index in c.models of the model provider and model name,
// remembered by their exact spelling after the first time.
func (c *Catalog) find(provider, model string) (int, bool) {
	key := spelling{provider, model}
	if found := c.found.Load(); found != nil {
		if i, ok := (*found)[key]; ok {
			return i, true
		}
	}
	i, ok := c.resolve(provider, model)
	if ok {
		c.remember(key, i)
	}
	return i, ok
}

// remember records that key found the model at index i, unless maxFound spellings are known.
func (c *Catalog) remember(key spelling, i int) {
	c.foundMu.Lock()
	defer c.foundMu.Unlock()
	var old map[spelling]int
	if p := c.found.Load(); p != nil {
		old = *p
	}
	if len(old) >= maxFound {
		return
	}
	next := make(map[spelling]int, len(old)+1)
	maps.Copy(next, old)
	// Copies, so that a name cut from a large buffer does not keep the buffer alive.
	next[spelling{strings.Clone(key.provider), strings.Clone(key.model)}] = i
	c.found.Store(&next)
}

// resolve normalizes provider and model name and finds the model's index in c.models.
func (c *Catalog) resolve(provider, model string) (int, bool) {
	prov := NormalizeProvider(provider)
	name := strings.ToLower(strings.TrimSpace(model))
	name = strings.TrimPrefix(name, "models/")
	if p, rest, ok := strings.Cut(name, "/"); ok {
		if np := NormalizeProvider(p); (prov == "" || prov == np) && c.hasProvider(np) {
			prov, name = np, rest
		}
	}
	if prov != "" {
		i, ok := c.byProvider[prov+"\x00"+name]
		return i, ok
	}
	idx := c.byName[name]
	if len(idx) == 0 {
		return 0, false
	}
	return idx[0], true
}

func (c *Catalog) hasProvider(p string) bool {
	i := sort.Search(len(c.models), func(i int) bool { return c.models[i].Provider >= p })
	return i < len(c.models) && c.models[i].Provider == p
}

// Models lists every model, sorted by provider and id.
func (c *Catalog) Models() []Model {
	out := make([]Model, len(c.models))
	for i, m := range c.models {
		out[i] = m.clone()
	}
	return out
}

// Versions lists every price version of every model, sorted by key: what a catalog prices, to
// compare two catalogs (a reload against the embedded one, a JSON round trip).
func (c *Catalog) Versions() []Version {
	var out []Version
	for _, m := range c.models {
		for _, p := range m.Prices {
			out = append(out, m.version(p))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Suggest returns up to n known ids and aliases close to model, of any provider, for "unknown
// model" messages; see SuggestFor.
func (c *Catalog) Suggest(model string, n int) []string { return c.SuggestFor("", model, n) }

// SuggestFor returns up to n known ids and aliases close to model, for "unknown model" messages:
// only close matches, so that an unknown id is never answered with unrelated models. Close means
// within maxSuggestDistance edits ignoring case, a name that extends or contains model counting as
// one edit away; when provider names a provider of the catalog only its models are candidates.
// Nearest first, ties broken alphabetically; nil when nothing is close.
func (c *Catalog) SuggestFor(provider, model string, n int) []string {
	if n <= 0 {
		return nil
	}
	q := strings.ToLower(strings.TrimSpace(model))
	if p, rest, ok := strings.Cut(q, "/"); ok && c.hasProvider(NormalizeProvider(p)) {
		provider, q = p, rest
	}
	prov := NormalizeProvider(provider)
	if !c.hasProvider(prov) {
		prov = ""
	}
	type cand struct {
		name string
		dist int
	}
	seen := map[string]bool{}
	var cands []cand
	for _, m := range c.models {
		if prov != "" && m.Provider != prov {
			continue
		}
		for _, name := range append([]string{m.ID}, m.Aliases...) {
			if seen[name] {
				continue
			}
			seen[name] = true
			lower := strings.ToLower(name)
			d := distance(q, lower)
			if len(lower) > len(q) {
				// A name that extends the query ("claude-sonnet-4" → "claude-sonnet-4-0") or
				// contains it ("sonnet-4-0") is nearly as good as an exact match.
				d = min(d, distance(q, lower[:len(q)])+1)
				if q != "" && strings.Contains(lower, q) {
					d = min(d, 1)
				}
			}
			if d <= maxSuggestDistance(q) {
				cands = append(cands, cand{name, d})
			}
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		if cands[i].dist != cands[j].dist {
			return cands[i].dist < cands[j].dist
		}
		return cands[i].name < cands[j].name
	})
	var out []string
	for _, cd := range cands[:min(n, len(cands))] {
		out = append(out, cd.name)
	}
	return out
}

// maxSuggestDistance is how many edits away a suggestion for q may be: a quarter of its length,
// at least 2 (a typo and a missing dash) and at most 6. "claude-haiku-9" finds
// "claude-haiku-4-5" (3 edits) but not "gpt-4o".
func maxSuggestDistance(q string) int { return min(max(2, len(q)/4), 6) }

// distance is the Levenshtein distance between a and b, in bytes.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// clone copies m so that callers cannot change the catalog through its slices.
func (m Model) clone() Model {
	m.Aliases = slices.Clone(m.Aliases)
	m.Prices = slices.Clone(m.Prices)
	for i := range m.Prices {
		m.Prices[i].LongContext = slices.Clone(m.Prices[i].LongContext)
	}
	return m
}
