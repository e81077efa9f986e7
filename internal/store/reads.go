package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Reads hands out connections for read-only queries (the query API, the dashboard). Without a
// standby they all go to the primary. With one (a hot standby streaming from the primary, or
// several behind a multi-host URL), a read goes to the standby once it has replayed everything
// the primary had written when the read began, so a read after an acknowledged ingest, or after
// the fold that put it in the rollups, counts it. A standby that does not get there within
// MaxWait, or cannot be reached or answer its check, sends the read to the primary instead. A
// read the standby cancels once it has begun (a conflict with recovery) fails; hot_standby_feedback
// on the standby avoids most such conflicts. When the primary cannot be reached, the standby
// answers with everything it received (with a synchronous standby, every commit the primary
// acknowledged).
type Reads struct {
	primary *pgxpool.Pool
	standby *pgxpool.Pool
	maxWait time.Duration
	m       readMetrics
}

// ReadOptions configures OpenReads. Zero values take the defaults shown.
type ReadOptions struct {
	// MaxWait bounds how long a read waits for the standby to replay the primary's writes before
	// it goes to the primary instead (500 ms).
	MaxWait time.Duration
	// MaxConns bounds the standby pool (16).
	MaxConns int32
	// Registerer receives the standby's metrics (none when nil).
	Registerer prometheus.Registerer
}

// DefaultReadMaxWait is ReadOptions.MaxWait's default.
const DefaultReadMaxWait = 500 * time.Millisecond

// Queries that place a read. Positions are bytes of WAL since 0/0.
const (
	// writtenSQL is the primary's WAL insert position: past every commit it has acknowledged, and
	// every fold, whether or not the WAL is on disk yet.
	writtenSQL = `SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::int8`
	// replaySQL is where a standby stands: still in recovery, the WAL replayed (visible to its
	// queries) and the WAL received. A promoted standby, or a primary, is out of recovery.
	replaySQL = `SELECT pg_is_in_recovery(), (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::int8,
		(pg_last_wal_receive_lsn() - '0/0'::pg_lsn)::int8`
	// lagSecondsSQL is how old the last transaction a standby replayed is while it has received
	// WAL left to replay, and 0 when it has replayed all it received.
	lagSecondsSQL = `SELECT CASE WHEN NOT pg_is_in_recovery() OR pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
		ELSE coalesce(extract(epoch FROM now() - pg_last_xact_replay_timestamp()), 0) END::float8`
)

// PrimaryReads sends every read to the primary pool.
func PrimaryReads(primary *pgxpool.Pool) *Reads { return &Reads{primary: primary} }

// OpenReads returns the Reads of a primary pool and the standby at url; an empty url sends every
// read to the primary. The standby need not be up: until it answers, reads go to the primary.
func OpenReads(primary *pgxpool.Pool, url string, opt ReadOptions) (*Reads, error) {
	if url == "" {
		return PrimaryReads(primary), nil
	}
	if opt.MaxWait <= 0 {
		opt.MaxWait = DefaultReadMaxWait
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse read database url: %w", err)
	}
	cfg.MaxConns = 16
	if opt.MaxConns > 0 {
		cfg.MaxConns = opt.MaxConns
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	standby, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("open read database: %w", err)
	}
	r := &Reads{primary: primary, standby: standby, maxWait: opt.MaxWait}
	r.m = newReadMetrics(opt.Registerer, r)
	return r, nil
}

// Close closes the standby pool (the primary's belongs to its Store).
func (r *Reads) Close() {
	if r.standby != nil {
		r.standby.Close()
	}
}

// Standby tells whether a standby is configured.
func (r *Reads) Standby() bool { return r.standby != nil }

// Acquire returns a connection for read-only queries, on the standby when it has replayed the
// primary's writes in time and on the primary otherwise (see Reads). The wait is checked on the
// very connection returned, so with several standbys behind one URL the read goes to one that is
// far enough. Release the connection when done.
func (r *Reads) Acquire(ctx context.Context) (*pgxpool.Conn, error) {
	if r.standby == nil {
		return acquire(ctx, r.primary)
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, r.maxWait)
	defer cancel()
	var target int64
	primaryErr := r.primary.QueryRow(wctx, writtenSQL).Scan(&target)
	reason := "standby_error"
	if conn, err := r.standby.Acquire(wctx); err == nil {
		ok, err := replayed(wctx, conn, target, primaryErr == nil)
		if ok {
			reason = "replayed"
			if primaryErr != nil {
				reason = "primary_unreachable"
			}
			r.m.waits.Observe(time.Since(start).Seconds())
			r.m.reads.WithLabelValues("standby", reason).Inc()
			return conn, nil
		}
		conn.Release()
		if err == nil || wctx.Err() != nil {
			reason = "lagging"
		}
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("acquire a read connection: %w", ctx.Err())
	}
	r.m.reads.WithLabelValues("primary", reason).Inc()
	return acquire(ctx, r.primary)
}

func acquire(ctx context.Context, pool *pgxpool.Pool) (*pgxpool.Conn, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire a read connection: %w", err)
	}
	return conn, nil
}

// replayed polls the standby behind conn until it has replayed target (without one, everything it
// has received) and reports true then; false when ctx ends first.
func replayed(ctx context.Context, conn *pgxpool.Conn, target int64, haveTarget bool) (bool, error) {
	for i := 0; ; i++ {
		var inRecovery bool
		var replay, receive *int64
		if err := conn.QueryRow(ctx, replaySQL).Scan(&inRecovery, &replay, &receive); err != nil {
			return false, err
		}
		if !inRecovery || replay == nil {
			return true, nil // promoted, or a primary: nothing left to replay
		}
		want := target
		if !haveTarget {
			if receive == nil {
				return true, nil
			}
			want = *receive
		}
		if *replay >= want {
			return true, nil
		}
		t := time.NewTimer(min(time.Millisecond<<min(i, 3), 8*time.Millisecond))
		select {
		case <-ctx.Done():
			t.Stop()
			return false, nil
		case <-t.C:
		}
	}
}

// readMetrics are the counters and gauges of reads placed on a standby.
type readMetrics struct {
	reads *prometheus.CounterVec
	waits prometheus.Histogram
}

func newReadMetrics(reg prometheus.Registerer, r *Reads) readMetrics {
	f := promauto.With(reg)
	m := readMetrics{
		reads: f.NewCounterVec(prometheus.CounterOpts{Name: "ledgerd_reads_total",
			Help: "Read connections handed out with a standby configured, by the server that got them and why: standby (replayed, or primary_unreachable) or primary (lagging: not replayed within the wait; standby_error: unreachable, or its replay check failed, as when recovery cancels it)."},
			[]string{"server", "reason"}),
		waits: f.NewHistogram(prometheus.HistogramOpts{Name: "ledgerd_standby_wait_seconds",
			Help:    "Time a read waited for the standby to replay the primary's writes, for reads the standby served.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 12)}),
	}
	if reg != nil {
		reg.MustRegister(&lagCollector{r: r})
	}
	return m
}

// lagCollector reports, at each scrape, whether the standby answers and how far behind the
// primary it replays.
type lagCollector struct{ r *Reads }

var (
	standbyUpDesc = prometheus.NewDesc("ledgerd_standby_up",
		"1 when the read standby answered this scrape, 0 when not.", nil, nil)
	lagBytesDesc = prometheus.NewDesc("ledgerd_standby_replay_lag_bytes",
		"WAL the primary has written and the read standby has not replayed yet, in bytes (0 once it is promoted).", nil, nil)
	lagSecondsDesc = prometheus.NewDesc("ledgerd_standby_replay_lag_seconds",
		"Age of the last transaction the read standby replayed while it has WAL left to replay; 0 when it has replayed all it received.", nil, nil)
)

// Describe sends the gauges' descriptions.
func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- standbyUpDesc
	ch <- lagBytesDesc
	ch <- lagSecondsDesc
}

// Collect asks the standby (and the primary, for the byte lag) within a second. Lag is not
// reported while the standby does not answer; byte lag not while the primary does not.
func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var inRecovery bool
	var replay, receive *int64
	var seconds float64
	err := c.r.standby.QueryRow(ctx, replaySQL).Scan(&inRecovery, &replay, &receive)
	if err == nil {
		err = c.r.standby.QueryRow(ctx, lagSecondsSQL).Scan(&seconds)
	}
	if err != nil {
		ch <- prometheus.MustNewConstMetric(standbyUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(standbyUpDesc, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(lagSecondsDesc, prometheus.GaugeValue, seconds)
	if !inRecovery || replay == nil {
		ch <- prometheus.MustNewConstMetric(lagBytesDesc, prometheus.GaugeValue, 0)
		return
	}
	var written int64
	if c.r.primary.QueryRow(ctx, writtenSQL).Scan(&written) == nil {
		ch <- prometheus.MustNewConstMetric(lagBytesDesc, prometheus.GaugeValue, float64(max(written-*replay, 0)))
	}
}
