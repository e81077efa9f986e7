package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/otlp"
	"github.com/ledgerd/ledgerd/pricing"
	"github.com/ledgerd/ledgerd/server"
	"github.com/ledgerd/ledgerd/store"
)

// Deps are the shared parts each feature package is built from when the service starts.
type Deps struct {
	Store    *store.Store
	Catalog  *pricing.Catalog
	Server   *server.Server
	Writer   *ingest.Writer
	Registry *prometheus.Registry
	Timezone *time.Location
	Now      func() time.Time
	Logger   *slog.Logger
	Options  Options
}

// mount adds each feature's routes and background workers to the service. Workers it starts must
// stop when ctx ends; their shutdown steps are appended to steps.
func mount(ctx context.Context, d Deps, steps *cleanup) error {
	otlp.Mount(d.Server, otlp.Options{Writer: d.Writer, Logger: d.Logger, Registerer: d.Registry, Now: d.Now, TenantAttributes: otlp.ParseAttributes(d.Options.OTLPTenantAttributes)})
	return nil
}
