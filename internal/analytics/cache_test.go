package analytics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/schema"
)

// Under testPrice, a call with 200 input and 100 output tokens that writes 1000 cache tokens costs
// 195,000 nano-dollars, one that reads them 80,000; either costs 170,000 without caching.
const (
	writeCost   = 195_000
	readCost    = 80_000
	noCacheCost = 170_000
)

type cacheWant struct {
	service, model, hash   string // hash "" for the aggregate row
	calls, writes, reads   int64
	hashes, singleUse      int64
	cost, nocache, savings int64
	broken                 bool
	explains               string // a phrase the explanation holds
}

// TestCache checks the cache report of a ledger with three cache habits over one hour:
//   - digest: every call has a new prompt_hash (a timestamp in the prompt) and writes; no read.
//     Only the aggregate row can show it: no hash has 10 calls.
//   - mailer: one stable prompt_hash, written 11 times, never read: broken at both levels.
//   - support: one prompt_hash written twice and read 10 times: healthy.
//   - nightly: one prompt_hash written by one commit and read by a later one: single-use until
//     the second call moves the first onto the hash's own row.
//
// plus calls that never touch the cache (no row) and a failed call (counted, not a cache call).
func TestCache(t *testing.T) {
	t.Parallel()
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	at := day(2026, 10, 5, 10, time.UTC)
	var recs []schema.Attempt
	call := func(svc, model string) *rec { return newRec(at, model).service(svc, "default").tokens(200, 100) }
	for i := range 12 {
		recs = append(recs, call("digest", "sonnet").cache(1000, 0).hash(fmt.Sprintf("digest@%02d", i)).done())
	}
	for range 11 {
		recs = append(recs, call("mailer", "haiku").cache(1000, 0).hash("mail-v1").done())
	}
	for i := range 12 {
		r := call("support", "sonnet").hash("sys-v3")
		if i < 2 {
			r = r.cache(1000, 0)
		} else {
			r = r.cache(0, 1000)
		}
		recs = append(recs, r.done())
	}
	recs = append(recs, call("support", "sonnet").fail(schema.ErrorRateLimited).tokens(0, 0).done(),
		call("plain", "sonnet").done(), call("nightly", "haiku").cache(1000, 0).hash("night-v1").done())
	l.add(p, recs...)
	l.add(p, newRec(at.Add(30*time.Minute), "haiku").service("nightly", "default").tokens(200, 100).cache(0, 1000).hash("night-v1").done())
	s := l.service(day(2026, 10, 6, 0, time.UTC))
	f := analytics.Filter{ProjectID: p, From: day(2026, 10, 5, 0, time.UTC), To: day(2026, 10, 6, 0, time.UTC)}

	const explainsHashes = "12 different prompt_hash values"
	cases := []struct {
		name     string
		f        analytics.Filter
		minCalls int
		want     []cacheWant
	}{
		// Broken rows first, the largest loss first; the aggregate row before its hash rows.
		{"default minimum", f, 0, []cacheWant{
			{"digest", "sonnet", "", 12, 12, 0, 12, 12, 12 * writeCost, 12 * noCacheCost, 12 * (noCacheCost - writeCost), true, explainsHashes},
			{"mailer", "haiku", "", 11, 11, 0, 1, 0, 11 * writeCost, 11 * noCacheCost, 11 * (noCacheCost - writeCost), true, "none was read back"},
			{"mailer", "haiku", "mail-v1", 11, 11, 0, 1, 0, 11 * writeCost, 11 * noCacheCost, 11 * (noCacheCost - writeCost), true, "prompt_hash mail-v1"},
			{"nightly", "haiku", "", 2, 1, 1, 1, 0, writeCost + readCost, 2 * noCacheCost, 2*noCacheCost - writeCost - readCost, false, ""},
			{"support", "sonnet", "", 13, 2, 10, 1, 0, 2*writeCost + 10*readCost, 12 * noCacheCost, 12*noCacheCost - 2*writeCost - 10*readCost, false, ""},
			{"support", "sonnet", "sys-v3", 12, 2, 10, 1, 0, 2*writeCost + 10*readCost, 12 * noCacheCost, 12*noCacheCost - 2*writeCost - 10*readCost, false, ""},
		}},
		// A higher minimum: nothing is broken yet, and no hash has enough calls to be listed.
		{"minimum 20", f, 20, []cacheWant{
			{"digest", "sonnet", "", 12, 12, 0, 12, 12, 12 * writeCost, 12 * noCacheCost, 12 * (noCacheCost - writeCost), false, ""},
			{"mailer", "haiku", "", 11, 11, 0, 1, 0, 11 * writeCost, 11 * noCacheCost, 11 * (noCacheCost - writeCost), false, ""},
			{"nightly", "haiku", "", 2, 1, 1, 1, 0, writeCost + readCost, 2 * noCacheCost, 2*noCacheCost - writeCost - readCost, false, ""},
			{"support", "sonnet", "", 13, 2, 10, 1, 0, 2*writeCost + 10*readCost, 12 * noCacheCost, 12*noCacheCost - 2*writeCost - 10*readCost, false, ""},
		}},
		// A service filter applies to both levels.
		{"one service", analytics.Filter{ProjectID: p, From: f.From, To: f.To, Service: "mailer"}, 0, []cacheWant{
			{"mailer", "haiku", "", 11, 11, 0, 1, 0, 11 * writeCost, 11 * noCacheCost, 11 * (noCacheCost - writeCost), true, "none was read back"},
			{"mailer", "haiku", "mail-v1", 11, 11, 0, 1, 0, 11 * writeCost, 11 * noCacheCost, 11 * (noCacheCost - writeCost), true, "prompt_hash mail-v1"},
		}},
		// A minimum of two lists the nightly hash, whose first call moved onto its row.
		{"minimum 2", analytics.Filter{ProjectID: p, From: f.From, To: f.To, Service: "nightly"}, 2, []cacheWant{
			{"nightly", "haiku", "", 2, 1, 1, 1, 0, writeCost + readCost, 2 * noCacheCost, 2*noCacheCost - writeCost - readCost, false, ""},
			{"nightly", "haiku", "night-v1", 2, 1, 1, 1, 0, writeCost + readCost, 2 * noCacheCost, 2*noCacheCost - writeCost - readCost, false, ""},
		}},
		// Another day: nothing.
		{"empty", analytics.Filter{ProjectID: p, From: f.To, To: f.To.Add(24 * time.Hour)}, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rows, err := s.Cache(context.Background(), c.f, c.minCalls)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != len(c.want) {
				t.Fatalf("%d rows, want %d: %s", len(rows), len(c.want), js(rows))
			}
			for i, w := range c.want {
				r := rows[i]
				hash := ""
				if r.PromptHash != nil {
					hash = *r.PromptHash
				}
				got := cacheWant{r.Service, r.Model, hash, r.Calls, r.CacheWriteCalls, r.CacheReadCalls, r.PromptHashes, r.SingleUseHashes,
					int64(*r.CostUSD), int64(*r.NoCacheCostUSD), int64(*r.SavingsUSD), r.Broken, w.explains}
				if got != w || !strings.Contains(r.Explanation, w.explains) || (w.explains == "") != (r.Explanation == "") {
					t.Errorf("row %d:\n got %+v %q\nwant %+v", i, got, r.Explanation, w)
				}
				if r.CacheWriteTokens != 1000*w.writes || r.CacheReadTokens != 1000*w.reads {
					t.Errorf("row %d: tokens written %d read %d, want %d and %d", i, r.CacheWriteTokens, r.CacheReadTokens, 1000*w.writes, 1000*w.reads)
				}
			}
		})
	}
}

// TestCacheHashAcrossShapes checks that a fallback model standing in for two models, each a series
// shape of its own, is one model in the cache report: its hash used under both is one hash of 12
// calls, not two of 6.
func TestCacheHashAcrossShapes(t *testing.T) {
	t.Parallel()
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	at := day(2026, 10, 5, 10, time.UTC)
	var recs []schema.Attempt
	for i := range 12 {
		r := newRec(at.Add(time.Duration(i)*time.Minute), "haiku").service("bot", "answer").tokens(200, 100).
			hash("fb-v1").fallback([]string{"sonnet", "opus"}[i%2])
		if i < 2 {
			r = r.cache(1000, 0)
		} else {
			r = r.cache(0, 1000)
		}
		recs = append(recs, r.done())
	}
	l.add(p, recs...)
	rows, err := l.service(day(2026, 10, 6, 0, time.UTC)).Cache(context.Background(),
		analytics.Filter{ProjectID: p, From: day(2026, 10, 5, 0, time.UTC), To: day(2026, 10, 6, 0, time.UTC)}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want the model's and its hash's: %s", len(rows), js(rows))
	}
	for _, r := range rows {
		if !r.Fallback || r.Calls != 12 || r.PromptHashes != 1 || r.Broken {
			t.Errorf("row %s: want a fallback row of 12 calls, 1 hash, not broken", js(r))
		}
	}
}

// TestCacheShapeNames checks the shapes' names that one Service keeps between reads: a shape first
// seen after them is named when it shows up, another project's shape of the same names stays its
// own, and a filter applies to the names kept as to those just read.
func TestCacheShapeNames(t *testing.T) {
	t.Parallel()
	l := newLedger(t, time.UTC)
	acme, umbrella := l.project("acme"), l.project("umbrella")
	at := day(2026, 10, 5, 10, time.UTC)
	writes := func(n int, svc, model string) []schema.Attempt {
		var recs []schema.Attempt
		for range n {
			recs = append(recs, newRec(at, model).service(svc, "default").tokens(200, 100).cache(1000, 0).done())
		}
		return recs
	}
	s := l.service(day(2026, 10, 6, 0, time.UTC))
	read := func(f analytics.Filter) string {
		t.Helper()
		f.From, f.To = day(2026, 10, 5, 0, time.UTC), day(2026, 10, 6, 0, time.UTC)
		rows, err := s.Cache(context.Background(), f, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			since := "not broken"
			if r.BrokenSince != nil {
				since = "broken since " + r.BrokenSince.Format("15:04")
			}
			out = append(out, fmt.Sprintf("%s/%s %d %s", r.Service, r.Model, r.Calls, since))
		}
		return strings.Join(out, ", ")
	}
	steps := []struct {
		name string
		add  func()
		f    analytics.Filter
		want string
	}{
		{"first shape", func() { l.add(acme, writes(11, "support", "sonnet")...) }, analytics.Filter{ProjectID: acme},
			"support/sonnet 11 broken since 10:00"},
		{"a new shape", func() { l.add(acme, writes(12, "mailer", "haiku")...) }, analytics.Filter{ProjectID: acme},
			"mailer/haiku 12 broken since 10:00, support/sonnet 11 broken since 10:00"},
		{"another project", func() { l.add(umbrella, writes(13, "support", "sonnet")...) }, analytics.Filter{ProjectID: umbrella},
			"support/sonnet 13 broken since 10:00"},
		{"the first project again", func() {}, analytics.Filter{ProjectID: acme}, "mailer/haiku 12 broken since 10:00, support/sonnet 11 broken since 10:00"},
		{"by service", func() {}, analytics.Filter{ProjectID: acme, Service: "support"}, "support/sonnet 11 broken since 10:00"},
		{"by model", func() {}, analytics.Filter{ProjectID: acme, Model: "haiku"}, "mailer/haiku 12 broken since 10:00"},
		{"by operation", func() {}, analytics.Filter{ProjectID: acme, Operation: "other"}, ""},
		{"by provider", func() {}, analytics.Filter{ProjectID: umbrella, Provider: "anthropic"}, "support/sonnet 13 broken since 10:00"},
	}
	for _, st := range steps {
		st.add()
		if got := read(st.f); got != st.want {
			t.Errorf("%s: rows %q, want %q", st.name, got, st.want)
		}
	}
}
