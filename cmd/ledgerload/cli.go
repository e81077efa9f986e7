package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/load"
	"github.com/ledgerd/ledgerd/internal/synth"
	"github.com/ledgerd/ledgerd/pricing"
)

// DemoRecords is how many records --scenario demo sends unless --count says otherwise: about
// 6,700 attempts a day for 30 days, a mid-sized team's traffic.
const DemoRecords = 200_000

// ErrIncomplete reports a run in which some records were refused or never acknowledged.
var ErrIncomplete = errors.New("some records were not acknowledged")

const usage = `usage: ledgerload [flags]

Posts synthetic attempt records to a running ledgerd (POST /v1/attempts) and reports what it
acknowledged. Scenarios:
  steady   live traffic stamped with the current time (the default)
  history  backdated traffic over --start/--days, following a daily and weekly cycle (the default
           when --start or --days is given)
  demo     30 days of history ending now with a retry storm, an outage served by a fallback model
           and a broken prompt cache (still broken at the end), %d records unless --count is set

Examples:
  ledgerload --key $KEY --rate 2000 --duration 1m
  ledgerload --key $KEY --scenario demo --rate 0 --batch 1000
  ledgerload --key $KEY --batch 1 --concurrency 64 --rate 0 --duration 30s

Flags:
`

// command runs ledgerload with command-line args; progress goes to stderr and the summary to
// stdout.
func command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ledgerload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(stderr, usage, DemoRecords); fs.PrintDefaults() }
	var (
		opt      load.Options
		scenario = fs.String("scenario", "", "steady, history or demo (default: history when --start or --days is set, else steady)")
		seed     = fs.Int64("seed", 0, "seed of the synthetic data (0: from the clock; demo: 1)")
		startS   = fs.String("start", "", "history: first day (YYYY-MM-DD or RFC 3339; default --days before now)")
		days     = fs.Int("days", 0, "history: number of days (default 7)")
		tzName   = fs.String("timezone", "UTC", "IANA timezone of the daily cycle and of demo incident hours")
		ackPath  = fs.String("ack-log", "", "append one JSON line per acknowledged record to this file")
		prices   = fs.String("prices", os.Getenv("LEDGERD_PRICES"), "price file ledgerd uses, to price the ack log the same way")
		quiet    = fs.Bool("quiet", false, "no progress line")
	)
	fs.StringVar(&opt.URL, "url", envOr("LEDGERD_URL", "http://127.0.0.1:8080"), "ledgerd base URL (env LEDGERD_URL)")
	fs.StringVar(&opt.Key, "key", os.Getenv("LEDGERD_KEY"), "project API key (env LEDGERD_KEY)")
	fs.Float64Var(&opt.Rate, "rate", 100, "records per second; 0 = as fast as ledgerd acknowledges")
	fs.IntVar(&opt.Concurrency, "concurrency", 8, "clients posting at once")
	fs.IntVar(&opt.Batch, "batch", 100, "records per request")
	fs.DurationVar(&opt.Duration, "duration", 0, "run time (default 1m unless --count is set)")
	fs.Int64Var(&opt.Count, "count", 0, "records to send")
	fs.Float64Var(&opt.Redeliver, "redeliver", 0, "share of records posted again in a later request (0.03 = 3%)")
	fs.IntVar(&opt.ReplayBlock, "replay", 0, "post the run's first N records again at its end")
	fs.BoolVar(&opt.Gzip, "gzip", false, "gzip request bodies")
	fs.DurationVar(&opt.Timeout, "timeout", 30*time.Second, "bound on one HTTP request")
	fs.DurationVar(&opt.GiveUp, "give-up", 2*time.Minute, "how long a batch is retried before its records count as failed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("ledgerload takes no arguments, got %q", fs.Args())
	}
	if opt.Key == "" {
		return errors.New("ledgerload needs --key (or LEDGERD_KEY): create one with `ledgerd keys create --project NAME`")
	}
	loc, err := time.LoadLocation(*tzName)
	if err != nil {
		return fmt.Errorf("timezone %q: %w", *tzName, err)
	}
	now := time.Now()
	if *scenario == "" {
		*scenario = "steady"
		if *startS != "" || *days != 0 {
			*scenario = "history"
		}
	}
	if *seed == 0 && *scenario != "demo" {
		*seed = now.UnixNano()
	}
	so, live, err := scenarioOptions(*scenario, *seed, *startS, *days, now, loc)
	if err != nil {
		return err
	}
	if opt.Count == 0 && opt.Duration == 0 {
		if *scenario == "demo" {
			opt.Count = DemoRecords
		} else {
			opt.Duration = time.Minute
		}
	}
	if *scenario == "demo" && opt.Count > 0 {
		so.Rate = synth.CallsPerMinute(so, int(opt.Count)) // the demo's rate limits scale with its size
	}
	g := synth.New(so)
	if live {
		opt.Source = load.Live(g)
	} else {
		opt.Source = load.History(g)
	}
	catalog, err := pricing.Load(*prices)
	if err != nil {
		return fmt.Errorf("load prices: %w", err)
	}
	opt.Price = ingest.CatalogPrice(catalog)
	if *ackPath != "" {
		f, err := os.OpenFile(*ackPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("open ack log: %w", err)
		}
		defer f.Close()
		opt.AckLog = f
	}
	if !*quiet {
		opt.Progress = stderr
	}
	if !live {
		fmt.Fprintf(stderr, "ledgerload: %s scenario, %s to %s, seed %d\n", *scenario,
			so.Start.Format(time.RFC3339), so.End.Format(time.RFC3339), so.Seed)
		for _, in := range so.Incidents {
			fmt.Fprintf(stderr, "  incident %s %s%s from %s to %s\n", in.Kind, in.Service, in.Model,
				in.From.Format(time.RFC3339), in.To.Format(time.RFC3339))
		}
	}
	s, err := load.Run(ctx, opt)
	s.Write(stdout)
	if err != nil {
		return err
	}
	if s.Failed > 0 || s.Rejected > 0 {
		return fmt.Errorf("%w: %d failed, %d rejected", ErrIncomplete, s.Failed, s.Rejected)
	}
	return nil
}

// scenarioOptions turns a scenario name and its flags into generator options; live says whether
// calls are stamped with the current time.
func scenarioOptions(name string, seed int64, start string, days int, now time.Time, loc *time.Location) (synth.Options, bool, error) {
	switch name {
	case "steady":
		if start != "" || days != 0 {
			return synth.Options{}, false, errors.New("--start and --days need --scenario history")
		}
		return synth.Options{Seed: seed, Location: loc}, true, nil
	case "demo":
		if start != "" || days != 0 {
			return synth.Options{}, false, errors.New("the demo scenario always covers the last 30 days: drop --start and --days")
		}
		if seed == 0 {
			seed = 1
		}
		return synth.Demo(seed, now, loc), false, nil
	case "history":
		if days <= 0 {
			days = 7
		}
		from := now.AddDate(0, 0, -days)
		if start != "" {
			t, err := parseDay(start, loc)
			if err != nil {
				return synth.Options{}, false, err
			}
			from = t
		}
		to := from.AddDate(0, 0, days)
		if to.After(now) {
			to = now
		}
		if !from.Before(to) {
			return synth.Options{}, false, fmt.Errorf("--start %s lies in the future", start)
		}
		return synth.Options{Seed: seed, Start: from, End: to, Location: loc}, false, nil
	}
	return synth.Options{}, false, fmt.Errorf("unknown scenario %q: want steady, history or demo", name)
}

func parseDay(s string, loc *time.Location) (time.Time, error) {
	if t, err := time.ParseInLocation("2006-01-02", s, loc); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--start %q: want YYYY-MM-DD or RFC 3339", s)
	}
	return t, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
