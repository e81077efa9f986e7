package promrules_test

import (
	"os/exec"
	"testing"
)

// promtool finds promtool or fails the test: the rules are only known good once promtool has read
// them.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (%v): install Debian's prometheus package (bash scripts/install-deps.sh)", err)
	}
	return p
}

// TestRules runs promtool over the rule file and its unit tests.
func TestRules(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	cases := []struct {
		name string
		args []string
	}{
		{"check", []string{"check", "rules", "ledgerd.rules.yml"}},                // syntax, PromQL, templates
		{"unit tests", []string{"test", "rules", "tests/ledgerd.rules.test.yml"}}, // each alert fires where it should, only there
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(bin, c.args...)
			cmd.Dir = rulesDir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("promtool %v: %v\n%s", c.args, err, out)
			}
		})
	}
}
