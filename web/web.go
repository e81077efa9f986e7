// Package web is ledgerd's dashboard: server-rendered pages (templ) on the same echo instance as
// the API, drawn from the analytics, alerts and pricing packages. Pages work without JavaScript;
// a small script draws the charts with the vendored uPlot from data the page carries as JSON.
// Everything is served by ledgerd itself, so the dashboard works with no internet access.
//
// Access is by project: a login form takes a project API key or the configured viewer token and
// sets a session cookie signed with a secret kept in the settings table (sessions survive restarts
// and work across replicas); scripts may send "Authorization: Bearer KEY" instead. A page only
// ever shows the project of the credential that opened it.
package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/ledgerd/ledgerd/alerts"
	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/server"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/pricing"
)

// Options are what the dashboard is built from.
type Options struct {
	Store *store.Store
	// Analytics answers every figure the pages show.
	Analytics *analytics.Service
	// Catalog is the price catalog in force, for the prices page.
	Catalog *pricing.Catalog
	// Alerts lists alerts and receiver status; nil when alerting is off.
	Alerts AlertSource
	// AlertRules are the rules in force, for the alerts page.
	AlertRules []alerts.Rule
	// Timezone counts days and months (UTC).
	Timezone *time.Location
	// Now is the clock (time.Now).
	Now    func() time.Time
	Logger *slog.Logger
	// ViewerToken, when set, logs in as ViewerProject: a read-only password for people without a
	// project API key.
	ViewerToken   string
	ViewerProject string
	// SessionTTL is how long a login lasts (12h).
	SessionTTL time.Duration
}

// Handler serves the dashboard.
type Handler struct {
	opt    Options
	srv    *server.Server
	assets *assets
	sign   signer
	csrf   *http.CrossOriginProtection
}

// New builds the dashboard. It reads (or creates, once for every replica) the session signing
// secret.
func New(ctx context.Context, opt Options) (*Handler, error) {
	if opt.Timezone == nil {
		opt.Timezone = time.UTC
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.SessionTTL <= 0 {
		opt.SessionTTL = 12 * time.Hour
	}
	if opt.ViewerToken != "" && opt.ViewerProject == "" {
		return nil, errors.New("dashboard: a viewer token needs a viewer project")
	}
	a, err := loadAssets()
	if err != nil {
		return nil, err
	}
	secret, err := opt.Store.InitSetting(ctx, secretSetting, randomToken())
	if err != nil {
		return nil, fmt.Errorf("dashboard session secret: %w", err)
	}
	return &Handler{opt: opt, assets: a, sign: signer{secret: []byte(secret)}, csrf: http.NewCrossOriginProtection()}, nil
}

// Mount adds the dashboard's routes to s: the pages, /login, /logout and /static/. API keys typed
// at the login are resolved through s.
func (h *Handler) Mount(s *server.Server) {
	h.srv = s
	e := s.Echo
	e.GET("/static/*", h.assets.serve)
	e.GET("/login", h.loginPage, h.htmlErrors)
	e.POST("/login", h.login, h.htmlErrors)
	e.POST("/logout", h.logout, h.htmlErrors)
	g := e.Group("", h.htmlErrors, h.requireLogin)
	for _, p := range h.pages() {
		g.GET(p.path, p.handler)
	}
}

func (h *Handler) now() time.Time { return h.opt.Now() }

// route is a page and its handler.
type route struct {
	path    string
	handler echo.HandlerFunc
}

// pages are the dashboard's pages, each behind the login.
func (h *Handler) pages() []route {
	return []route{{"/", h.overview}, {"/models", h.models}, {"/services", h.services}, {"/cache", h.cache},
		{"/reliability", h.reliability}, {"/incidents", h.incidentsPage}, {"/load", h.load}, {"/alerts", h.alertsPage}, {"/prices", h.pricesPage}}
}

// render writes a page only once it rendered whole: a failure midway is an error page, never a
// half-written 200. Pages show private figures, so nothing is cached, and the policy allows only
// ledgerd's own scripts and styles.
func (h *Handler) render(c echo.Context, status int, page templ.Component) error {
	var buf bytes.Buffer
	if err := page.Render(c.Request().Context(), &buf); err != nil {
		return fmt.Errorf("render %s: %w", c.Path(), err)
	}
	hd := c.Response().Header()
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	return c.HTMLBlob(status, buf.Bytes())
}

// htmlErrors answers a page's error with an HTML page of the same status (the API answers JSON).
// Server-side causes are logged, not shown.
func (h *Handler) htmlErrors(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		if err == nil || c.Response().Committed {
			return err
		}
		code, msg := http.StatusInternalServerError, "Something went wrong on ledgerd's side; the log has the details."
		var he *echo.HTTPError
		if errors.As(err, &he) {
			code = he.Code
			if m, ok := he.Message.(string); ok && code < 500 {
				msg = m
			}
			if code == http.StatusServiceUnavailable {
				msg = "The database is unavailable. Try again in a moment."
				c.Response().Header().Set("Retry-After", "5")
			}
		}
		if code >= 500 {
			h.opt.Logger.Error("dashboard page failed", "path", c.Request().URL.Path, "status", code, "err", err)
		}
		return h.render(c, code, errorView(h.page(c, http.StatusText(code)), code, msg))
	}
}

// dataError turns a failure to read a page's figures into its answer: a question analytics refuses
// is the URL's fault (400), anything else means the database could not answer (503).
func (h *Handler) dataError(err error) error {
	var pe *analytics.ParamError
	if errors.As(err, &pe) {
		return echo.NewHTTPError(http.StatusBadRequest, pe.Error())
	}
	if store.IsUnavailable(err) {
		return unavailable(err)
	}
	return err
}
