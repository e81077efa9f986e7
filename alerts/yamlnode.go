package alerts

import (
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ledgerd/ledgerd/money"
)

// The configuration is read by walking the YAML node tree rather than by yaml.Unmarshal into
// structs, so every error (an unknown key, a wrong type, a bad value) names the key and its line in
// the words of the file, not of Go types. Aliases and merge keys are refused: a config file has no
// need of them, and refusing them rules out alias bombs.

// ConfigError is a mistake in the configuration file, at a line.
type ConfigError struct {
	Line int
	Msg  string
}

// Error says where and what.
func (e *ConfigError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

func errAt(n *yaml.Node, format string, args ...any) error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &ConfigError{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// mapping is a YAML mapping whose keys have been checked against the ones allowed.
type mapping struct {
	node   *yaml.Node
	where  string
	values map[string]*yaml.Node
	keys   map[string]*yaml.Node
}

// fields checks that n is a mapping whose keys are all in allowed, each once.
func fields(n *yaml.Node, where string, allowed ...string) (*mapping, error) {
	if n.Kind == yaml.AliasNode {
		return nil, errAt(n, "%s: YAML aliases are not supported", where)
	}
	if n.Kind != yaml.MappingNode {
		return nil, errAt(n, "%s must be a mapping of keys to values", where)
	}
	m := &mapping{node: n, where: where, values: map[string]*yaml.Node{}, keys: map[string]*yaml.Node{}}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, errAt(k, "%s: keys must be plain words", where)
		}
		if k.Value == "<<" {
			return nil, errAt(k, "%s: YAML merge keys are not supported", where)
		}
		if v.Kind == yaml.AliasNode {
			return nil, errAt(v, "%s: %s: YAML aliases are not supported", where, k.Value)
		}
		if !slices.Contains(allowed, k.Value) {
			return nil, errAt(k, "%s: unknown key %q (known keys: %s)", where, k.Value, strings.Join(allowed, ", "))
		}
		if prev, dup := m.keys[k.Value]; dup {
			return nil, errAt(k, "%s: key %q appears twice (first at line %d)", where, k.Value, prev.Line)
		}
		m.keys[k.Value] = k
		m.values[k.Value] = v
	}
	return m, nil
}

// has reports whether key is present (even if null).
func (m *mapping) has(key string) bool { _, ok := m.values[key]; return ok }

// value returns the node of key, or nil.
func (m *mapping) value(key string) *yaml.Node { return m.values[key] }

// scalar returns key's scalar value; ok is false when the key is absent or null.
func (m *mapping) scalar(key string) (s string, n *yaml.Node, ok bool, err error) {
	n = m.values[key]
	if n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return "", n, false, nil
	}
	if n.Kind != yaml.ScalarNode {
		return "", n, false, errAt(n, "%s: %s must be a single value", m.where, key)
	}
	return n.Value, n, true, nil
}

func (m *mapping) str(key string, dst *string) error {
	s, _, ok, err := m.scalar(key)
	if ok {
		*dst = s
	}
	return err
}

// maxDuration bounds every duration in the file (a year); longer ones are mistakes.
const maxDuration = 366 * 24 * time.Hour

// duration reads a Go duration ("90s", "15m", "4h") or whole days ("7d").
func (m *mapping) duration(key string, dst *time.Duration) error {
	s, n, ok, err := m.scalar(key)
	if !ok || err != nil {
		return err
	}
	var d time.Duration
	if days, found := strings.CutSuffix(s, "d"); found {
		v, perr := strconv.Atoi(days)
		if perr != nil || v < 0 || v > 366 {
			return errAt(n, "%s: %s: %q is not a duration such as 90s, 15m, 4h or 7d", m.where, key, s)
		}
		d = time.Duration(v) * 24 * time.Hour
	} else if d, err = time.ParseDuration(s); err != nil {
		return errAt(n, "%s: %s: %q is not a duration such as 90s, 15m, 4h or 7d", m.where, key, s)
	}
	if d < 0 || d > maxDuration {
		return errAt(n, "%s: %s: %s is outside 0 to 366d", m.where, key, s)
	}
	*dst = d
	return nil
}

// usd reads a dollar amount as a decimal string ("50", "0.25").
func (m *mapping) usd(key string, dst *money.Nanos) error {
	s, n, ok, err := m.scalar(key)
	if !ok || err != nil {
		return err
	}
	v, perr := money.ParseUSD(s)
	if perr != nil {
		return errAt(n, "%s: %s: %q is not a dollar amount such as \"50\" or \"12.50\"", m.where, key, s)
	}
	if v <= 0 {
		return errAt(n, "%s: %s must be more than zero", m.where, key)
	}
	*dst = v
	return nil
}

// ratio reads a positive decimal such as 1.5, exactly.
func (m *mapping) ratio(key string, dst **big.Rat) error {
	s, n, ok, err := m.scalar(key)
	if !ok || err != nil {
		return err
	}
	if len(s) > 32 || strings.ContainsAny(s, "/eE") {
		return errAt(n, "%s: %s: %q is not a decimal number such as 1.5", m.where, key, s)
	}
	r, good := new(big.Rat).SetString(s)
	if !good {
		return errAt(n, "%s: %s: %q is not a decimal number such as 1.5", m.where, key, s)
	}
	*dst = r
	return nil
}

// count reads a whole number from 1 to a billion.
func (m *mapping) count(key string, dst *int64) error {
	s, n, ok, err := m.scalar(key)
	if !ok || err != nil {
		return err
	}
	v, perr := strconv.ParseInt(s, 10, 64)
	if perr != nil || v < 1 || v > 1_000_000_000 {
		return errAt(n, "%s: %s: %q is not a whole number from 1 to 1000000000", m.where, key, s)
	}
	*dst = v
	return nil
}

func (m *mapping) boolean(key string, dst *bool) error {
	s, n, ok, err := m.scalar(key)
	if !ok || err != nil {
		return err
	}
	switch s {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return errAt(n, "%s: %s must be true or false", m.where, key)
	}
	return nil
}

// list reads a sequence of scalars; ok is false when key is absent.
func (m *mapping) list(key string) (out []string, ok bool, err error) {
	n := m.values[key]
	if n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return nil, false, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, false, errAt(n, "%s: %s must be a list such as [a, b]", m.where, key)
	}
	out = []string{}
	for _, it := range n.Content {
		if it.Kind != yaml.ScalarNode {
			return nil, false, errAt(it, "%s: %s: each item must be a single value", m.where, key)
		}
		out = append(out, it.Value)
	}
	return out, true, nil
}

// labelName matches a Prometheus label name, which Alertmanager requires.
var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// labels reads a mapping of label names to values.
func (m *mapping) labels(key string) (map[string]string, error) {
	n := m.values[key]
	if n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, errAt(n, "%s: %s must be a mapping of label names to values", m.where, key)
	}
	out := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || !labelName.MatchString(k.Value) || strings.HasPrefix(k.Value, "__") {
			return nil, errAt(k, "%s: %s: %q is not a label name (letters, digits and _, not starting with a digit or __)", m.where, key, k.Value)
		}
		if v.Kind != yaml.ScalarNode {
			return nil, errAt(v, "%s: %s: the value of %s must be a single value", m.where, key, k.Value)
		}
		if _, dup := out[k.Value]; dup {
			return nil, errAt(k, "%s: %s: label %q appears twice", m.where, key, k.Value)
		}
		if len(v.Value) > 1024 {
			return nil, errAt(v, "%s: %s: the value of %s is longer than 1024 bytes", m.where, key, k.Value)
		}
		out[k.Value] = v.Value
	}
	return out, nil
}

// items returns the elements of a sequence under key.
func (m *mapping) items(key string) ([]*yaml.Node, bool, error) {
	n := m.values[key]
	if n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return nil, false, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, false, errAt(n, "%s: %s must be a list", m.where, key)
	}
	return n.Content, true, nil
}
