// Command costcalc estimates what LLM calls will cost from ledgerd's price catalog: per call, per
// day and per month, side by side for several models, what prompt caching saves, and the catalog
// itself. It needs no database; ledger reads the usage a running ledgerd recorded.
//
//	costcalc estimate --model claude-haiku-5-5,claude-sonnet-5-5 --calls-per-day 2000 --input-tokens 333 --output-tokens 9
//	costcalc cache --model claude-haiku-5-5 --prefix-tokens 3856 --calls 20
//	costcalc prices [--model M] [--json]
//	costcalc ledger --url http://127.0.0.1:8080 --key KEY [--since 7d] [--as-model claude-sonnet-5-5]
//
// Every subcommand takes --prices FILE (or LEDGERD_PRICES) to merge a price file over the
// embedded catalog, and --at DATE to price at another date. It exits 2 on bad usage.
package main

import (
	"os"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv, time.Now))
}
