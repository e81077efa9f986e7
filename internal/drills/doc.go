// Package drills holds ledgerd's reliability drills and ingest benchmarks. Each drill builds the
// real ledgerd binary, runs it as a separate process against its own database, drives it with the
// load package, breaks something (duplicates, kill -9, a stopped database, a burst, bad input,
// another project's key, a read standby that stops replaying, a primary killed and its standby
// promoted, one of three replicas killed), and then checks the database against the exact log of
// what ledgerd acknowledged: nothing acknowledged may be missing and nothing may be counted twice.
// Drills that need a standby or a primary to kill start PostgreSQL servers of their own
// (dbtest.StartServer, from the installed binaries), never touching the shared one.
//
// `go test ./drills/` runs the short version of every drill (each well under a minute);
// LEDGERD_DRILLS=long runs the long version (more records, longer outages). Run with -v to see
// each drill's figures. `go test -run '^$' -bench . ./drills/` runs the ingest benchmarks.
package drills
