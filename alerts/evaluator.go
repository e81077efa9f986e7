package alerts

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/alerts/notify"
	"github.com/ledgerd/ledgerd/internal/store"
)

// Options are what an Evaluator is built from besides its configuration.
type Options struct {
	// Pool is the ledger database.
	Pool *pgxpool.Pool
	// Timezone counts days and months (the ledger's, settings 'timezone'); UTC when nil.
	Timezone *time.Location
	// Now is the clock (time.Now).
	Now func() time.Time
	// Logger receives structured logs (discarded when nil).
	Logger *slog.Logger
	// Registerer receives the evaluator's metrics (none when nil).
	Registerer prometheus.Registerer
	// Sync, when set, runs before each evaluation to fold the rollup deltas ingest left pending
	// (ingest.Writer.Sync), so the rules count every record this replica acknowledged.
	Sync func(context.Context) error
}

// Evaluator evaluates the rules every interval on the replica that holds the alerting lock, keeps
// alert state in Postgres and hands due notifications to the receivers' senders.
type Evaluator struct {
	cfg       *Config
	opt       Options
	pool      *pgxpool.Pool
	store     *store.Store
	log       *slog.Logger
	now       func() time.Time
	rules     []*Rule
	ruleByNm  map[string]*Rule
	receivers []*receiver
	leader    *leader
	disp      *dispatcher
	m         *metrics

	runMu  sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// evaluationTimeout is the least time one evaluation may take; a longer interval allows more.
const evaluationTimeout = 30 * time.Second

// resolvedRetention is how long a resolved alert waits for its resolved notifications to be
// delivered before it is forgotten anyway.
const resolvedRetention = 24 * time.Hour

// New builds an evaluator; Start runs it.
func New(cfg *Config, opt Options) *Evaluator {
	if opt.Timezone == nil {
		opt.Timezone = time.UTC
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Evaluator{cfg: cfg, opt: opt, pool: opt.Pool, store: store.New(opt.Pool), log: opt.Logger, now: opt.Now,
		ruleByNm: map[string]*Rule{}, leader: &leader{pool: opt.Pool}, m: newMetrics(opt.Registerer)}
	for i := range cfg.Rules {
		r := &cfg.Rules[i]
		e.rules = append(e.rules, r)
		e.ruleByNm[r.Name] = r
	}
	resend := max(cfg.ResendInterval, cfg.Interval)
	for _, rc := range cfg.Receivers {
		client := notify.NewClient(rc.Timeout)
		r := &receiver{name: rc.Name, kind: rc.Kind(), repeat: cfg.RepeatInterval,
			retrier: notify.Retrier{MaxAttempts: int(rc.MaxAttempts), MaxElapsed: rc.MaxRetryTime}}
		switch {
		case rc.Webhook != nil:
			r.notifier = notify.NewWebhook(rc.Webhook.URL, rc.Webhook.BearerToken, client)
		case rc.Slack != nil:
			r.notifier = notify.NewSlack(rc.Slack.URL, client)
		default:
			// Alertmanager drops a firing alert at endsAt: four resends from now, as Prometheus does.
			r.notifier = notify.NewAlertmanager(rc.Alertmanager.URL, rc.Alertmanager.BearerToken, 4*resend, opt.Now, client)
			r.batch, r.repeat = true, resend
		}
		e.receivers = append(e.receivers, r)
	}
	e.disp = newDispatcher(e.receivers, &recorder{pool: opt.Pool, now: opt.Now, log: opt.Logger, m: e.m})
	return e
}

// Start runs the senders and, every interval, an evaluation (the first one interval after start).
// It returns at once; Stop ends it.
func (e *Evaluator) Start(ctx context.Context) {
	e.disp.start()
	ctx, e.cancel = context.WithCancel(ctx)
	e.done = make(chan struct{})
	go func() {
		defer close(e.done)
		t := time.NewTicker(e.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			rctx, cancel := context.WithTimeout(ctx, max(e.cfg.Interval, evaluationTimeout))
			if _, err := e.Evaluate(rctx); err != nil && ctx.Err() == nil {
				e.log.Error("evaluate alerts", "err", err)
			}
			cancel()
		}
	}()
}

// Stop ends evaluation, lets pending notifications go out until ctx ends, and gives up
// leadership so another replica takes over at its next interval.
func (e *Evaluator) Stop(ctx context.Context) {
	if e.cancel != nil {
		e.cancel()
		<-e.done
	}
	e.disp.stop(ctx)
	e.leader.release(ctx)
	e.m.leader.Set(0)
}

// Flush waits until every notification handed to the senders has been delivered (or has failed)
// and recorded, or ctx ends.
func (e *Evaluator) Flush(ctx context.Context) error { return e.disp.flush(ctx) }

// Leader reports whether this replica held the alerting lock at its last evaluation.
func (e *Evaluator) Leader() bool { return e.leader.isLeader() }

// Evaluate runs one evaluation if this replica leads: every rule for every project it covers
// (evaluate), folded into alert state (state), then the notifications due (dedup) handed to the
// senders (notify), which record how each went (record); the senders run once Start has been
// called. It returns whether this replica led. A rule whose query fails keeps its alerts as they
// were, so a database hiccup never resolves anything.
func (e *Evaluator) Evaluate(ctx context.Context) (bool, error) {
	e.runMu.Lock()
	defer e.runMu.Unlock()
	led, err := e.leader.check(ctx)
	if !led {
		e.m.leader.Set(0)
		e.m.alerts.Reset() // only the leader reports alert counts, so replicas can be summed
		return false, err
	}
	e.m.leader.Set(1)
	start := time.Now()
	defer func() { e.m.duration.Observe(time.Since(start).Seconds()) }()
	if e.opt.Sync != nil {
		if err := e.opt.Sync(ctx); err != nil {
			e.log.Warn("fold rollups before evaluating alerts", "err", err)
		}
	}
	now := e.now()
	projects, err := e.store.Projects(ctx)
	if err != nil {
		return true, err
	}
	var errs []error
	type pair struct {
		rule    string
		project int64
	}
	covered := map[pair]bool{}
	for _, r := range e.rules {
		for _, p := range projects {
			if r.Project != "" && r.Project != p.Name {
				continue
			}
			covered[pair{r.Name, p.ID}] = true
			ec := evalContext{pool: e.pool, tz: e.opt.Timezone, project: p.Project, budget: p.Budget, now: now}
			samples, err := evaluate(ctx, ec, r)
			if err == nil {
				_, _, err = transition(ctx, e.pool, r.Name, r, p.Project, samples, now)
			}
			if err != nil {
				e.m.evaluations.WithLabelValues(r.Name, "error").Inc()
				errs = append(errs, fmt.Errorf("rule %s, project %s: %w", r.Name, p.Name, err))
				continue
			}
			e.m.evaluations.WithLabelValues(r.Name, "ok").Inc()
		}
	}
	// Alerts of rules removed from the configuration, or of projects a rule no longer covers,
	// resolve.
	rows, err := e.pool.Query(ctx, staleSQL)
	if err != nil {
		return true, errors.Join(append(errs, fmt.Errorf("find stale alerts: %w", err))...)
	}
	var stale []pair
	var sp pair
	if _, err := pgx.ForEachRow(rows, []any{&sp.rule, &sp.project}, func() error {
		if !covered[sp] {
			stale = append(stale, sp)
		}
		return nil
	}); err != nil {
		return true, errors.Join(append(errs, fmt.Errorf("find stale alerts: %w", err))...)
	}
	for _, sp := range stale {
		if _, _, err := transition(ctx, e.pool, sp.rule, e.ruleByNm[sp.rule], store.Project{ID: sp.project}, nil, now); err != nil {
			errs = append(errs, err)
		}
	}
	if err := e.dispatch(ctx, now); err != nil {
		errs = append(errs, err)
	}
	if _, err := e.pool.Exec(ctx, pruneHistorySQL, now.Add(-e.cfg.HistoryRetention)); err != nil {
		errs = append(errs, fmt.Errorf("prune alert history: %w", err))
	}
	return true, errors.Join(errs...)
}

// pruneHistorySQL deletes alert history older than the retention.
const pruneHistorySQL = `DELETE FROM alert_history WHERE at < $1`

// activeSQL reads the alerts notifications are about; pending ones stay quiet.
const activeSQL = `SELECT ` + stateCols + ` FROM alert_state s
	WHERE s.state IN ('firing', 'resolved') ORDER BY s.active_since, s.fingerprint`

// countSQL counts alerts by state for the ledgerd_alerts gauge.
const countSQL = `SELECT count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'firing') FROM alert_state`

// dispatch is the dedup and notify stages: for every firing or resolved alert and every receiver
// it goes to, it reads the notification log and queues the notification if it is due. Resolved
// alerts with nothing left to send are forgotten.
func (e *Evaluator) dispatch(ctx context.Context, now time.Time) error {
	rows, err := e.pool.Query(ctx, activeSQL)
	if err != nil {
		return fmt.Errorf("read alerts: %w", err)
	}
	active, err := pgx.CollectRows(rows, scanState)
	if err != nil {
		return fmt.Errorf("read alerts: %w", err)
	}
	fps := make([]string, len(active))
	ids := make([]int64, len(active))
	for i, a := range active {
		fps[i], ids[i] = a.Fingerprint, a.ProjectID
	}
	names, err := e.store.ProjectNames(ctx, ids)
	if err != nil {
		return err
	}
	for i := range active {
		active[i].Project = names[active[i].ProjectID]
	}
	nlog, err := readLog(ctx, e.pool, fps)
	if err != nil {
		return fmt.Errorf("read notification log: %w", err)
	}
	var gone []string
	for _, a := range active {
		targets := e.receivers
		if r := e.ruleByNm[a.Rule]; r != nil && r.Receivers != nil && a.State == stateFiring {
			targets = slices.DeleteFunc(slices.Clone(e.receivers), func(rc *receiver) bool {
				return !slices.Contains(r.Receivers, rc.name)
			})
		}
		sent := false
		for _, rc := range targets {
			if due(a.State, nlog[a.Fingerprint][rc.name], rc.repeat, now) {
				e.disp.queues[rc.name].enqueue(item{alert: payload(a, notify.Status(a.State), e.cfg.ExternalURL), at: now})
				sent = true
			}
		}
		if a.State == stateResolved && a.ResolvedAt != nil &&
			(!sent && !e.disp.busy(a.Fingerprint) || now.Sub(*a.ResolvedAt) >= resolvedRetention) {
			gone = append(gone, a.Fingerprint)
		}
	}
	if len(gone) > 0 {
		if _, err := e.pool.Exec(ctx, deleteStateSQL, gone); err != nil {
			return fmt.Errorf("forget resolved alerts: %w", err)
		}
	}
	if _, err := e.pool.Exec(ctx, pruneLogSQL); err != nil {
		return fmt.Errorf("prune notification log: %w", err)
	}
	var pending, firing int64
	if err := e.pool.QueryRow(ctx, countSQL).Scan(&pending, &firing); err != nil {
		return fmt.Errorf("count alerts: %w", err)
	}
	e.m.alerts.WithLabelValues(statePending).Set(float64(pending))
	e.m.alerts.WithLabelValues(stateFiring).Set(float64(firing))
	return nil
}
