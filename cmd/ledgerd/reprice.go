package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/ledgerd/ledgerd/internal/app"
	"github.com/ledgerd/ledgerd/internal/reprice"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/pricing"
)

// runReprice is `ledgerd reprice`: it recomputes stored costs with the catalog the command loads
// (the embedded one plus --prices) and prints what changed.
func runReprice(ctx context.Context, fs *flag.FlagSet, o *app.Options, args []string, stdout io.Writer) error {
	from := fs.String("from", "", "first day (YYYY-MM-DD, local to the ledger's timezone) or RFC 3339 time to reprice")
	to := fs.String("to", "", "day or time to stop before (exclusive)")
	model := fs.String("model", "", "reprice only this model (as recorded, or any name the catalog gives it)")
	dryRun := fs.Bool("dry-run", false, "report what would change and write nothing")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if *from == "" || *to == "" {
		return fmt.Errorf("%w: reprice needs --from and --to", errUsage)
	}
	cat, rep, err := pricing.LoadReported(o.PricesFile)
	if err != nil {
		return fmt.Errorf("load prices: %w", err)
	}
	for _, w := range rep.Warnings() {
		fmt.Fprintf(os.Stderr, "warning: %s\n", w)
	}
	return withDB(ctx, *o, func(d *app.DB) error {
		tz, err := ledgerZone(ctx, d.Store)
		if err != nil {
			return err
		}
		opt := reprice.Options{Model: *model, DryRun: *dryRun}
		if opt.From, err = parseBound("from", *from, tz); err != nil {
			return err
		}
		if opt.To, err = parseBound("to", *to, tz); err != nil {
			return err
		}
		rep, err := reprice.Run(ctx, d.Store, cat, opt)
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(rep)
		}
		if err := rep.WriteText(stdout); err != nil {
			return err
		}
		if !rep.DryRun && rep.Totals.Changed > 0 {
			fmt.Fprintln(stdout, "\nServers price new attempts with the catalog they loaded at start: restart them with this same price file.")
		}
		return nil
	})
}

// ledgerZone is the timezone the ledger counts days in (settings 'timezone'; UTC before the
// first start).
func ledgerZone(ctx context.Context, st *store.Store) (*time.Location, error) {
	name, err := st.Setting(ctx, "timezone")
	if errors.Is(err, store.ErrNotFound) {
		return time.UTC, nil
	}
	if err != nil {
		return nil, err
	}
	return time.LoadLocation(name)
}

// parseBound reads a day (its midnight in tz) or an RFC 3339 time.
func parseBound(flagName, s string, tz *time.Location) (time.Time, error) {
	if t, err := time.ParseInLocation(time.DateOnly, s, tz); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%w: --%s %q is neither a date (2006-01-02) nor an RFC 3339 time", errUsage, flagName, s)
}
