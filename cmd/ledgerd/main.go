// Command ledgerd is the LLM cost and reliability ledger: `ledgerd serve` runs the service,
// `ledgerd migrate` applies schema migrations, `ledgerd keys` manages project API keys,
// `ledgerd partitions` lists or drops monthly raw partitions for retention and `ledgerd reprice`
// recomputes stored costs with the current price catalog.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/ledgerd/ledgerd/internal/app"
	"github.com/ledgerd/ledgerd/internal/otlp"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/migrations"
)

const usage = `usage: ledgerd <command> [flags]

commands:
  serve                      run the ingest API, dashboard, alerts and /metrics
  migrate                    apply pending schema migrations
  keys create --project NAME print a new API key for the project (shown once)
  keys revoke KEY            revoke an API key
  partitions list            list the monthly raw partitions
  partitions drop --before YYYY-MM
                             drop raw attempts of months before the given one (rollups stay)
  rollups rebuild [--timezone TZ]
                             recount every rollup from the raw attempts, with days in TZ (the
                             ledger's own timezone by default); stop every ledgerd first
  budget set --project NAME (--usd AMOUNT | --clear)
                             set or remove a project's monthly budget (see /v1/projection)
  reprice --from DATE --to DATE [--model M] [--dry-run] [--json]
                             recompute stored costs with the current catalog (embedded + --prices)

Every command takes --database-url (env DATABASE_URL; empty = the embedded database in
--data-dir, env LEDGERD_DATA_DIR, default ./.ledgerd). Run "ledgerd <command> -h" for its flags.
`

func main() {
	// GOGC in the environment wins over ledgerd's own default.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(app.GCPercent)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errUsage marks a command line that cannot be run; it exits 2.
var errUsage = errors.New("usage")

func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := dispatch(ctx, args, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage), errors.Is(err, flag.ErrHelp):
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stderr, err)
		}
		return 2
	default:
		fmt.Fprintln(stderr, "ledgerd:", err)
		return 1
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// common registers the flags every command shares and returns the options they fill.
func common(fs *flag.FlagSet) *app.Options {
	o := &app.Options{}
	fs.StringVar(&o.DatabaseURL, "database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL; empty starts the embedded database")
	fs.StringVar(&o.DataDir, "data-dir", env("LEDGERD_DATA_DIR", ".ledgerd"), "folder of the embedded database")
	fs.StringVar(&o.PGBinaries, "pg-binaries", os.Getenv("LEDGERD_PG_BINARIES"), "PostgreSQL installation for the embedded database (the folder holding bin/initdb); found automatically")
	fs.StringVar(&o.Timezone, "timezone", env("LEDGERD_TIMEZONE", "UTC"), "IANA timezone days and months are counted in")
	fs.StringVar(&o.PricesFile, "prices", os.Getenv("LEDGERD_PRICES"), "price file merged over the embedded catalog (ledgerd YAML/JSON or LiteLLM JSON)")
	return o
}

func logger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	cmd, rest := args[0], args[1:]
	if cmd == "keys" || cmd == "partitions" || cmd == "rollups" || cmd == "budget" {
		if len(rest) == 0 {
			return fmt.Errorf("%w: ledgerd %s needs a subcommand", errUsage, cmd)
		}
		cmd, rest = cmd+" "+rest[0], rest[1:]
	}
	fs := flag.NewFlagSet("ledgerd "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := common(fs)
	logLevel := fs.String("log-level", env("LEDGERD_LOG_LEVEL", "info"), "debug, info, warn or error")
	switch cmd {
	case "serve":
		fs.StringVar(&o.Listen, "listen", env("LEDGERD_LISTEN", "127.0.0.1:8080"), "HTTP listen address")
		fs.BoolVar(&o.Migrate, "migrate", env("LEDGERD_MIGRATE", "") == "true", "apply pending migrations at start (always on for the embedded database)")
		maxBody := fs.Int64("max-body-bytes", 16<<20, "largest ingest body, before and after gzip")
		fs.StringVar(&o.ReadDatabaseURL, "read-database-url", os.Getenv("LEDGERD_READ_DATABASE_URL"), "hot standby (or several, multi-host) the query API and dashboard read from; empty reads the primary")
		foldWait := fs.String("fold-wait", env("LEDGERD_FOLD_WAIT", app.DefaultFoldWait.String()), "how long a read waits for the rollups to count what this replica committed before answering from them as they are (header Ledgerd-Rollups-Behind)")
		readWait := fs.String("read-max-wait", env("LEDGERD_READ_MAX_WAIT", store.DefaultReadMaxWait.String()), "how long a read waits for the standby to replay the primary's writes before reading the primary")
		fs.StringVar(&o.ViewerToken, "viewer-token", os.Getenv("LEDGERD_VIEWER_TOKEN"), "password that opens the dashboard of --viewer-project (read-only); prefer the env variable")
		fs.StringVar(&o.ViewerProject, "viewer-project", os.Getenv("LEDGERD_VIEWER_PROJECT"), "project the viewer token shows")
		fs.StringVar(&o.Config, "config", os.Getenv("LEDGERD_CONFIG"), "configuration file: alert rules and receivers (YAML, see docs/alerts.md)")
		fs.StringVar(&o.OTLPTenantAttributes, "otlp-tenant-attributes", env("LEDGERD_OTLP_TENANT_ATTRIBUTES", strings.Join(otlp.DefaultTenantAttributes, ",")), "span or resource attributes naming an OTLP span's tenant, comma-separated, first found wins")
		if err := parse(fs, rest, 0); err != nil {
			return err
		}
		o.MaxBodyBytes = *maxBody
		wait, err := time.ParseDuration(*readWait)
		if err != nil || wait <= 0 {
			return fmt.Errorf("%w: --read-max-wait (LEDGERD_READ_MAX_WAIT) must be a positive duration such as 500ms, not %q", errUsage, *readWait)
		}
		o.ReadMaxWait = wait
		if o.FoldWait, err = time.ParseDuration(*foldWait); err != nil || o.FoldWait <= 0 {
			return fmt.Errorf("%w: --fold-wait (LEDGERD_FOLD_WAIT) must be a positive duration such as 750ms, not %q", errUsage, *foldWait)
		}
		o.Logger = logger(stderr, *logLevel)
		return app.Run(ctx, *o)
	case "migrate":
		if err := parse(fs, rest, 0); err != nil {
			return err
		}
		return withDB(ctx, *o, func(d *app.DB) error {
			v, err := migrations.Up(ctx, d.Store.Pool)
			if err == nil {
				fmt.Fprintf(stdout, "schema at version %d\n", v)
			}
			return err
		})
	case "keys create":
		project := fs.String("project", "", "project the key belongs to (created if new)")
		if err := parse(fs, rest, 0); err != nil {
			return err
		}
		if *project == "" {
			return fmt.Errorf("%w: keys create needs --project NAME", errUsage)
		}
		return withDB(ctx, *o, func(d *app.DB) error {
			key, err := d.Store.CreateKey(ctx, *project)
			if err == nil {
				fmt.Fprintln(stdout, key)
			}
			return err
		})
	case "keys revoke":
		if err := parse(fs, rest, 1); err != nil {
			return err
		}
		return withDB(ctx, *o, func(d *app.DB) error { return d.Store.RevokeKey(ctx, fs.Arg(0)) })
	case "reprice":
		return runReprice(ctx, fs, o, rest, stdout)
	case "rollups rebuild":
		return runRebuild(ctx, fs, o, rest, stdout)
	case "budget set":
		return runBudget(ctx, fs, o, rest, stdout)
	case "partitions list":
		if err := parse(fs, rest, 0); err != nil {
			return err
		}
		return withDB(ctx, *o, func(d *app.DB) error {
			names, err := d.Store.Partitions(ctx)
			for _, n := range names {
				fmt.Fprintln(stdout, n)
			}
			return err
		})
	case "partitions drop":
		before := fs.String("before", "", "drop months before this one (YYYY-MM)")
		if err := parse(fs, rest, 0); err != nil {
			return err
		}
		cutoff, err := time.Parse("2006-01", *before)
		if err != nil {
			return fmt.Errorf("%w: --before must be YYYY-MM", errUsage)
		}
		return withDB(ctx, *o, func(d *app.DB) error {
			dropped, err := d.Store.DropPartitionsBefore(ctx, cutoff)
			for _, n := range dropped {
				fmt.Fprintln(stdout, "dropped", n)
			}
			return err
		})
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("%w: unknown command %q", errUsage, strings.TrimSpace(cmd))
}

func parse(fs *flag.FlagSet, args []string, positional int) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != positional {
		return fmt.Errorf("%w: %s takes %d argument(s), got %q", errUsage, fs.Name(), positional, fs.Args())
	}
	return nil
}

func withDB(ctx context.Context, o app.Options, f func(*app.DB) error) error {
	d, err := app.OpenDB(ctx, o)
	if err != nil {
		return err
	}
	defer d.Close(context.Background())
	if o.DatabaseURL == "" {
		if _, err := migrations.Up(ctx, d.Store.Pool); err != nil {
			return err
		}
	}
	return f(d)
}
