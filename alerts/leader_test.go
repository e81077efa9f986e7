package alerts_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/alerts"
)

// startReplica starts an evaluator that evaluates every 50 ms on its own, as a replica would.
func startReplica(t *testing.T, l *ledger, cfg string, clk *clock) *alerts.Evaluator {
	t.Helper()
	c, err := alerts.Parse([]byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	c.Interval = 50 * time.Millisecond
	ev := alerts.New(c, alerts.Options{Pool: l.st.Pool, Now: clk.Now, Registerer: prometheus.NewRegistry()})
	ev.Start(context.Background())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ev.Stop(ctx)
	})
	return ev
}

// leaders lists which replicas hold the lock.
func leaders(evs ...*alerts.Evaluator) []int {
	var out []int
	for i, e := range evs {
		if e.Leader() {
			out = append(out, i)
		}
	}
	return out
}

// lockHolder is the backend pid holding the alerting lock of the ledger's database (0 when none):
// the lock is per database, and other tests' replicas hold it in theirs on the same server.
func lockHolder(t *testing.T, l *ledger) int32 {
	t.Helper()
	var pid int32
	err := l.st.Pool.QueryRow(context.Background(), `SELECT coalesce(max(pid), 0) FROM pg_locks
		WHERE locktype = 'advisory' AND objid = 74210003 AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&pid)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestLeaderElection(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// depose ends the leader's leadership: by stopping it, or by killing its session.
		depose func(t *testing.T, l *ledger, leader *alerts.Evaluator)
	}{
		// Guards an orderly hand-over: the leader stops and the other replica takes over.
		{"leader stops", func(t *testing.T, _ *ledger, leader *alerts.Evaluator) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			leader.Stop(ctx)
		}},
		// Guards a lost connection: the server ends the leader's session, the lock goes with it,
		// and a replica (possibly the same one, on a new session) takes it.
		{"leader session killed", func(t *testing.T, l *ledger, _ *alerts.Evaluator) {
			pid := lockHolder(t, l)
			if _, err := l.st.Pool.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, pid); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "a new session to take the lock", 10*time.Second, func() bool {
				p := lockHolder(t, l)
				return p != 0 && p != pid
			})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := newLedger(t, time.UTC)
			h := newHook(t)
			clk := newClock(t0)
			l.add(t, l.project, cacheWrites(12, false)(t0.Add(-10*time.Minute))...)
			cfg := cfgWith(cacheRule+"receivers:\n  - {name: ops, webhook: {url: \"%s\"}}\n", h.srv.URL)
			a, b := startReplica(t, l, cfg, clk), startReplica(t, l, cfg, clk)
			waitFor(t, "the firing notification", 10*time.Second, func() bool { return len(h.alerts()) > 0 })
			// Let both replicas run many more intervals: still exactly one of them leads and the
			// alert went out once.
			clk.Add(time.Minute)
			time.Sleep(500 * time.Millisecond)
			lead := leaders(a, b)
			if len(lead) != 1 {
				t.Fatalf("leaders %v, want exactly one", lead)
			}
			if got := h.statuses(); !slices.Equal(got, []string{"cache-broken:firing"}) {
				t.Fatalf("with two replicas: %q", got)
			}
			leader, other := a, b
			if lead[0] == 1 {
				leader, other = b, a
			}
			c.depose(t, l, leader)
			if c.name == "leader stops" {
				waitFor(t, "the other replica to take over", 10*time.Second, other.Leader)
			}
			// The new leader knows the alert was sent, and sends its resolution once.
			clk.Add(2 * time.Hour)
			waitFor(t, "the resolved notification", 10*time.Second, func() bool { return len(h.alerts()) >= 2 })
			time.Sleep(300 * time.Millisecond)
			if got := h.statuses(); !slices.Equal(got, []string{"cache-broken:firing", "cache-broken:resolved"}) {
				t.Fatalf("after the hand-over: %q", got)
			}
		})
	}
}
