// Command ledgerload posts synthetic attempt records to a running ledgerd: steady live load, a
// backdated history, or the 30-day demo ledger. See `ledgerload -h`; the work is done by package
// load.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/ledgerd/ledgerd/load"
)

func main() { os.Exit(run()) }

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := load.Command(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 2
	default:
		fmt.Fprintln(os.Stderr, "ledgerload:", err)
		return 1
	}
}
