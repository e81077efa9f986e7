package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func testNow() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) }

// runTest runs costcalc in-process with a fixed clock and the given environment.
func runTest(t *testing.T, environ map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut, func(k string) string { return environ[k] }, testNow)
	return code, out.String(), errOut.String()
}

func TestGolden(t *testing.T) {
	t.Parallel()
	router := []string{"--calls-per-day", "2000", "--input-tokens", "333", "--output-tokens", "9"}
	cases := []struct {
		golden string
		args   []string
	}{
		// the ticket router of shared/PRICING.md on three models side by side
		{"estimate.golden", append([]string{"estimate", "--model", "claude-haiku-5-5,claude-sonnet-5-5", "--model", "gpt-6-luna"}, router...)},
		// the same as JSON, money as decimal strings
		{"estimate.json.golden", append([]string{"estimate", "--model", "claude-haiku-5-5", "--model", "claude-sonnet-5-5", "--json"}, router...)},
		// and as CSV
		{"estimate.csv.golden", append([]string{"estimate", "--model", "claude-haiku-5-5,claude-sonnet-5-5", "--csv"}, router...)},
		// cache, batch and long context together, over a 30.5-day month
		{"estimate-long.golden", []string{"estimate", "--model", "claude-sonnet-4-20250514", "--calls-per-day", "100", "--days-per-month", "30.5",
			"--input-tokens", "150000", "--cache-read-tokens", "60000", "--cache-write-tokens", "2000", "--output-tokens", "1200", "--batch"}},
		// caching the 3,856-token prompt over 20 calls: 3.15 units against 20, 25% worse when broken
		{"cache.golden", []string{"cache", "--model", "claude-haiku-5-5", "--prefix-tokens", "3856", "--calls", "20"}},
		// the 1-hour TTL at a 90% hit rate, as JSON
		{"cache.json.golden", []string{"cache", "--model", "claude-haiku-5-5", "--prefix-tokens", "3856", "--calls", "20", "--ttl", "1h", "--hit-rate", "90%", "--json"}},
		// the catalog in effect on the test date
		{"prices.golden", []string{"prices"}},
		// one model with its versions and sources
		{"prices-model.golden", []string{"prices", "--model", "claude-sonnet-5-5"}},
		// one model as JSON, loadable as a price file
		{"prices-model.json.golden", []string{"prices", "--model", "gpt-4o", "--json"}},
	}
	for _, tc := range cases {
		t.Run(tc.golden, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runTest(t, nil, tc.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			path := filepath.Join("testdata", tc.golden)
			if *update {
				if err := os.WriteFile(path, []byte(stdout), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if stdout != string(want) {
				t.Errorf("output differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, stdout, want)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	custom := filepath.Join(dir, "prices.yaml")
	if err := os.WriteFile(custom, []byte(`
models:
  - provider: acme
    id: acme-1
    prices:
      - {effective_from: 2026-01-01, source: acme contract, input_per_mtok: "1", output_per_mtok: "2"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		env    map[string]string
		args   []string
		code   int
		stdout string // a substring of stdout
		stderr string // a substring of stderr
	}{
		// no command is bad usage
		{"no command", nil, nil, 2, "", "usage: costcalc"},
		// help is not an error
		{"help", nil, []string{"help"}, 0, "", "commands:"},
		// an unknown command is bad usage
		{"unknown command", nil, []string{"ledgr"}, 2, "", `unknown command "ledgr"`},
		// an unknown model is bad usage and names the nearest ids
		{"unknown model", nil, []string{"estimate", "--model", "claude-haiku-5.5", "--calls-per-day", "1", "--input-tokens", "100"}, 2, "", "did you mean claude-haiku-5-5"},
		// required flags
		{"missing flags", nil, []string{"estimate", "--model", "gpt-4o"}, 2, "", "needs --model and --calls-per-day"},
		// no token flag at all would price a call at $0.00: refused, saying what is needed
		{"no tokens", nil, []string{"estimate", "--model", "gpt-4o", "--calls-per-day", "1000"}, 2, "", "needs the tokens of one call: --input-tokens and --output-tokens"},
		// an unknown flag
		{"unknown flag", nil, []string{"prices", "--modle", "x"}, 2, "", "flag provided but not defined"},
		// a non-numeric count
		{"bad number", nil, []string{"estimate", "--model", "gpt-4o", "--calls-per-day", "lots", "--input-tokens", "100"}, 2, "", "not a non-negative decimal"},
		// a hit rate above 100%
		{"bad hit rate", nil, []string{"cache", "--model", "gpt-4o", "--prefix-tokens", "10", "--calls", "2", "--hit-rate", "120%"}, 2, "", "above 1"},
		// a bad TTL
		{"bad ttl", nil, []string{"cache", "--model", "gpt-4o", "--prefix-tokens", "10", "--calls", "2", "--ttl", "1d"}, 2, "", "--ttl"},
		// a bad date
		{"bad date", nil, []string{"prices", "--at", "yesterday"}, 2, "", "--at"},
		// positional arguments are not taken
		{"stray argument", nil, []string{"prices", "gpt-4o"}, 2, "", "unexpected argument"},
		// a missing price file is a runtime error
		{"missing price file", nil, []string{"prices", "--prices", filepath.Join(dir, "nope.yaml")}, 1, "", "no such file"},
		// LEDGERD_PRICES adds a price file
		{"env price file", map[string]string{"LEDGERD_PRICES": custom}, []string{"prices", "--model", "acme-1"}, 0, "acme contract", ""},
		// --prices wins over the environment
		{"flag over env", map[string]string{"LEDGERD_PRICES": filepath.Join(dir, "nope.yaml")}, []string{"prices", "--prices", custom, "--model", "acme/acme-1"}, 0, "acme/acme-1", ""},
		// a batch estimate on a model without a known batch price says so
		{"no batch price", nil, []string{"estimate", "--model", "gpt-6-sol", "--calls-per-day", "1", "--batch", "--input-tokens", "100"}, 1, "", "no batch price"},
		// a model without a price yet at --at is unpriced
		{"before launch", nil, []string{"estimate", "--model", "claude-haiku-5-5", "--calls-per-day", "1", "--at", "2026-01-01", "--input-tokens", "100"}, 1, "", "no price in effect"},
		// -h prints the flags and succeeds
		{"subcommand help", nil, []string{"cache", "-h"}, 0, "", "-prefix-tokens"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runTest(t, tc.env, tc.args...)
			if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s\nwant stdout containing %q and stderr containing %q",
					code, tc.code, stdout, stderr, tc.stdout, tc.stderr)
			}
		})
	}
}

// TestPricesSummary loads a LiteLLM-shaped file with a "last_updated" string and Azure's split
// batch prices: it must load, warn once naming the skipped entry, and count what it priced.
func TestPricesSummary(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "litellm.json")
	src := `{"last_updated": "2026-11-30",
	"sample_spec": {"litellm_provider": "one of ...", "input_cost_per_token": 0.0, "output_cost_per_token": 0.0},
	"azure/us/gpt-4.1-nano-2025-04-14": {"litellm_provider": "azure", "mode": "chat", "input_cost_per_token": 1.1e-07,
		"output_cost_per_token": 4.4e-07, "input_cost_per_token_batches": 6e-08, "output_cost_per_token_batches": 2.2e-07},
	"dall-e-3": {"litellm_provider": "openai", "mode": "image_generation", "input_cost_per_pixel": 4e-08}}`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runTest(t, nil, "prices", "--prices", path, "--summary")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "litellm.json (LiteLLM price map): 1 model priced; skipped 2 not priced per token, 1 not an entry") {
		t.Errorf("stdout = %q", stdout)
	}
	if strings.Count(stderr, "warning:") != 1 || !strings.Contains(stderr, `"last_updated"`) {
		t.Errorf("stderr = %q, want one warning naming last_updated", stderr)
	}
	code, stdout, stderr = runTest(t, nil, "prices", "--prices", path, "--model", "azure/us/gpt-4.1-nano-2025-04-14")
	if code != 0 || !strings.Contains(stdout, "batch: -45.4545% input, -50% output") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}
