// Package apptest starts the whole ledgerd service in the test's own process, on a loopback port
// and the database the test gives it, so end-to-end tests drive the real HTTP API.
package apptest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/app"
)

// startTimeout bounds how long Start waits for the service to listen: creating an embedded
// database, migrating a new one and loading the catalog take a few seconds, or tens of seconds on
// a loaded machine.
const startTimeout = 90 * time.Second

// Start runs app.Run with opt on 127.0.0.1:0 (unless opt.Listen says otherwise) and returns the
// service's base URL. The service stops when the test ends, and a failure to stop cleanly fails
// the test.
func Start(t testing.TB, opt app.Options) string {
	t.Helper()
	base, _ := Run(t, opt)
	return base
}

// Run is Start for a test that stops the service before it ends, such as a benchmark that starts a
// fresh one in each iteration: stop shuts it down and fails the test if that does not go cleanly.
// Calling stop again does nothing; the test's end calls it when the test has not.
func Run(t testing.TB, opt app.Options) (base string, stop func()) {
	t.Helper()
	if opt.Listen == "" {
		opt.Listen = "127.0.0.1:0"
	}
	if opt.FoldWait == 0 {
		// Reads count every record acknowledged before them, however slow a loaded test machine
		// folds: tests read what they just wrote.
		opt.FoldWait = time.Minute
	}
	addr := make(chan string, 1)
	opt.OnListen = func(a string) { addr <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, opt) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("ledgerd: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case a := <-addr:
		return "http://" + a, stop
	case err := <-done:
		done <- nil // reported here; stop, at the test's end, must not wait for it again
		t.Fatalf("ledgerd did not start: %v", err)
	case <-time.After(startTimeout):
		t.Fatalf("ledgerd did not start in %s", startTimeout)
	}
	return "", stop
}
