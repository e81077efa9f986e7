// Package server is ledgerd's HTTP front: the echo instance with its middleware, API-key
// authentication, the ingest endpoint, health checks, the record schema and /metrics. Other packages
// mount their routes on the groups it exposes.
package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/schema"
)

// Options configures the HTTP front.
type Options struct {
	Store    *store.Store
	Writer   *ingest.Writer
	Logger   *slog.Logger
	Registry *prometheus.Registry
	// Ready reports whether the service can take traffic (database reachable, schema current).
	Ready func(ctx context.Context) error
	Now   func() time.Time
	// MaxBodyBytes bounds an ingest body, before and after gzip (16 MiB).
	MaxBodyBytes int64
	// SubmitTimeout bounds how long an ingest request waits for its commit (10 s).
	SubmitTimeout time.Duration
	// MaxInFlight bounds concurrent ingest requests, and half of it those of one project; more are
	// answered 503 at once (256).
	MaxInFlight int
	// BodyTimeout bounds the time to receive an ingest body once the request is admitted (15 s);
	// a slower client is answered 408.
	BodyTimeout time.Duration
}

// Server holds the echo instance and the groups other packages add routes to.
type Server struct {
	Echo *echo.Echo
	// API is /v1, every route behind a project's API key.
	API *echo.Group

	opt      Options
	auth     *keyCache
	inflight chan struct{}

	mu         sync.Mutex
	perProject map[int64]int // ingest requests in flight by project
	m          serverMetrics
}

type serverMetrics struct {
	rejected *prometheus.CounterVec
	requests *prometheus.HistogramVec
	shed     prometheus.Counter
}

// New builds the HTTP front with ingest, schema, health and metrics routes.
func New(opt Options) *Server {
	if opt.MaxBodyBytes <= 0 {
		opt.MaxBodyBytes = 16 << 20
	}
	if opt.SubmitTimeout <= 0 {
		opt.SubmitTimeout = 10 * time.Second
	}
	if opt.BodyTimeout <= 0 {
		opt.BodyTimeout = 15 * time.Second
	}
	if opt.MaxInFlight <= 0 {
		opt.MaxInFlight = 256
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	f := promauto.With(opt.Registry)
	s := &Server{
		Echo:       echo.New(),
		opt:        opt,
		auth:       newKeyCache(opt.Store, opt.Now),
		inflight:   make(chan struct{}, opt.MaxInFlight),
		perProject: map[int64]int{},
		m: serverMetrics{
			rejected: f.NewCounterVec(prometheus.CounterOpts{Name: "ledgerd_ingest_records_rejected_total",
				Help: "Records refused by validation, by the field at fault."}, []string{"field"}),
			requests: f.NewHistogramVec(prometheus.HistogramOpts{Name: "ledgerd_http_request_duration_seconds",
				Help: "HTTP requests by route and status code.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 15)},
				[]string{"route", "code"}),
			shed: f.NewCounter(prometheus.CounterOpts{Name: "ledgerd_ingest_shed_total",
				Help: "Ingest requests answered 503 because too many were in flight."}),
		},
	}
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "ledgerd_ingest_requests_in_flight",
		Help: "Ingest requests admitted and not yet answered (at most MaxInFlight)."},
		func() float64 { return float64(len(s.inflight)) })
	e := s.Echo
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.errorHandler
	e.Use(s.observe, s.fresh)
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") })
	e.GET("/readyz", s.ready)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(opt.Registry, promhttp.HandlerOpts{Registry: opt.Registry})))
	e.GET("/v1/schema", func(c echo.Context) error {
		return c.Blob(http.StatusOK, "application/schema+json", schema.JSONSchema)
	})
	s.API = e.Group("/v1", s.RequireKey)
	s.API.POST("/attempts", s.ingest, s.Admit)
	return s
}

func (s *Server) ready(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if s.opt.Ready != nil {
		if err := s.opt.Ready(ctx); err != nil {
			return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "not ready", "error": err.Error()})
		}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

// observe records each request's duration by route and status, and logs server errors.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		code := c.Response().Status
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		s.m.requests.WithLabelValues(route, http.StatusText(code)).Observe(time.Since(start).Seconds())
		if code >= 500 {
			s.opt.Logger.Warn("request failed", "method", c.Request().Method, "route", route, "status", code, "err", err)
		}
		return nil
	}
}

// fresh waits, before a read (a GET other than the health checks and static assets, which read no
// ledger), for the rollups to count the records this replica committed, so an answer counts every
// record ledgerd acknowledged before it was asked. The wait is bounded (ingest.Options.ReadWait):
// behind a backlog the read answers from the rollups as they are, with the header
// Ledgerd-Rollups-Behind giving the lag in seconds.
func (s *Server) fresh(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if s.opt.Writer != nil && (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
			r.URL.Path != "/healthz" && r.URL.Path != "/readyz" && !strings.HasPrefix(r.URL.Path, "/static/") {
			if err := s.opt.Writer.Sync(r.Context()); err != nil {
				s.opt.Logger.Warn("fold rollups before a read", "path", r.URL.Path, "err", err)
			}
			if lag := s.opt.Writer.Behind(); lag > 0 {
				c.Response().Header().Set(BehindHeader, strconv.FormatFloat(lag.Seconds(), 'f', 1, 64))
			}
		}
		return next(c)
	}
}

// BehindHeader is the header of a read answered while the rollups lag behind this replica's
// commits: the lag in seconds (see Server.fresh).
const BehindHeader = "Ledgerd-Rollups-Behind"

// APIError is the JSON body of every error ledgerd answers.
type APIError struct {
	Error string `json:"error"`
}

func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	code := http.StatusInternalServerError
	msg := "internal error"
	var he *echo.HTTPError
	if errors.As(err, &he) {
		code = he.Code
		if m, ok := he.Message.(string); ok {
			msg = m
		} else {
			msg = http.StatusText(code)
		}
	}
	if code == http.StatusServiceUnavailable && c.Response().Header().Get("Retry-After") == "" {
		c.Response().Header().Set("Retry-After", "1")
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(code)
		return
	}
	_ = c.JSON(code, APIError{Error: msg})
}
