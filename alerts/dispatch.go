package alerts

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/alerts/notify"
)

// receiver is a configured destination with its integration, retry policy and repeat interval.
type receiver struct {
	name     string
	kind     string
	notifier notify.Notifier
	retrier  notify.Retrier
	// batch sends all due alerts in one request (Alertmanager); otherwise one request each.
	batch bool
	// repeat is how long a delivered firing alert waits before it is sent again.
	repeat time.Duration
}

// Outcomes of a delivery, as the notification log stores them.
const (
	outcomeDelivered = "delivered"
	outcomeRejected  = "rejected" // a 4xx or a configuration problem: not retried until the repeat interval
	outcomeFailed    = "failed"   // retryable, but every retry failed: tried again next evaluation
)

// logEntry is one row of alert_notifications.
type logEntry struct {
	Status  string
	Outcome string
	At      time.Time
}

// due is the dedup stage for one alert and one receiver: whether the alert, now in state, must be
// sent, given the receiver's last log entry (nil when it was never told).
func due(state string, last *logEntry, repeat time.Duration, now time.Time) bool {
	switch state {
	case stateFiring:
		if last == nil || last.Status != stateFiring || last.Outcome == outcomeFailed {
			return true
		}
		return now.Sub(last.At) >= repeat
	case stateResolved:
		// Only receivers that were told (or were being told) it fired hear that it resolved.
		if last == nil {
			return false
		}
		return last.Status == stateFiring || last.Outcome == outcomeFailed
	}
	return false
}

// item is a notification waiting to be sent, with the time of the evaluation that found it due;
// the notification log records that time, so repeat intervals count in evaluation time.
type item struct {
	alert notify.Alert
	at    time.Time
}

// queue holds one receiver's notifications waiting to be sent, so a slow receiver delays only
// itself and never the evaluation. A newer notification for an alert replaces a waiting one; one
// already being sent with the same status is not queued again.
type queue struct {
	rcv *receiver

	mu       sync.Mutex
	pending  map[string]item
	order    []string
	inflight map[string]notify.Status
	kick     chan struct{}
}

func newQueue(r *receiver) *queue {
	return &queue{rcv: r, pending: map[string]item{}, inflight: map[string]notify.Status{},
		kick: make(chan struct{}, 1)}
}

func (q *queue) enqueue(it item) {
	fp := it.alert.Fingerprint
	q.mu.Lock()
	if st, busy := q.inflight[fp]; busy && st == it.alert.Status {
		q.mu.Unlock()
		return
	}
	if _, waiting := q.pending[fp]; !waiting {
		q.order = append(q.order, fp)
	}
	q.pending[fp] = it
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// take moves every waiting notification to in flight.
func (q *queue) take() []item {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]item, 0, len(q.order))
	for _, fp := range q.order {
		it := q.pending[fp]
		out = append(out, it)
		q.inflight[fp] = it.alert.Status
	}
	clear(q.pending)
	q.order = q.order[:0]
	return out
}

func (q *queue) done(items []item) {
	q.mu.Lock()
	for _, it := range items {
		delete(q.inflight, it.alert.Fingerprint)
	}
	q.mu.Unlock()
}

// busy reports whether a notification for the fingerprint is waiting or being sent.
func (q *queue) busy(fp string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, p := q.pending[fp]
	_, f := q.inflight[fp]
	return p || f
}

func (q *queue) idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending) == 0 && len(q.inflight) == 0
}

// Queries of the record stage.
const (
	logSQL = `SELECT fingerprint, receiver, status, outcome, at FROM alert_notifications
		WHERE fingerprint = ANY($1)`
	recordLogSQL = `INSERT INTO alert_notifications (fingerprint, receiver, status, outcome, at)
		SELECT unnest($1::text[]), $2, unnest($3::text[]), $4, unnest($5::timestamptz[])
		ON CONFLICT (fingerprint, receiver) DO UPDATE SET status = excluded.status, outcome = excluded.outcome,
			at = excluded.at`
	notifiedSQL = `UPDATE alert_state SET last_notified_at = $2 WHERE fingerprint = ANY($1)`
	// recordReceiverSQL keeps per-receiver delivery counts and the last outcome; $4 is true on
	// success.
	recordReceiverSQL = `INSERT INTO alert_receivers AS r (name, kind, sent, failed, last_success_at, last_failure_at, last_error)
		VALUES ($1, $2, CASE WHEN $4 THEN $3::int8 ELSE 0 END, CASE WHEN $4 THEN 0 ELSE $3::int8 END,
			CASE WHEN $4 THEN $5::timestamptz END, CASE WHEN $4 THEN NULL ELSE $5::timestamptz END, $6)
		ON CONFLICT (name) DO UPDATE SET kind = excluded.kind,
			sent = r.sent + excluded.sent, failed = r.failed + excluded.failed,
			last_success_at = coalesce(excluded.last_success_at, r.last_success_at),
			last_failure_at = coalesce(excluded.last_failure_at, r.last_failure_at),
			last_error = CASE WHEN $4 THEN r.last_error ELSE excluded.last_error END`
	// pruneLogSQL drops log rows of alerts that are gone.
	pruneLogSQL = `DELETE FROM alert_notifications n
		WHERE NOT EXISTS (SELECT 1 FROM alert_state s WHERE s.fingerprint = n.fingerprint)`
)

// readLog returns the notification log of the given alerts, by fingerprint and receiver.
func readLog(ctx context.Context, pool *pgxpool.Pool, fps []string) (map[string]map[string]*logEntry, error) {
	out := map[string]map[string]*logEntry{}
	rows, err := pool.Query(ctx, logSQL, fps)
	if err != nil {
		return nil, err
	}
	var fp, rcv string
	var e logEntry
	_, err = pgx.ForEachRow(rows, []any{&fp, &rcv, &e.Status, &e.Outcome, &e.At}, func() error {
		if out[fp] == nil {
			out[fp] = map[string]*logEntry{}
		}
		entry := e
		out[fp][rcv] = &entry
		return nil
	})
	return out, err
}

// recorder is the record stage: it writes each delivery's outcome to the notification log, the
// alert's last notification time and the receiver's status, and counts it.
type recorder struct {
	pool *pgxpool.Pool
	now  func() time.Time
	log  *slog.Logger
	m    *metrics
}

func (rec *recorder) record(ctx context.Context, r *receiver, items []item, res notify.Result, sendErr error) {
	outcome := outcomeDelivered
	switch {
	case sendErr == nil:
	case res.Retryable:
		outcome = outcomeFailed
	default:
		outcome = outcomeRejected
	}
	now := rec.now()
	fps := make([]string, len(items))
	statuses := make([]string, len(items))
	ats := make([]time.Time, len(items))
	for i, it := range items {
		fps[i], statuses[i], ats[i] = it.alert.Fingerprint, string(it.alert.Status), it.at
		if sendErr == nil {
			rec.m.sent.WithLabelValues(r.name, string(it.alert.Status)).Inc()
		} else {
			rec.m.failed.WithLabelValues(r.name, outcome).Inc()
		}
	}
	if res.Attempts > 1 {
		rec.m.retries.WithLabelValues(r.name).Add(float64(res.Attempts - 1))
	}
	lastErr := ""
	if sendErr != nil {
		// Integration errors carry no URL or token; see notify.
		lastErr = sendErr.Error()
		rec.log.Warn("alert notification failed", "receiver", r.name, "kind", r.kind, "alerts", len(items),
			"attempts", res.Attempts, "outcome", outcome, "err", lastErr)
	} else {
		rec.log.Info("alert notification sent", "receiver", r.name, "kind", r.kind, "alerts", len(items),
			"attempts", res.Attempts)
	}
	err := pgx.BeginFunc(ctx, rec.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, recordLogSQL, fps, r.name, statuses, outcome, ats); err != nil {
			return err
		}
		if sendErr == nil {
			if _, err := tx.Exec(ctx, notifiedSQL, fps, now); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, recordReceiverSQL, r.name, r.kind, int64(len(items)), sendErr == nil, now, lastErr)
		return err
	})
	if err != nil {
		rec.log.Error("record alert notification", "receiver", r.name, "err", err)
	}
}

// dispatcher runs one sender per receiver, off the evaluation path.
type dispatcher struct {
	queues map[string]*queue
	rec    *recorder

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newDispatcher(receivers []*receiver, rec *recorder) *dispatcher {
	d := &dispatcher{queues: map[string]*queue{}, rec: rec}
	for _, r := range receivers {
		d.queues[r.name] = newQueue(r)
	}
	return d
}

// start runs the senders until stop.
func (d *dispatcher) start() {
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	for _, q := range d.queues {
		d.wg.Add(1)
		go d.run(ctx, q)
	}
}

func (d *dispatcher) run(ctx context.Context, q *queue) {
	defer d.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.kick:
		}
		for {
			items := q.take()
			if len(items) == 0 {
				break
			}
			groups := [][]item{items}
			if !q.rcv.batch {
				groups = groups[:0]
				for _, it := range items {
					groups = append(groups, []item{it})
				}
			}
			for _, g := range groups {
				alerts := make([]notify.Alert, len(g))
				for i, it := range g {
					alerts[i] = it.alert
				}
				res, err := q.rcv.retrier.Do(ctx, q.rcv.notifier, alerts...)
				if ctx.Err() == nil || err == nil {
					// A send cut short by shutdown is not recorded: the next leader sends it again.
					rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
					d.rec.record(rctx, q.rcv, g, res, err)
					cancel()
				}
				q.done(g)
			}
		}
	}
}

// busy reports whether a notification for the alert is waiting or in flight at any receiver.
func (d *dispatcher) busy(fp string) bool {
	for _, q := range d.queues {
		if q.busy(fp) {
			return true
		}
	}
	return false
}

// flush waits until every queue is empty and nothing is in flight, or ctx ends.
func (d *dispatcher) flush(ctx context.Context) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		if !slices.ContainsFunc(slices.Collect(maps.Values(d.queues)), func(q *queue) bool { return !q.idle() }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(errors.New("notifications still in flight"), ctx.Err())
		case <-t.C:
		}
	}
}

// stop lets queued and in-flight sends finish until ctx ends, then cancels the rest.
func (d *dispatcher) stop(ctx context.Context) {
	_ = d.flush(ctx)
	if d.cancel != nil {
		d.cancel()
	}
	d.wg.Wait()
}
