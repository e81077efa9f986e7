// Package apptest starts the whole ledgerd service in the test's own process, on a loopback port
// and the database the test gives it, so end-to-end tests drive the real HTTP API.
package apptest

import (
	"context"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/app"
)

// startTimeout bounds how long Start waits for the service to listen: migrating a new database
// and loading the catalog take a few seconds on a loaded machine.
const startTimeout = 60 * time.Second

// Start runs app.Run with opt on 127.0.0.1:0 (unless opt.Listen says otherwise) and returns the
// service's base URL. The service stops when the test ends, and a failure to stop cleanly fails
// the test.
func Start(t testing.TB, opt app.Options) string {
	t.Helper()
	if opt.Listen == "" {
		opt.Listen = "127.0.0.1:0"
	}
	addr := make(chan string, 1)
	opt.OnListen = func(a string) { addr <- a }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, opt) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ledgerd: %v", err)
		}
	})
	select {
	case a := <-addr:
		return "http://" + a
	case err := <-done:
		t.Fatalf("ledgerd did not start: %v", err)
	case <-time.After(startTimeout):
		t.Fatalf("ledgerd did not start in %s", startTimeout)
	}
	return ""
}
