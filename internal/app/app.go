// Package app assembles the ledgerd service from its parts (database, migrations, price catalog,
// writer, HTTP front) and runs it until its context ends, then shuts it down in order: stop taking
// requests, commit what was accepted, answer, close the database.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/embeddedpg"
	"github.com/ledgerd/ledgerd/internal/llmmetrics"
	"github.com/ledgerd/ledgerd/internal/server"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/migrations"
	"github.com/ledgerd/ledgerd/pricing"
)

// DefaultFoldWait is how long a read waits for the rollups to count what this replica committed
// when Options.FoldWait is zero: below a second, so the first read after a backfill of any size
// answers within one.
const DefaultFoldWait = 750 * time.Millisecond

// GCPercent is the garbage collector's target the ledgerd command runs with when GOGC is not set.
// ledgerd's live heap is small and bounded by the writer's queue, so collecting less often than Go's
// default (100) trades some resident memory for less CPU per ingested record, which is what limits
// ingest on a small machine (docs/performance.md has the measurement). The benchmarks in drills run
// with it too, so they measure ledgerd as the command runs it.
const GCPercent = 400

// Options configures one ledgerd process. The zero value of each field is its default.
type Options struct {
	// Listen is the HTTP address (127.0.0.1:8080).
	Listen string
	// DatabaseURL names the PostgreSQL server; empty starts the embedded one under DataDir.
	DatabaseURL string
	// ReadDatabaseURL, when set, names a hot standby of the database (a multi-host URL may name
	// several): the query API and the dashboard read there once it has replayed what the primary
	// wrote before each read, and from the primary when it lags past ReadMaxWait or is down.
	ReadDatabaseURL string
	// ReadMaxWait bounds a read's wait for the standby to replay (500 ms).
	ReadMaxWait time.Duration
	// FoldWait bounds a read's wait for the rollups to count the records this replica committed
	// (750 ms); past it the read answers from the rollups as they are and says how far behind
	// (the Ledgerd-Rollups-Behind header).
	FoldWait time.Duration
	// DataDir holds the embedded database (./.ledgerd).
	DataDir string
	// PGBinaries is the PostgreSQL installation the embedded database runs (found automatically).
	PGBinaries string
	// Migrate applies pending migrations at start; without it serve refuses an out-of-date schema.
	// The embedded database is always migrated.
	Migrate bool
	// Timezone counts days and months for rollups, projections and alerts (UTC).
	Timezone string
	// PublicURL is ledgerd's address as people reach it (https://ledgerd.example.com): alert
	// notifications link to the dashboard under it. It overrides the config's alerts.external_url.
	PublicURL string
	// PricesFile is a price file merged over the embedded catalog (none).
	PricesFile string
	// MaxBodyBytes bounds an ingest body (16 MiB).
	MaxBodyBytes int64
	// OTLPTenantAttributes lists, comma-separated, the span or resource attributes naming the
	// tenant of an OTLP span (ledgerd.tenant,tenant.id).
	OTLPTenantAttributes string
	// Config is the configuration file: alert rules and receivers (docs/alerts.md); empty uses the
	// default rules with no receivers.
	Config string
	// ViewerToken, when set, is a password for the dashboard that shows ViewerProject (read-only),
	// for people without a project API key.
	ViewerToken string
	// ViewerProject names the project the viewer token shows.
	ViewerProject string
	// Logger receives structured logs (discarded when nil).
	Logger *slog.Logger
	// OnListen, when set, is told the bound address; tests listen on 127.0.0.1:0.
	OnListen func(addr string)
	// Now is the clock (time.Now); tests inject their own.
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.Listen == "" {
		o.Listen = "127.0.0.1:8080"
	}
	if o.DataDir == "" {
		o.DataDir = ".ledgerd"
	}
	if o.Timezone == "" {
		o.Timezone = "UTC"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// cleanup is a stack of shutdown steps run in reverse order of start.
type cleanup []step

// step is one shutdown step and what it waits for, said in the log as it starts, so that the
// seconds a stop takes (the writer's last commit, the embedded PostgreSQL's checkpoint) are never
// silent.
type step struct {
	what string
	fn   func(context.Context)
}

// add pushes a step that waits for what.
func (c *cleanup) add(what string, fn func(context.Context)) { *c = append(*c, step{what, fn}) }

// run runs the steps, newest first, logging each with how long it took.
func (c cleanup) run(ctx context.Context, log *slog.Logger) {
	for i := len(c) - 1; i >= 0; i-- {
		start := time.Now()
		log.Info("shutting down: waiting for " + c[i].what)
		c[i].fn(ctx)
		log.Debug("shut down: "+c[i].what, "took", time.Since(start).Round(time.Millisecond).String())
	}
	if len(c) > 0 {
		log.Info("shut down")
	}
}

// DB is an open ledger database, embedded or not.
type DB struct {
	Store *store.Store
	stop  func(context.Context)
}

// Close closes the pool and stops an embedded server this process started.
func (d *DB) Close(ctx context.Context) { d.Store.Close(); d.stop(ctx) }

// OpenDB opens the configured database, starting (or joining) the embedded one when no URL is
// given.
func OpenDB(ctx context.Context, opt Options) (*DB, error) {
	opt.defaults()
	url := opt.DatabaseURL
	stop := func(context.Context) {}
	if url == "" {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		pg, err := embeddedpg.Start(sctx, embeddedpg.Options{Dir: opt.DataDir, BinariesPath: opt.PGBinaries, Logger: opt.Logger})
		switch {
		case errors.Is(err, embeddedpg.ErrInUse):
			// Another ledgerd (usually `serve`) runs the embedded server: use it.
			if url, err = embeddedpg.Attach(opt.DataDir, ""); err != nil {
				return nil, err
			}
		case err != nil:
			return nil, fmt.Errorf("start embedded database: %w", err)
		default:
			url = pg.URL()
			stop = func(ctx context.Context) {
				if err := pg.Stop(ctx); err != nil {
					opt.Logger.Error("stop embedded database", "err", err)
				}
			}
		}
	}
	st, err := store.Open(ctx, url, 16)
	if err != nil {
		stop(ctx)
		return nil, err
	}
	return &DB{Store: st, stop: stop}, nil
}

// Run serves ledgerd until ctx is cancelled, then shuts down gracefully.
func Run(ctx context.Context, opt Options) (err error) {
	opt.defaults()
	log := opt.Logger
	tz, err := time.LoadLocation(opt.Timezone)
	if err != nil {
		return fmt.Errorf("timezone %q: %w", opt.Timezone, err)
	}
	if opt.PublicURL != "" {
		u, err := url.Parse(opt.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("public URL %q must be an http(s) URL such as https://ledgerd.example.com", opt.PublicURL)
		}
	}
	catalog, report, err := pricing.LoadReported(opt.PricesFile)
	if err != nil {
		return fmt.Errorf("load prices: %w", err)
	}
	if opt.PricesFile != "" {
		for _, w := range report.Warnings() {
			log.Warn("price file entry skipped", "entry", w)
		}
		log.Info("prices loaded", "file", opt.PricesFile, "summary", report.Summary())
	}
	var steps cleanup
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		steps.run(sctx, log)
	}()
	// The port is taken first: an address in use is reported before an embedded database is
	// created and migrated, not after. Requests wait in the listen backlog until serving starts.
	ln, err := net.Listen("tcp", opt.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", opt.Listen, err)
	}
	served := false
	defer func() {
		if !served {
			ln.Close()
		}
	}()
	db, err := OpenDB(ctx, opt)
	if err != nil {
		return err
	}
	embedded := ""
	if opt.DatabaseURL == "" {
		embedded = " and the embedded PostgreSQL to stop"
	}
	steps.add("the database pool to close"+embedded, db.Close)
	st := db.Store
	if err := prepareSchema(ctx, st, opt, tz); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	aheadFailures := promauto.With(reg).NewCounter(prometheus.CounterOpts{Name: "ledgerd_partitions_ahead_failures_total",
		Help: "Failed attempts to create this month's and next month's attempts partitions ahead (retried hourly; alert if it keeps rising)."})
	actx, stopAhead := context.WithCancel(ctx)
	ahead := keepPartitionsAhead(actx, st, opt.Now, log, aheadFailures)
	steps.add("the partition keeper to stop", func(context.Context) { stopAhead(); <-ahead })
	reads, err := store.OpenReads(st.Pool, opt.ReadDatabaseURL, store.ReadOptions{MaxWait: opt.ReadMaxWait, Registerer: reg})
	if err != nil {
		return err
	}
	steps.add("the read pool to close", func(context.Context) { reads.Close() })
	if reads.Standby() {
		log.Info("query API and dashboard read from the standby", "max_wait", cmp.Or(opt.ReadMaxWait, store.DefaultReadMaxWait).String())
	}
	llm := llmmetrics.New(st, llmmetrics.Options{Logger: log})
	reg.MustRegister(llm)
	writer := ingest.NewWriter(st, ingest.CatalogPrice(catalog), ingest.Options{Timezone: tz, Logger: log, Registerer: reg, OnCommit: llm.Observe,
		ReadWait: cmp.Or(opt.FoldWait, DefaultFoldWait), PruneEvery: time.Hour})
	steps.add("the writer to commit the records it accepted and fold the rollups", func(ctx context.Context) {
		if err := writer.Close(ctx); err != nil {
			log.Error("flush writer", "err", err)
		}
	})
	srv := server.New(server.Options{
		Store: st, Writer: writer, Logger: log, Registry: reg, Now: opt.Now,
		MaxBodyBytes: opt.MaxBodyBytes,
		Suggest:      func(provider, model string) []string { return catalog.SuggestFor(provider, model, 3) },
		Ready: func(ctx context.Context) error {
			cur, latest, err := migrations.Versions(ctx, st.Pool)
			if err != nil {
				return err
			}
			if cur != latest {
				return fmt.Errorf("schema at version %d, want %d", cur, latest)
			}
			return nil
		},
	})

	if err := mount(ctx, Deps{Store: st, Reads: reads, Catalog: catalog, Server: srv, Writer: writer, Registry: reg, Timezone: tz,
		Now: opt.Now, Logger: log, Options: opt}, &steps); err != nil {
		return err
	}

	httpSrv := &http.Server{
		Handler:           srv.Echo,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	served = true
	go func() { serveErr <- httpSrv.Serve(ln) }()
	log.Info("ledgerd listening", "addr", ln.Addr().String(), "timezone", tz.String())
	if opt.OnListen != nil {
		opt.OnListen(ln.Addr().String())
	}

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("serve http: %w", err)
	}
	log.Info("shutting down: no new requests; waiting for the HTTP requests in flight (at most 15s)")
	sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := httpSrv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("http shutdown", "err", err)
	}
	return nil
}

// keepPartitionsAhead creates this month's and next month's attempts partitions at once and then
// every hour, so that no commit has to (store.PartitionsAhead says why); should a long read hold
// the table, it counts a failure and tries again an hour later. It stops when ctx ends, and
// closes the channel it returns then.
func keepPartitionsAhead(ctx context.Context, st *store.Store, now func() time.Time, log *slog.Logger, failures prometheus.Counter) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Hour)
		defer tick.Stop()
		for {
			if err := st.PartitionsAhead(ctx, now(), 5*time.Second); err != nil && ctx.Err() == nil {
				failures.Inc()
				log.Warn("create the attempts partitions ahead; trying again in an hour", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return done
}

// prepareSchema migrates (or checks) the schema and pins the timezone daily rollups use.
func prepareSchema(ctx context.Context, st *store.Store, opt Options, tz *time.Location) error {
	if opt.Migrate || opt.DatabaseURL == "" {
		v, err := migrations.Up(ctx, st.Pool)
		if err != nil {
			return err
		}
		opt.Logger.Info("schema migrated", "version", v)
	} else {
		cur, latest, err := migrations.Versions(ctx, st.Pool)
		if err != nil {
			return err
		}
		if cur != latest {
			return fmt.Errorf("database schema is at version %d, this ledgerd needs %d: run `ledgerd migrate` or start with --migrate", cur, latest)
		}
	}
	stored, err := st.Setting(ctx, "timezone")
	switch {
	case errors.Is(err, store.ErrNotFound):
		return st.SetSetting(ctx, "timezone", tz.String())
	case err != nil:
		return err
	case stored != tz.String():
		return fmt.Errorf("daily rollups in this database are counted in %s, not %s: start with --timezone %s, or stop every ledgerd and run `ledgerd rollups rebuild --timezone %s` to recount them", stored, tz.String(), stored, tz.String())
	}
	return nil
}
