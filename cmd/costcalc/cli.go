package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"strings"
	"time"

	"github.com/ledgerd/ledgerd/internal/estimate"
	"github.com/ledgerd/ledgerd/pricing"
)

// env is what a subcommand may use of the outside world; tests replace all of it.
type env struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	now            func() time.Time
}

// command is one subcommand. Adding a subcommand is adding an entry to commands.
type command struct {
	name    string
	summary string
	run     func(e env, args []string) error
}

var commands = []command{
	{"estimate", "cost of a workload per call, per day and per month, for one or more models", runEstimate},
	{"cache", "cost of caching a prompt prefix against not caching it", runCache},
	{"prices", "the price catalog", runPrices},
	{"ledger", "a month projected from the usage a running ledgerd recorded, optionally on another model", runLedger},
}

// usageError is bad usage: exit code 2.
type usageError struct{ msg string }

// Error returns the message shown before the usage text.
func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{fmt.Sprintf(format, args...)} }

// run is the whole program; it returns the exit code.
func run(args []string, stdout, stderr io.Writer, getenv func(string) string, now func() time.Time) int {
	e := env{stdout: stdout, stderr: stderr, getenv: getenv, now: now}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printUsage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			return exitCode(stderr, c.run(e, args[1:]))
		}
	}
	fmt.Fprintf(stderr, "costcalc: unknown command %q\n\n", args[0])
	printUsage(stderr)
	return 2
}

func exitCode(stderr io.Writer, err error) int {
	var usage *usageError
	var unknown *estimate.UnknownModelError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage), errors.As(err, &unknown):
		fmt.Fprintf(stderr, "costcalc: %v\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "costcalc: %v\n", err)
		return 1
	}
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: costcalc <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run costcalc <command> -h for its flags. Every command takes --prices FILE (default $LEDGERD_PRICES)")
	fmt.Fprintln(w, "to merge a price file (ledgerd catalog YAML/JSON or LiteLLM JSON) over the built-in catalog.")
}

// common are the flags every subcommand has.
type common struct {
	prices string
	at     string
}

func newFlags(name string, e env, c *common) *flag.FlagSet {
	fs := flag.NewFlagSet("costcalc "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.StringVar(&c.prices, "prices", "", "price `file` merged over the built-in catalog (default $LEDGERD_PRICES)")
	fs.StringVar(&c.at, "at", "", "price as of this `date` (2006-01-02 or RFC 3339; default now)")
	return fs
}

// parse parses flags, turning flag errors into usage errors; no positional arguments are taken.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// setup loads the catalog and the pricing date.
func (c common) setup(e env) (*pricing.Catalog, time.Time, error) {
	at := e.now().UTC()
	if c.at != "" {
		var err error
		if at, err = time.Parse("2006-01-02", c.at); err != nil {
			if at, err = time.Parse(time.RFC3339, c.at); err != nil {
				return nil, time.Time{}, usagef("--at %q is not a date (2006-01-02) or an RFC 3339 time", c.at)
			}
		}
	}
	file := c.prices
	if file == "" {
		file = e.getenv("LEDGERD_PRICES")
	}
	if file != "" {
		progress(e, "loading prices from %s...", file)
	}
	cat, rep, err := pricing.LoadReported(file)
	if err != nil {
		return nil, time.Time{}, err
	}
	for _, w := range rep.Warnings() {
		fmt.Fprintf(e.stderr, "warning: %s\n", w)
	}
	return cat, at, nil
}

// models collects --model values, repeated or comma-separated.
type models []string

// String lists the models given so far, for the flag package.
func (m *models) String() string { return strings.Join(*m, ",") }

// Set adds the models of one --model flag, comma-separated or not.
func (m *models) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*m = append(*m, s)
		}
	}
	return nil
}

var plainDecimal = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)

// parseAmount reads a non-negative decimal such as "2000" or "30.44" exactly.
func parseAmount(flagName, s string) (*big.Rat, error) {
	if !plainDecimal.MatchString(s) || len(s) > 30 {
		return nil, usagef("--%s %q is not a non-negative decimal number", flagName, s)
	}
	r, _ := new(big.Rat).SetString(s)
	return r, nil
}

// parseDaysPerMonth reads --days-per-month, which scales a day's cost to a month: a positive
// decimal number.
func parseDaysPerMonth(s string) (*big.Rat, error) {
	r, err := parseAmount("days-per-month", s)
	if err != nil {
		return nil, err
	}
	if r.Sign() == 0 {
		return nil, usagef("--days-per-month must be positive")
	}
	return r, nil
}

// parseRatio reads a ratio between 0 and 1 ("0.9") or a percentage ("90%") exactly.
func parseRatio(flagName, s string) (*big.Rat, error) {
	pct := strings.HasSuffix(s, "%")
	r, err := parseAmount(flagName, strings.TrimSuffix(s, "%"))
	if err != nil {
		return nil, err
	}
	if pct {
		r.Quo(r, big.NewRat(100, 1))
	}
	if r.Cmp(big.NewRat(1, 1)) > 0 {
		return nil, usagef("--%s %q is above 1 (100%%)", flagName, s)
	}
	return r, nil
}
