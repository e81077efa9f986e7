package analytics_test

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/rollup"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/schema"
)

// Token prices of testPrice in nano-dollars: cache writes cost 1.25x input, reads 0.1x.
const (
	inputNanos  = 100
	writeNanos  = 125
	readNanos   = 10
	outputNanos = 500
)

// testPrice prices every model but "free-model" (unpriced) at the rates above, so expected costs
// can be worked out by hand.
func testPrice(a *schema.Attempt) ingest.Costing {
	if a.Model == "free-model" {
		return ingest.Costing{}
	}
	cost := money.Nanos(a.InputTokens*inputNanos + a.CacheWriteTokens*writeNanos + a.CacheReadTokens*readNanos + a.OutputTokens*outputNanos)
	nocache := money.Nanos((a.InputTokens+a.CacheWriteTokens+a.CacheReadTokens)*inputNanos + a.OutputTokens*outputNanos)
	return ingest.Costing{Cost: cost, NoCache: nocache, Priced: true,
		Version: store.PriceVersion{Key: "test/" + a.Model, Provider: a.Provider, Model: a.Model,
			EffectiveFrom: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
}

// ledger is a test database fed through the real ingest writer.
type ledger struct {
	t  *testing.T
	st *store.Store
	w  *ingest.Writer
	tz *time.Location
}

// newLedger returns an empty ledger whose daily rollups count days in tz, and whose minute rollup
// holds every minute (the fixtures' clocks lie in the past).
func newLedger(t *testing.T, tz *time.Location) *ledger {
	t.Helper()
	st := store.New(dbtest.New(t))
	for k, v := range map[string]string{"timezone": tz.String(), "minutes_from": "-infinity"} {
		if err := st.SetSetting(context.Background(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	w := ingest.NewWriter(st, testPrice, ingest.Options{Timezone: tz, Registerer: prometheus.NewRegistry()})
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return &ledger{t: t, st: st, w: w, tz: tz}
}

func (l *ledger) project(name string) int64 {
	l.t.Helper()
	p, err := l.st.EnsureProject(context.Background(), name)
	if err != nil {
		l.t.Fatal(err)
	}
	return p.ID
}

// add commits records for a project through the writer.
func (l *ledger) add(project int64, recs ...schema.Attempt) {
	l.t.Helper()
	for i := range recs {
		if err := recs[i].Validate(recs[i].StartedAt); err != nil {
			l.t.Fatalf("record %d: %v", i, err)
		}
	}
	res, err := l.w.Submit(context.Background(), project, recs)
	if err != nil {
		l.t.Fatal(err)
	}
	if res.Accepted != len(recs) {
		l.t.Fatalf("accepted %d of %d records", res.Accepted, len(recs))
	}
	if err := l.w.Sync(context.Background()); err != nil {
		l.t.Fatal(err)
	}
}

// exec runs a statement on the ledger's database, as a test's change behind the writer's back.
func (l *ledger) exec(sql string, args ...any) {
	l.t.Helper()
	if _, err := l.st.Pool.Exec(context.Background(), sql, args...); err != nil {
		l.t.Fatal(err)
	}
}

// rebuild recounts the ledger's rollups from its raw attempts, in UTC days.
func (l *ledger) rebuild() {
	l.t.Helper()
	if _, err := analytics.Rebuild(context.Background(), l.st.Pool, time.UTC); err != nil {
		l.t.Fatal(err)
	}
}

// cacheJSON is s's cache report over f (the default minimum of calls) as JSON.
func cacheJSON(t *testing.T, s *analytics.Service, f analytics.Filter) string {
	t.Helper()
	rows, err := s.Cache(context.Background(), f, 0)
	if err != nil {
		t.Fatal(err)
	}
	return js(rows)
}

// service returns an analytics Service on the ledger with a fixed clock.
func (l *ledger) service(now time.Time) *analytics.Service {
	return analytics.New(analytics.Options{Pool: l.st.Pool, Timezone: l.tz, Now: func() time.Time { return now }})
}

// rec is a record builder: an ok attempt 1 of its own request unless changed.
type rec struct{ a schema.Attempt }

var recN atomic.Int64

func newRec(at time.Time, model string) *rec {
	id := fmt.Sprintf("a%d", recN.Add(1))
	provider := "anthropic"
	if model == "gpt-4o" {
		provider = "openai"
	}
	return &rec{schema.Attempt{AttemptID: id, RequestID: "req-" + id, AttemptNo: 1, StartedAt: at,
		LatencyMS: 1000, Provider: provider, Model: model, Service: "chat", Operation: "answer",
		Status: schema.StatusOK}}
}

func (r *rec) request(id string, no int) *rec { r.a.RequestID, r.a.AttemptNo = id, no; return r }
func (r *rec) latency(ms int64) *rec          { r.a.LatencyMS = ms; return r }
func (r *rec) service(s, op string) *rec      { r.a.Service, r.a.Operation = s, op; return r }
func (r *rec) tokens(in, out int64) *rec      { r.a.InputTokens, r.a.OutputTokens = in, out; return r }
func (r *rec) tenant(t string) *rec           { r.a.Tenant = t; return r }
func (r *rec) cache(write, read int64) *rec {
	r.a.CacheWriteTokens, r.a.CacheReadTokens = write, read
	return r
}
func (r *rec) hash(h string) *rec { r.a.PromptHash = h; return r }
func (r *rec) fail(class schema.ErrorClass) *rec {
	r.a.Status, r.a.ErrorClass = schema.StatusError, class
	return r
}
func (r *rec) cancel() *rec { r.a.Status = schema.StatusCancelled; return r }
func (r *rec) fallback(from string) *rec {
	r.a.Fallback, r.a.FallbackFrom = true, from
	return r
}
func (r *rec) clientCost(usd string) *rec {
	n, err := money.ParseUSD(usd)
	if err != nil {
		panic(err)
	}
	r.a.CostUSD = &n
	return r
}
func (r *rec) done() schema.Attempt { return r.a }

// bucketMid is the value analytics reports for a latency of ms: the geometric midpoint of its
// histogram bucket, worked out independently of the package.
func bucketMid(ms float64) float64 {
	if ms <= 1 {
		return 1
	}
	b := math.Ceil(16*math.Log2(ms) - 1e-9)
	return math.Exp2((b - 0.5) / 16)
}

func nanos(t *testing.T, usd string) money.Nanos {
	t.Helper()
	n, err := money.ParseUSD(usd)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func day(y int, m time.Month, d, h int, tz *time.Location) time.Time {
	return time.Date(y, m, d, h, 0, 0, 0, tz)
}

// summarizeCacheDays sums every cache day folds noted whose noted hour is over at now.
func summarizeCacheDays(t testing.TB, pool *pgxpool.Pool, now time.Time) {
	t.Helper()
	if err := rollup.SummarizeAllCacheDays(context.Background(), pool, now); err != nil {
		t.Fatal(err)
	}
}

// summarizeCacheDaysAt sums the cache days as a writer whose clock reads now would have: a
// ledger's load or rebuild sums its days at the real clock, today in full, where that writer
// would have summed today only up to now's hour.
func summarizeCacheDaysAt(t testing.TB, pool *pgxpool.Pool, now time.Time) {
	t.Helper()
	noteCacheDays(t, pool, now.Truncate(time.Hour))
	summarizeCacheDays(t, pool, now)
}

// noteCacheDays notes every summed cache day whose through is after after as added to from its
// start, as a fold would: reads take its hours, not its summary, until it is summed again.
func noteCacheDays(t testing.TB, pool *pgxpool.Pool, after time.Time) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `INSERT INTO cache_days_dirty (project_id, bucket, hour)
		SELECT project_id, bucket, '-infinity' FROM rollup_cache_days WHERE through > $1
		ON CONFLICT (project_id, bucket) DO UPDATE SET hour = excluded.hour`, after); err != nil {
		t.Fatal(err)
	}
}
