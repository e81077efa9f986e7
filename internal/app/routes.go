package app

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/alerts"
	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/otlp"
	"github.com/ledgerd/ledgerd/internal/server"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/pricing"
	"github.com/ledgerd/ledgerd/web"
)

// Deps are the shared parts each feature package is built from when the service starts.
type Deps struct {
	Store *store.Store
	// Reads places the query API's and the dashboard's reads (a standby, or the primary).
	Reads    *store.Reads
	Catalog  *pricing.Catalog
	Server   *server.Server
	Writer   *ingest.Writer
	Registry *prometheus.Registry
	Timezone *time.Location
	Now      func() time.Time
	Logger   *slog.Logger
	Options  Options
}

// mount builds each feature from d, adds its routes to the server and starts its background
// workers; every feature mounts the same way, New then Mount. Workers must stop when ctx ends;
// their shutdown steps are appended to steps.
func mount(ctx context.Context, d Deps, steps *cleanup) error {
	// GET /v1/routes lists every route the server answers (read at request time, so it includes the
	// ones mounted below); the tenancy drill (internal/drills/tenancy_test.go) walks it.
	d.Server.API.GET("/routes", func(c echo.Context) error { return c.JSON(http.StatusOK, d.Server.Echo.Routes()) })
	queries := analytics.New(analytics.Options{Pool: d.Store.Pool, Reads: d.Reads, Timezone: d.Timezone, Now: d.Now, Catalog: d.Catalog})
	queries.Mount(d.Server)
	otlp.New(otlp.Options{Writer: d.Writer, Logger: d.Logger, Registerer: d.Registry, Now: d.Now,
		TenantAttributes: otlp.ParseAttributes(d.Options.OTLPTenantAttributes)}).Mount(d.Server)
	alertCfg, err := alerts.Load(d.Options.Config)
	if err != nil {
		return err
	}
	if d.Options.PublicURL != "" {
		alertCfg.ExternalURL = d.Options.PublicURL
	}
	ev := alerts.New(alertCfg, alerts.Options{Pool: d.Store.Pool, Timezone: d.Timezone, Now: d.Now, Logger: d.Logger, Registerer: d.Registry, Sync: d.Writer.Sync})
	ev.Mount(d.Server)
	ev.Start(ctx)
	steps.add("the alert evaluator to stop", ev.Stop)
	dashboard, err := web.New(ctx, web.Options{Store: d.Store, Analytics: queries, Catalog: d.Catalog,
		Alerts: ev, AlertRules: alertCfg.Rules, Timezone: d.Timezone, Now: d.Now, Logger: d.Logger,
		ViewerToken: d.Options.ViewerToken, ViewerProject: d.Options.ViewerProject})
	if err != nil {
		return err
	}
	dashboard.Mount(d.Server)
	return nil
}
