// Package drills holds ledgerd's reliability drills and ingest benchmarks. Each drill builds the
// real ledgerd binary, runs it as a separate process against its own database, drives it with the
// load package, breaks something (duplicates, kill -9, a stopped database, a burst, bad input,
// another project's key), and then checks the database against the exact log of what ledgerd
// acknowledged: nothing acknowledged may be missing and nothing may be counted twice.
//
// `go test ./drills/` runs the short version of every drill (each well under a minute);
// LEDGERD_DRILLS=long runs the long version (more records, longer outages). Run with -v to see
// each drill's figures. `go test -run '^$' -bench . ./drills/` runs the ingest benchmarks.
package drills
