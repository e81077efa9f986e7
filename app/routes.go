package app

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/alerts"
	"github.com/ledgerd/ledgerd/analytics"
	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/otlp"
	"github.com/ledgerd/ledgerd/prices"
	"github.com/ledgerd/ledgerd/pricing"
	"github.com/ledgerd/ledgerd/server"
	"github.com/ledgerd/ledgerd/store"
	"github.com/ledgerd/ledgerd/web"
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
	// GET /v1/routes lists every route the server answers (read at request time, so it includes the
	// ones mounted below); the tenancy drill (drills/tenancy_test.go) walks it.
	d.Server.API.GET("/routes", func(c echo.Context) error { return c.JSON(http.StatusOK, d.Server.Echo.Routes()) })
	analytics.New(d.Store.Pool, d.Timezone, d.Now).Routes(d.Server.API)
	prices.Mount(d.Server, prices.Options{Pool: d.Store.Pool, Catalog: d.Catalog, Timezone: d.Timezone, Now: d.Now})
	otlp.Mount(d.Server, otlp.Options{Writer: d.Writer, Logger: d.Logger, Registerer: d.Registry, Now: d.Now, TenantAttributes: otlp.ParseAttributes(d.Options.OTLPTenantAttributes)})
	alertCfg, err := alerts.Load(d.Options.Config)
	if err != nil {
		return err
	}
	ev := alerts.New(alertCfg, alerts.Options{Pool: d.Store.Pool, Timezone: d.Timezone, Now: d.Now, Logger: d.Logger, Registerer: d.Registry, Sync: d.Writer.Sync})
	ev.Mount(d.Server.API)
	ev.Start(ctx)
	*steps = append(*steps, ev.Stop)
	if err := web.Mount(ctx, web.Options{Server: d.Server, Store: d.Store, Analytics: analytics.New(d.Store.Pool, d.Timezone, d.Now), Catalog: d.Catalog, Alerts: ev, AlertRules: alertCfg.Rules, Timezone: d.Timezone, Now: d.Now, Logger: d.Logger, ViewerToken: d.Options.ViewerToken, ViewerProject: d.Options.ViewerProject}); err != nil {
		return err
	}
	return nil
}
