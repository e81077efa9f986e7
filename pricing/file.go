package pricing

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ledgerd/ledgerd/money"
)

// The catalog file format, in YAML or JSON (GET /v1/prices output is a valid file too):
//
//	models:
//	  - provider: anthropic
//	    id: claude-haiku-5-5
//	    name: Claude Haiku 5.5
//	    aliases: [some-dated-id]
//	    prices:
//	      - effective_from: 2026-10-07        # a date (UTC midnight) or an RFC 3339 time
//	        source: https://...               # required: where the figures came from
//	        input_per_mtok: "0.10"            # required, dollars per million tokens
//	        output_per_mtok: "0.50"           # required
//	        cache_write_5m_per_mtok: "0.125"  # optional, default input_per_mtok
//	        cache_write_1h_per_mtok: "0.20"   # optional, default input_per_mtok
//	        cache_read_per_mtok: "0.01"       # optional, default input_per_mtok
//	        reasoning_per_mtok: "3.50"        # optional, default: reasoning billed as output
//	        batch_discount: "0.5"             # optional, default: batch price unknown
//	        batch_output_discount: "0.5"      # optional, default batch_discount: output's own
//	        long_context:                     # optional
//	          - above_input_tokens: 100000
//	            input_per_mtok: "0.50"        # each tier price defaults to the base price
//	            output_per_mtok: "2.50"

type fileCatalog struct {
	Models []fileModel `yaml:"models"`
	// Unpriced is accepted, and ignored, so that GET /v1/prices output (which lists the models
	// the ledger could not price beside the catalog) loads as a file.
	Unpriced yaml.Node `yaml:"unpriced"`
}

type fileModel struct {
	Provider string      `yaml:"provider"`
	ID       string      `yaml:"id"`
	Name     string      `yaml:"name"`
	Aliases  []string    `yaml:"aliases"`
	Prices   []filePrice `yaml:"prices"`
}

type filePrice struct {
	// Key is accepted so that GET /v1/prices output loads as a file; it is recomputed.
	Key           string    `yaml:"key"`
	EffectiveFrom string    `yaml:"effective_from"`
	Source        string    `yaml:"source"`
	Rates         fileRates `yaml:",inline"`
	BatchDiscount *string   `yaml:"batch_discount"`
	// BatchOutputDiscount is the output's batch discount when it differs from BatchDiscount.
	BatchOutputDiscount *string    `yaml:"batch_output_discount"`
	LongContext         []fileTier `yaml:"long_context"`
}

type fileTier struct {
	AboveInputTokens int64     `yaml:"above_input_tokens"`
	Rates            fileRates `yaml:",inline"`
}

type fileRates struct {
	Input        *string `yaml:"input_per_mtok"`
	Output       *string `yaml:"output_per_mtok"`
	CacheWrite5m *string `yaml:"cache_write_5m_per_mtok"`
	CacheWrite1h *string `yaml:"cache_write_1h_per_mtok"`
	CacheRead    *string `yaml:"cache_read_per_mtok"`
	Reasoning    *string `yaml:"reasoning_per_mtok"`
}

// parseFile reads a price file in either format, telling them apart by shape: a JSON object
// without a top-level "models" key is a LiteLLM price map. name labels errors and sources. The
// report says what was priced and what was skipped.
func parseFile(data []byte, name string) ([]Model, LoadReport, error) {
	trimmed := bytes.TrimSpace(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")))
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var top map[string]json.RawMessage
		if json.Unmarshal(trimmed, &top) == nil {
			if _, ok := top["models"]; !ok {
				return parseLiteLLM(top, name)
			}
		}
	}
	models, err := parseCatalog(trimmed, name)
	return models, LoadReport{File: name, Format: "ledgerd catalog", Priced: len(models)}, err
}

// parseCatalog reads the ledgerd catalog format.
func parseCatalog(data []byte, name string) ([]Model, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f fileCatalog
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCatalog, name, err)
	}
	if len(f.Models) == 0 {
		return nil, fmt.Errorf("%w: %s: no models", ErrCatalog, name)
	}
	models := make([]Model, 0, len(f.Models))
	for i, fm := range f.Models {
		m, err := fm.model()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: model %d (%s): %v", ErrCatalog, name, i+1, fm.ID, err)
		}
		models = append(models, m)
	}
	return models, nil
}

func (fm fileModel) model() (Model, error) {
	m := Model{Provider: fm.Provider, ID: fm.ID, Name: fm.Name, Aliases: fm.Aliases}
	for i, fp := range fm.Prices {
		p, err := fp.price()
		if err != nil {
			return Model{}, fmt.Errorf("price %d: %w", i+1, err)
		}
		m.Prices = append(m.Prices, p)
	}
	return m, finish(&m)
}

func (fp filePrice) price() (Price, error) {
	var p Price
	var err error
	if p.EffectiveFrom, err = parseWhen(fp.EffectiveFrom); err != nil {
		return Price{}, err
	}
	if p.Source = strings.TrimSpace(fp.Source); p.Source == "" {
		return Price{}, fmt.Errorf("source is required: say where the figures came from")
	}
	if fp.Rates.Input == nil || fp.Rates.Output == nil {
		return Price{}, fmt.Errorf("input_per_mtok and output_per_mtok are required")
	}
	in, err := rate("input_per_mtok", fp.Rates.Input, 0)
	if err != nil {
		return Price{}, err
	}
	base := Rates{Input: in, Output: in, CacheWrite5m: in, CacheWrite1h: in, CacheRead: in}
	if p.Rates, err = fp.Rates.apply(base); err != nil {
		return Price{}, err
	}
	if fp.BatchDiscount != nil {
		d, err := ParseRatio(*fp.BatchDiscount)
		if err != nil {
			return Price{}, fmt.Errorf("batch_discount: %w", err)
		}
		p.BatchDiscount = &d
	}
	if fp.BatchOutputDiscount != nil {
		if fp.BatchDiscount == nil {
			return Price{}, fmt.Errorf("batch_output_discount needs batch_discount (the input's)")
		}
		d, err := ParseRatio(*fp.BatchOutputDiscount)
		if err != nil {
			return Price{}, fmt.Errorf("batch_output_discount: %w", err)
		}
		p.BatchOutputDiscount = &d
	}
	for i, ft := range fp.LongContext {
		t := Tier{AboveInputTokens: ft.AboveInputTokens}
		if t.Rates, err = ft.Rates.apply(p.Rates); err != nil {
			return Price{}, fmt.Errorf("long_context %d: %w", i+1, err)
		}
		p.LongContext = append(p.LongContext, t)
	}
	return p, nil
}

// apply returns base with every rate the file sets replaced.
func (fr fileRates) apply(base Rates) (Rates, error) {
	r := base
	var err error
	for _, f := range []struct {
		name string
		src  *string
		dst  *money.Nanos
	}{
		{"input_per_mtok", fr.Input, &r.Input},
		{"output_per_mtok", fr.Output, &r.Output},
		{"cache_write_5m_per_mtok", fr.CacheWrite5m, &r.CacheWrite5m},
		{"cache_write_1h_per_mtok", fr.CacheWrite1h, &r.CacheWrite1h},
		{"cache_read_per_mtok", fr.CacheRead, &r.CacheRead},
	} {
		if *f.dst, err = rate(f.name, f.src, *f.dst); err != nil {
			return Rates{}, err
		}
	}
	if fr.Reasoning != nil {
		v, err := rate("reasoning_per_mtok", fr.Reasoning, 0)
		if err != nil {
			return Rates{}, err
		}
		r.Reasoning = &v
	}
	return r, nil
}

// rate parses an optional rate, returning def when it is absent.
func rate(name string, s *string, def money.Nanos) (money.Nanos, error) {
	if s == nil {
		return def, nil
	}
	v, err := parseRate(*s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return v, nil
}

// parseWhen reads an effective date: a plain date (midnight UTC) or an RFC 3339 time, from 1970
// on.
func parseWhen(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	t, err := time.Parse("2006-01-02", s)
	if err != nil {
		if t, err = time.Parse(time.RFC3339, s); err != nil {
			return time.Time{}, fmt.Errorf("effective_from %q is neither a date (2006-01-02) nor an RFC 3339 time", s)
		}
	}
	if t.Year() < 1970 {
		return time.Time{}, fmt.Errorf("effective_from %q is before 1970", s)
	}
	return t.UTC(), nil
}

// finish normalises and checks a model read from any format and gives each version its key.
func finish(m *Model) error {
	m.Provider = NormalizeProvider(m.Provider)
	m.ID = strings.TrimSpace(m.ID)
	if m.Provider == "" || m.ID == "" {
		return fmt.Errorf("provider and id are required")
	}
	if len(m.Prices) == 0 {
		return fmt.Errorf("no prices")
	}
	for i, a := range m.Aliases {
		if m.Aliases[i] = strings.TrimSpace(a); m.Aliases[i] == "" {
			return fmt.Errorf("empty alias")
		}
	}
	sort.SliceStable(m.Prices, func(i, j int) bool { return m.Prices[i].EffectiveFrom.Before(m.Prices[j].EffectiveFrom) })
	for i := range m.Prices {
		p := &m.Prices[i]
		if i > 0 && p.EffectiveFrom.Equal(m.Prices[i-1].EffectiveFrom) {
			return fmt.Errorf("two prices take effect at %s", p.EffectiveFrom.Format(time.RFC3339))
		}
		if p.BatchOutputDiscount != nil && p.BatchDiscount == nil {
			return fmt.Errorf("a batch output discount needs a batch discount for the input")
		}
		if p.BatchOutputDiscount != nil && *p.BatchOutputDiscount == *p.BatchDiscount {
			p.BatchOutputDiscount = nil
		}
		for j, t := range p.LongContext {
			if t.AboveInputTokens <= 0 || j > 0 && t.AboveInputTokens <= p.LongContext[j-1].AboveInputTokens {
				return fmt.Errorf("long-context thresholds must be positive and ascending")
			}
		}
		p.Key = fmt.Sprintf("%s/%s@%s#%s", m.Provider, m.ID, whenKey(p.EffectiveFrom), fingerprint(*p))
	}
	return nil
}

func whenKey(t time.Time) string {
	if t.Equal(t.Truncate(24 * time.Hour)) {
		return t.Format("2006-01-02")
	}
	return t.Format(time.RFC3339)
}

// fingerprint hashes everything that decides a cost, so a version key never names two different
// sets of prices.
func fingerprint(p Price) string {
	var b strings.Builder
	writeRates := func(r Rates) {
		fmt.Fprintf(&b, "%d %d %d %d %d", r.Input, r.Output, r.CacheWrite5m, r.CacheWrite1h, r.CacheRead)
		if r.Reasoning != nil {
			fmt.Fprintf(&b, " r%d", *r.Reasoning)
		}
		b.WriteByte(';')
	}
	fmt.Fprintf(&b, "%d;", p.EffectiveFrom.UnixNano())
	writeRates(p.Rates)
	if p.BatchDiscount != nil {
		fmt.Fprintf(&b, "b%d;", *p.BatchDiscount)
	}
	if p.BatchOutputDiscount != nil {
		fmt.Fprintf(&b, "bo%d;", *p.BatchOutputDiscount)
	}
	for _, t := range p.LongContext {
		fmt.Fprintf(&b, "t%d:", t.AboveInputTokens)
		writeRates(t.Rates)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:4])
}
