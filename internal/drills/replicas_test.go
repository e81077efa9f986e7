package drills

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/load"
	"github.com/ledgerd/ledgerd/internal/synth"
)

// TestReplicas runs three `ledgerd serve` against one database behind a client that spreads its
// batches over them (and sends a batch no replica answered to the next one), and kills the replica
// that evaluates alerts with SIGKILL under load. Nothing acknowledged may be lost or counted
// twice; the rollups must equal a rebuild from the raw rows; the alert that fired before the kill
// must not page again; and another replica must take over alert evaluation, in a time measured.
func TestReplicas(t *testing.T) {
	parallelShort(t)
	ctx := context.Background()
	pg := dbtest.StartServer(t)
	pages := newPager(t)
	cfg := alertConfig(t, pages.url())
	var procs []*proc
	for range 3 {
		procs = append(procs, startLedgerd(t, pg.URL(), "--migrate", "--config", cfg))
	}
	pool := connect(t, pg.URL())
	p := newProject(t, pool, "drill-replicas")
	leaders := watchLeader(procs...)
	duration := pick(14*time.Second, 3*time.Minute)

	var seen responses
	var acks ackBuffer
	done := goLoad(ctx, procs[0].url(), p, load.Options{Source: load.Live(synth.New(synth.Options{Seed: 41})),
		Spread: []string{procs[1].url(), procs[2].url()}, Duration: duration, Rate: pick(3000.0, 5000.0), Batch: 50,
		Concurrency: 16, Observe: seen.observe}, &acks)
	time.Sleep(duration * 2 / 5)
	pages.waitFiring(t, 20*time.Second)
	// A page is recorded after it is delivered; a leader killed in between pages again from its
	// successor (delivery is at least once). The drill checks that a recorded page is not sent
	// again, so it kills the leader only once the delivery is recorded.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM alert_notifications WHERE status = 'firing' AND outcome = 'delivered'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the delivered page was not recorded within 20s")
		}
	}
	victim := leaders.leader()
	if victim < 0 {
		t.Fatal("no replica reports leading alert evaluation")
	}
	procs[victim].kill9()
	killed := time.Now()
	s := wait(t, done)
	takeover := leaders.stop().leadsAfter(killed, victim)
	for i, pr := range procs {
		if i != victim {
			pr.stop()
		}
	}

	r := &report{name: "three replicas, one killed", sent: s}
	var perReplica []string
	for i, pr := range procs {
		var ok, other int
		for _, x := range seen.between(time.Time{}, time.Now()) {
			if x.URL != pr.url() {
				continue
			}
			if x.Status == http.StatusOK {
				ok++
			} else {
				other++
			}
		}
		role := ""
		if i == victim {
			role = " (the alert leader, killed)"
		}
		perReplica = append(perReplica, fmt.Sprintf("%d acknowledged, %d not%s", ok, other, role))
	}
	r.note("requests per replica: %s", strings.Join(perReplica, "; "))
	r.note("answers lost with the killed replica: %d requests got none and were sent to the next replica", s.NetworkErrors)
	r.note("alert evaluation taken over by another replica %s after the kill (interval 1s); pages of the alert that fired before: %d",
		takeover.Round(10*time.Millisecond), pages.count())
	acked := acks.acks(t)
	verify(t, pool, p.ID, r, acked)
	before := rollupDigest(t, pool)
	res, err := analytics.Rebuild(ctx, pool, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	for table, want := range rollupDigest(t, pool) {
		if before[table] != want {
			t.Errorf("%s differs from a rebuild from the raw rows: %s, rebuilt %s", table, before[table], want)
		}
	}
	t.Logf("rollups equal a rebuild from the raw rows (%d hourly, %d daily, %d cache rows)", res.HourlyRows, res.DailyRows, res.CacheRows)
	if takeover < 0 {
		t.Errorf("no other replica took over alert evaluation")
	}
	if n := pages.count(); n != 1 {
		t.Errorf("the alert paged %d times, want once", n)
	}
}

// rollupDigests render every row of each rollup table as text, in order, and hash them; rows of a
// table a rebuild may leave out without changing any answer are left out here too (a cache row
// emptied by moves; what a prompt hash's only call was, once it has more).
var rollupDigests = map[string]string{
	"rollup_hourly":        `SELECT r::text FROM rollup_hourly r`,
	"rollup_daily":         `SELECT r::text FROM rollup_daily r`,
	"rollup_minute5":       `SELECT r::text FROM rollup_minute5 r`,
	"rollup_daily_model":   `SELECT r::text FROM rollup_daily_model r`,
	"rollup_daily_service": `SELECT r::text FROM rollup_daily_service r`,
	"rollup_daily_tenant":  `SELECT r::text FROM rollup_daily_tenant r`,
	"rollup_tenant_blocks": `SELECT r::text FROM rollup_tenant_blocks r`,
	"rollup_cache_hourly":  `SELECT r::text FROM rollup_cache_hourly r WHERE r.calls <> 0`,
	"cache_prefixes": `SELECT CASE WHEN r.calls = 1 THEN r::text ELSE concat_ws('|', r.project_id, r.month, r.prompt_hash, r.calls) END
		FROM cache_prefixes r`,
}

// rollupDigest returns each rollup table's row count and hash.
func rollupDigest(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	out := map[string]string{}
	for table, rows := range rollupDigests {
		var n int64
		var sum string
		q := `SELECT count(*), md5(coalesce(string_agg(row, '|' ORDER BY row), '')) FROM (` + rows + `) t(row)`
		if err := pool.QueryRow(context.Background(), q).Scan(&n, &sum); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		out[table] = fmt.Sprintf("%d rows, md5 %s", n, sum)
	}
	return out
}
