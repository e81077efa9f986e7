package grafana_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/money"
	"github.com/ledgerd/ledgerd/schema"
)

// ledgerTZ is the ledger's timezone in these tests: a half-hour offset, so local days do not
// align with UTC hours.
var ledgerTZ = mustLoad("Asia/Kolkata")

func mustLoad(name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return l
}

// day is the local day the panels are looked at over.
var day = time.Date(2026, 10, 5, 0, 0, 0, 0, ledgerTZ)

// price is the deterministic price of the test ledger, per token in nano-dollars: input 1000,
// output 5000, cache write 1250, cache read 100; without caching every input token costs 1000.
// Model "free-model" has no price.
func price(a *schema.Attempt) ingest.Costing {
	if a.Model == "free-model" {
		return ingest.Costing{}
	}
	cost := a.InputTokens*1000 + a.OutputTokens*5000 + a.CacheWriteTokens*1250 + a.CacheReadTokens*100
	nocache := (a.InputTokens+a.CacheWriteTokens+a.CacheReadTokens)*1000 + a.OutputTokens*5000
	return ingest.Costing{Cost: money.Nanos(cost), NoCache: money.Nanos(nocache), Priced: true,
		Version: store.PriceVersion{Key: "test/" + a.Provider + "/" + a.Model, Provider: a.Provider, Model: a.Model,
			EffectiveFrom: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
}

// entry is one record of the known ledger and the project it belongs to.
type entry struct {
	project string
	a       schema.Attempt
}

// knownLedger is a small, fully known ledger. On the day, project acme has:
//   - checkout / claude-haiku-5-5 (tenant t1): six calls answered at once, three writing prompt
//     prefix p-ok to the cache and three reading it; two calls rate limited once, then answered;
//   - search / gpt-5-mini (no tenant): three calls writing prefix p-broken, never read; one call
//     that timed out and was answered by claude-haiku-5-5 as a fallback;
//   - batch / free-model (tenant t2): one unpriced call.
//
// Outside the day: one acme call the day before and one in September, and a big call of project
// beta on the day, which no acme figure may include.
func knownLedger() []entry {
	var out []entry
	at := func(d time.Time, hour, minute int) time.Time {
		return time.Date(d.Year(), d.Month(), d.Day(), hour, minute, 0, 0, ledgerTZ)
	}
	add := func(project, id string, t time.Time, no int, service, provider, model, tenant string, status schema.Status,
		class schema.ErrorClass, latency, in, out_, cw, cr int64, hash string) *schema.Attempt {
		out = append(out, entry{project, schema.Attempt{AttemptID: id, RequestID: "req-" + id[:2], AttemptNo: no,
			StartedAt: t, LatencyMS: latency, Provider: provider, Model: model, Service: service, Operation: "default",
			Tenant: tenant, Status: status, ErrorClass: class, InputTokens: in, OutputTokens: out_,
			CacheWriteTokens: cw, CacheReadTokens: cr, PromptHash: hash}})
		return &out[len(out)-1].a
	}
	ok, fail := schema.StatusOK, schema.StatusError
	for i := 1; i <= 6; i++ {
		cw, cr := int64(2000), int64(0)
		if i > 3 {
			cw, cr = 0, 2000
		}
		add("acme", fmt.Sprintf("c%d-1", i), at(day, 10, i), 1, "checkout", "anthropic", "claude-haiku-5-5", "t1", ok, "", 1000, 1000, 200, cw, cr, "p-ok")
	}
	for i := 7; i <= 8; i++ {
		add("acme", fmt.Sprintf("c%d-1", i), at(day, 11, i), 1, "checkout", "anthropic", "claude-haiku-5-5", "t1", fail, schema.ErrorRateLimited, 100, 1000, 0, 0, 0, "")
		add("acme", fmt.Sprintf("c%d-2", i), at(day, 11, i+10), 2, "checkout", "anthropic", "claude-haiku-5-5", "t1", ok, "", 2000, 1000, 200, 0, 0, "")
	}
	for i := 1; i <= 3; i++ {
		add("acme", fmt.Sprintf("s%d-1", i), at(day, 14, i), 1, "search", "openai", "gpt-5-mini", "", ok, "", 500, 400, 100, 500, 0, "p-broken")
	}
	add("acme", "s4-1", at(day, 15, 0), 1, "search", "openai", "gpt-5-mini", "", fail, schema.ErrorTimeout, 30000, 400, 0, 0, 0, "")
	fb := add("acme", "s4-2", at(day, 15, 1), 2, "search", "anthropic", "claude-haiku-5-5", "", ok, "", 1500, 400, 100, 0, 0, "")
	fb.Fallback, fb.FallbackFrom = true, "gpt-5-mini"
	add("acme", "b1-1", at(day, 20, 0), 1, "batch", "openai", "free-model", "t2", ok, "", 700, 100, 10, 0, 0, "")

	add("acme", "d1-1", at(day.AddDate(0, 0, -1), 12, 0), 1, "checkout", "anthropic", "claude-haiku-5-5", "t1", ok, "", 900, 3000, 300, 0, 0, "")
	add("acme", "e1-1", at(time.Date(2026, 9, 20, 0, 0, 0, 0, ledgerTZ), 12, 0), 1, "checkout", "anthropic", "claude-haiku-5-5", "t1", ok, "", 900, 5000, 500, 0, 0, "")
	add("beta", "x1-1", at(day, 12, 0), 1, "checkout", "anthropic", "claude-haiku-5-5", "t1", ok, "", 900, 900000, 90000, 0, 0, "")
	return out
}

// ledger is a database holding knownLedger, committed through the ingest writer.
type ledger struct {
	pool     *pgxpool.Pool
	entries  []entry
	projects map[string]int64
}

func newLedger(t *testing.T) *ledger {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.New(t)
	st := store.New(pool)
	if err := st.SetSetting(ctx, "timezone", ledgerTZ.String()); err != nil {
		t.Fatal(err)
	}
	w := ingest.NewWriter(st, price, ingest.Options{Timezone: ledgerTZ, Registerer: prometheus.NewRegistry()})
	defer func() { _ = w.Close(ctx) }()
	l := &ledger{pool: pool, entries: knownLedger(), projects: map[string]int64{}}
	byProject := map[string][]schema.Attempt{}
	for _, e := range l.entries {
		byProject[e.project] = append(byProject[e.project], e.a)
	}
	for _, name := range []string{"acme", "beta"} {
		p, err := st.EnsureProject(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		l.projects[name] = p.ID
		res, err := w.Submit(ctx, p.ID, byProject[name])
		if err != nil {
			t.Fatal(err)
		}
		if res.Accepted != len(byProject[name]) {
			t.Fatalf("project %s: %d of %d records accepted", name, res.Accepted, len(byProject[name]))
		}
	}
	return l
}

// sum adds up f over the entries keep selects.
func (l *ledger) sum(keep func(e entry) bool, f func(a *schema.Attempt) int64) int64 {
	var n int64
	for i := range l.entries {
		if keep(l.entries[i]) {
			n += f(&l.entries[i].a)
		}
	}
	return n
}

// onDay selects the acme records of the day.
func onDay(e entry) bool {
	d := e.a.StartedAt.In(ledgerTZ)
	return e.project == "acme" && d.Year() == day.Year() && d.YearDay() == day.YearDay()
}

func cost(a *schema.Attempt) int64 { return int64(price(a).Cost) }

func count(a *schema.Attempt) int64 { return 1 }

// latencyBucket is latency_bucket() of the migration: 16 log buckets per doubling of ms.
func latencyBucket(ms int64) int {
	if ms <= 1 {
		return 0
	}
	return int(math.Ceil(16*math.Log2(float64(ms)) - 1e-9))
}

// bucketMidpoint is what hist_quantile reports for bucket i.
func bucketMidpoint(i int) float64 { return math.Pow(2, (float64(i)-0.5)/16) }
