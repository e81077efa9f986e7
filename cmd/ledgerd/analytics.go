package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/app"
	"github.com/ledgerd/ledgerd/money"
)

// runRebuild is `ledgerd rollups rebuild`: it recounts every rollup from the raw attempts, with
// days in --timezone (or LEDGERD_TIMEZONE) when given, else in the timezone the ledger already uses.
func runRebuild(ctx context.Context, fs *flag.FlagSet, o *app.Options, args []string, stdout io.Writer) error {
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	explicit := os.Getenv("LEDGERD_TIMEZONE") != ""
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "timezone" })
	return withDB(ctx, *o, func(d *app.DB) error {
		tz, err := ledgerZone(ctx, d.Store)
		if err != nil {
			return err
		}
		if explicit {
			if tz, err = time.LoadLocation(o.Timezone); err != nil {
				return fmt.Errorf("%w: --timezone %q: %v", errUsage, o.Timezone, err)
			}
		}
		start := time.Now()
		res, err := analytics.Rebuild(ctx, d.Store.Pool, tz)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "rollups rebuilt in %v: days counted in %s (were %s); %d hourly, %d daily, %d cache rows",
			time.Since(start).Round(time.Millisecond), res.Timezone, res.Previous, res.HourlyRows, res.DailyRows, res.CacheRows)
		if res.KeptDays > 0 {
			fmt.Fprintf(stdout, "; %d days whose raw attempts were dropped kept from their rollups", res.KeptDays)
		}
		fmt.Fprintln(stdout)
		return nil
	})
}

// runBudget is `ledgerd budget set`: it sets or clears a project's monthly budget.
func runBudget(ctx context.Context, fs *flag.FlagSet, o *app.Options, args []string, stdout io.Writer) error {
	project := fs.String("project", "", "project whose budget to set")
	usd := fs.String("usd", "", "monthly budget in dollars, e.g. 1000 or 1250.50")
	remove := fs.Bool("clear", false, "remove the project's budget instead")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if *project == "" || (*usd == "") == !*remove {
		return fmt.Errorf("%w: budget set needs --project NAME and either --usd AMOUNT or --clear", errUsage)
	}
	var budget *money.Nanos
	if !*remove {
		b, err := money.ParseUSD(*usd)
		if err != nil || b <= 0 {
			return fmt.Errorf("%w: --usd must be a positive dollar amount, got %q", errUsage, *usd)
		}
		budget = &b
	}
	return withDB(ctx, *o, func(d *app.DB) error {
		if err := analytics.SetBudget(ctx, d.Store, *project, budget); err != nil {
			return err
		}
		if budget == nil {
			fmt.Fprintf(stdout, "project %s has no monthly budget\n", *project)
		} else {
			fmt.Fprintf(stdout, "project %s: monthly budget %s\n", *project, budget.USD())
		}
		return nil
	})
}
