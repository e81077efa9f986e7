// Package analytics answers the platform lead's questions from the rollups the ingest writer keeps:
// spend and reliability per model, service, tenant, day or hour (Summary), the month's projected
// spend against its budget (Projection), and whether prompt caching pays (Cache). The dashboard and
// the alerts engine call the Service directly; Routes serves the same answers as JSON under /v1.
//
// # Where figures come from
//
// A range [From, To) defaults to the last 7 local days, today included (up to the end of today).
// It is rounded outward to whole UTC hours, the grain of the hourly rollups, and the effective
// range is echoed in every answer. Whole local days inside it are read from rollup_daily and the
// hours at its edges from rollup_hourly, so a week costs a few thousand rollup rows whatever the
// traffic. A summary whose grouping and filter name only the series columns one narrow daily
// rollup keeps (rollup.DailyBy: provider, model and fallback_from; service and operation; tenant)
// reads its whole days from that one instead, about a tenth of the rows. Days are counted in the timezone stored in settings 'timezone', which the Service is
// given. Grouping by hour reads hourly rows only. In a timezone whose days do not begin on a whole
// UTC hour (India, Nepal, ...) a range of whole local days is answered exactly from the daily rows
// and kept as asked; any other range there is read from hourly rows, each hour counted in the
// local day it begins in. Nothing is read from the raw attempts table except by Rebuild.
//
// # Definitions (per group)
//
//   - attempts: provider attempts; requests: logical calls, counted by their first attempt
//     (attempt_no 1); attempts_per_call = attempts / requests (retry amplification).
//   - cost_usd: ledgerd's cost of the priced attempts; unpriced_attempts counts those whose model
//     has no price, usage_unknown_attempts those whose answer carried no usage (a chat stream
//     without include_usage): neither is in cost_usd, neither is $0. When every attempt of a group
//     is one or the other cost_usd is null, never "0". cache_savings_usd is what
//     the priced attempts would have cost without prompt caching minus what they cost (negative
//     when caching lost money); wasted_usd is the cost of attempts that did not succeed (status
//     error or cancelled). Both are null when the attempts they cover are all unpriced.
//   - cache_hit_ratio = cache_read / (input + cache_write + cache_read) tokens.
//   - errors: attempts with status error, by error_class; error_rate = their sum / attempts;
//     rate_limited_share = rate_limited attempts / attempts. Client cancellations are counted in
//     cancelled, not as errors (their spend is in wasted_usd).
//   - succeeded: attempts with status ok; fallback_share = succeeded attempts that served a
//     fallback path / succeeded attempts: the share of answers a fallback model gave.
//   - latency_ms: p50, p95, p99 and mean of the succeeded attempts. Percentiles use the nearest
//     rank ceil(q·n) in the merged latency histograms and report the geometric midpoint
//     2^((i-0.5)/16) ms of its bucket i, which spans (2^((i-1)/16), 2^(i/16)] ms: within 2.2% of
//     the true latency (attempts of 1 ms or less report 1).
//   - client_cost_mismatches: attempts whose client-reported cost differs from ledgerd's by more
//     than 1%.
//
// # Fallbacks
//
// When a summary groups by model or provider, every group key carries "fallback": attempts a model
// served in place of another (fallback: true) form their own groups, keyed also by
// "fallback_from", and never blend into the statistics of the model's own traffic. Groupings by
// service, operation, tenant, day or hour include every attempt, and show fallback_share.
package analytics

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/pricing"
)

// Service answers analytics questions from the rollups of one database.
type Service struct {
	reads     *store.Reads
	store     *store.Store
	tz        *time.Location
	now       func() time.Time
	catalog   *pricing.Catalog
	shapes    shapeNames
	kept      keptDays[dayRow]
	models    keptDays[shapeDay]
	prefixes  keptReads[prefixSpanKey, map[sinceKey]*cachePrefix]
	answers   keptReads[cacheAnswerKey, []CacheRow]
	spans     keptReads[spanKey, map[gkey]*acc]
	todays    keptReads[spanKey, *dayRows]
	modelDays keptReads[dayKey, *dayModels]
	costs     keptReads[spanKey, map[string]int64]
	recovered keptReads[recoveryKey, *int64]
	hours     keptReads[keptDay, []modelHour]
	minutes   keptReads[windowKey, []minuteRow]
}

// Options are what a Service reads and counts with.
type Options struct {
	Pool *pgxpool.Pool
	// Reads, when set, places each read instead of Pool: on a hot standby that has replayed what
	// the primary wrote before the read, or on the primary (store.Reads).
	Reads *store.Reads
	// Timezone counts days (the timezone stored in settings 'timezone'; UTC).
	Timezone *time.Location
	// Now is the clock (time.Now).
	Now func() time.Time
	// Catalog is the catalog the running server prices new attempts with, listed by GET
	// /v1/prices; only that route needs it.
	Catalog *pricing.Catalog
}

// New returns a Service answering from opt.Pool.
func New(opt Options) *Service {
	if opt.Timezone == nil {
		opt.Timezone = time.UTC
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Reads == nil {
		opt.Reads = store.PrimaryReads(opt.Pool)
	}
	return &Service{reads: opt.Reads, store: store.New(opt.Pool), tz: opt.Timezone, now: opt.Now, catalog: opt.Catalog}
}

// Filter selects the attempts a question is about: one project, a time range [From, To) and
// optionally one service, model, tenant, operation and provider ("" matches any).
type Filter struct {
	ProjectID int64
	From, To  time.Time
	Service   string
	Model     string
	Tenant    string
	Operation string
	Provider  string
	// Step is the width of a group of a summary grouped by minute: a minute (also when zero) or
	// five.
	Step time.Duration
	// WithAttempts asks a summary for its calls by number of attempts (attempts.go), read from the
	// raw attempts of the range.
	WithAttempts bool
}

// MaxRange is the longest range a question may span.
const MaxRange = 400 * 24 * time.Hour

// ParamError reports a question that cannot be answered as asked; Param names the parameter at
// fault, so the HTTP layer answers 400 naming it.
type ParamError struct {
	Param  string
	Reason string
	// Others are the request's other bad parameters, so that one answer names them all.
	Others []*ParamError
}

// Error formats the error as "param: reason", followed by "; param: reason" for each of the
// others: the message of the 400 answer.
func (e *ParamError) Error() string {
	s := e.Param + ": " + e.Reason
	for _, o := range e.Others {
		s += "; " + o.Error()
	}
	return s
}

func badParam(param, format string, args ...any) error {
	return &ParamError{Param: param, Reason: fmt.Sprintf(format, args...)}
}

// readSettingsSQL sets the planner for the rollup reads, local to their transaction. Parallel
// workers cost more than they save on the few thousand rows a question reads (and two of them run
// at once). Rollups are small and read often, so they sit in memory: an index scan over a range
// of them costs little more than reading them in order, and a month of daily rows is read by
// index even when it is a large share of the table (a young ledger), about twice as fast as a
// sequential scan at 10M records. JIT compilation pays only on long scans, and a read of narrow
// windows of raw attempts whose rows the planner overestimates (the incidents' recoveries, costed
// at millions) spent 450 ms of its 550 ms compiling at 10M records: off. A question with many
// groups (a month by tenant at 10,000 tenants: some 40,000 groups of tenant, status and error
// class) needs more than the default 4 MB to add them up in a hash table; it added them up in the
// order of an index scan instead, 0.74 s against 0.47-0.53 s hashed at 1M records: work_mem 32 MB
// (64 MB for a hash, at the default hash_mem_multiplier) for each sort or hash of a read.
const readSettingsSQL = `SELECT set_config('max_parallel_workers_per_gather', '0', true), set_config('random_page_cost', '1.1', true),
	set_config('jit', 'off', true), set_config('work_mem', '32MB', true)`

// read runs one rollup query, with its named parameters args, in a read-only transaction with
// readSettingsSQL and hands each row, scanned into dst, to each. The statement is planned for its arguments on every run: the rows it
// reads depend on them, and a generic plan (which a cached prepared statement switches to after
// five runs) cannot know how many and may scan whole tables. An unnamed statement with a cached
// description costs no extra round trip.
func (s *Service) read(ctx context.Context, sql string, args pgx.NamedArgs, dst []any, each func() error) error {
	return s.readTx(ctx, pgx.ReadCommitted, func(q queryFunc) error { return q(sql, args, dst, each) })
}

// queryFunc runs one query of a read's transaction as read does.
type queryFunc func(sql string, args pgx.NamedArgs, dst []any, each func() error) error

// readSnapshot runs fn's queries in one read-only REPEATABLE READ transaction with
// readSettingsSQL: they all read the same snapshot.
func (s *Service) readSnapshot(ctx context.Context, fn func(q queryFunc) error) error {
	return s.readTx(ctx, pgx.RepeatableRead, fn)
}

// readTx runs fn on a read connection in a read-only transaction of isolation iso with
// readSettingsSQL, handing it the queryFunc that runs its queries as read does.
func (s *Service) readTx(ctx context.Context, iso pgx.TxIsoLevel, fn func(q queryFunc) error) error {
	conn, err := s.reads.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	return pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: iso, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, readSettingsSQL); err != nil {
			return err
		}
		return fn(func(sql string, args pgx.NamedArgs, dst []any, each func() error) error {
			rows, err := tx.Query(ctx, sql, pgx.QueryExecModeCacheDescribe, args)
			if err != nil {
				return err
			}
			_, err = pgx.ForEachRow(rows, dst, each)
			return err
		})
	})
}

// queryRow runs one single-row query on a read connection and scans it into dst.
func (s *Service) queryRow(ctx context.Context, sql string, args pgx.NamedArgs, dst ...any) error {
	conn, err := s.reads.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	return conn.QueryRow(ctx, sql, args).Scan(dst...)
}

// date is a local calendar day.
type date struct {
	y int
	m time.Month
	d int
}

func dateOf(t time.Time, tz *time.Location) date {
	y, m, d := t.In(tz).Date()
	return date{y, m, d}
}

// localDays are the local days [first, end) that the instants [from, to) fall in.
func (s *Service) localDays(from, to time.Time) (first, end date) {
	return dateOf(from, s.tz), dateOf(to.Add(-time.Nanosecond), s.tz).addDays(1)
}

func (d date) addDays(n int) date {
	t := time.Date(d.y, d.m, d.d+n, 12, 0, 0, 0, time.UTC)
	return date{t.Year(), t.Month(), t.Day()}
}

// civil is the day as a UTC midnight, the form pgx reads and writes a date in.
func (d date) civil() time.Time { return time.Date(d.y, d.m, d.d, 0, 0, 0, 0, time.UTC) }

// String formats the date as YYYY-MM-DD.
func (d date) String() string { return d.civil().Format(time.DateOnly) }

func (d date) before(e date) bool { return d.civil().Before(e.civil()) }

// start is the first instant of the day in tz, the way PostgreSQL's (t AT TIME ZONE tz)::date
// counts it: where midnight is skipped by a clock change the day begins at the change, and where
// midnight happens twice it begins at the first.
func (d date) start(tz *time.Location) time.Time {
	t := time.Date(d.y, d.m, d.d, 0, 0, 0, 0, tz)
	if dateOf(t, tz).before(d) { // time.Date went back across the skipped hour
		_, t = t.ZoneBounds()
	}
	for _, back := range []time.Duration{time.Hour, 30 * time.Minute} {
		p := t.Add(-back)
		if h, m, s := p.In(tz).Clock(); dateOf(p, tz) == d && h == 0 && m == 0 && s == 0 {
			return p
		}
	}
	return t
}

// daysBetween is the number of days from a to b.
func daysBetween(a, b date) int {
	return int(b.civil().Sub(a.civil()) / (24 * time.Hour))
}

// hourAligned tells whether t is a whole UTC hour, where hourly rollups can meet daily ones.
func hourAligned(t time.Time) bool { return t.Truncate(time.Hour).Equal(t) }
