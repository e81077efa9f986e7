package analytics_test

import (
	"context"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/analytics"
	"github.com/ledgerd/ledgerd/schema"
)

// TestCacheBrokenSince checks when a cache broke and what it cost since, on a prefix that works,
// breaks, heals and breaks again (hour by hour: 1 write and 4 reads; 10 writes; 1 write and 4
// reads; 6 writes; 6 writes), and on one that was never read back.
func TestCacheBrokenSince(t *testing.T) {
	t.Parallel()
	l := newLedger(t, time.UTC)
	p := l.project("acme")
	at := func(h, m int) time.Time { return day(2026, 10, 5, h, time.UTC).Add(time.Duration(m) * time.Minute) }
	var recs []schema.Attempt
	call := func(h, m int) *rec {
		return newRec(at(h, m), "sonnet").service("bot", "answer").tokens(200, 100).hash("sys-v1")
	}
	working := func(h int) {
		recs = append(recs, call(h, 0).cache(1000, 0).done())
		for i := range 4 {
			recs = append(recs, call(h, 1+i).cache(0, 1000).done())
		}
	}
	writes := func(h, n int) {
		for i := range n {
			recs = append(recs, call(h, i).cache(1000, 0).done())
		}
	}
	working(10)
	writes(11, 10)
	working(12)
	writes(13, 6)
	writes(14, 6)
	// mailer writes its hash 10 times at 09:00 and never reads it.
	for i := range 10 {
		recs = append(recs, newRec(at(9, i), "haiku").service("mailer", "send").tokens(200, 100).cache(1000, 0).hash("mail-v1").done())
	}
	// router's two hashes share 10:00, where a-v1 works (1 write, 4 reads) and b-v1 writes twice;
	// a-v1 then writes 10 times at 11:00. The model as a whole worked at 10:00 with all 7 calls.
	route := func(h, m int, hash string) *rec {
		return newRec(at(h, m), "sonnet").service("router", "route").tokens(200, 100).hash(hash)
	}
	recs = append(recs, route(10, 0, "a-v1").cache(1000, 0).done(), route(10, 5, "b-v1").cache(1000, 0).done(),
		route(10, 6, "b-v1").cache(1000, 0).done())
	for i := range 4 {
		recs = append(recs, route(10, 1+i, "a-v1").cache(0, 1000).done())
	}
	for i := range 10 {
		recs = append(recs, route(11, i, "a-v1").cache(1000, 0).done())
	}
	l.add(p, recs...)
	s := l.service(day(2026, 10, 6, 0, time.UTC))

	// A working hour's 5 calls cost 195,000 + 4·80,000 = 515,000: 103,000 a call.
	cases := []struct {
		name     string
		from, to time.Time
		since    time.Time // zero: not broken
		extra    int64
	}{
		// Broken again at 13:00, after the reads of 12:00: 12 calls at 195,000 against 12 at the
		// working hours' mean (10 calls, 1,030,000).
		{"broke again", at(0, 0), at(24, 0), at(13, 0), 12*writeCost - 12*1_030_000/10},
		// Up to noon: broken at 11:00, after the reads of 10:00.
		{"first break", at(10, 0), at(12, 0), at(11, 0), 10*writeCost - 10*515_000/5},
		// Up to 13:00 it healed: read back at 12:00.
		{"healed", at(10, 0), at(13, 0), time.Time{}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rows, err := s.Cache(context.Background(), analytics.Filter{ProjectID: p, From: c.from, To: c.to, Service: "bot"}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 2 {
				t.Fatalf("%d rows, want the model's and its hash's: %s", len(rows), js(rows))
			}
			for _, r := range rows {
				broken := !c.since.IsZero()
				if r.Broken != broken {
					t.Errorf("row %s: broken %v, want %v", js(r), r.Broken, broken)
					continue
				}
				if !broken {
					if r.BrokenSince != nil || r.ExtraCostUSD != nil {
						t.Errorf("healthy row %s has a break", js(r))
					}
					continue
				}
				if r.BrokenSince == nil || !r.BrokenSince.Equal(c.since) || r.ExtraCostUSD == nil || int64(*r.ExtraCostUSD) != c.extra {
					t.Errorf("row %s: want broken since %v, extra %d", js(r), c.since, c.extra)
				}
			}
			if n, want := analytics.BrokenCaches(rows), map[bool]int{true: 1, false: 0}[!c.since.IsZero()]; n != want {
				t.Errorf("%d broken caches, want %d: one model, counted once", n, want)
			}
		})
	}
	// Never read back: broken since its first call's hour; extra is what caching added over not
	// caching.
	rows, err := s.Cache(context.Background(), analytics.Filter{ProjectID: p, From: at(0, 0), To: at(24, 0), Service: "mailer"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if !r.Broken || r.BrokenSince == nil || !r.BrokenSince.Equal(at(9, 0)) || r.ExtraCostUSD == nil ||
			int64(*r.ExtraCostUSD) != 10*(writeCost-noCacheCost) {
			t.Errorf("mailer row %s: want broken since 09:00, extra %d", js(r), 10*(writeCost-noCacheCost))
		}
	}
	// The model's hours add its hashes up: at 10:00 it worked with 7 calls costing 905,000; the
	// hash a-v1 with its own 5 (515,000). b-v1 has too few calls for a row of its own.
	rows, err = s.Cache(context.Background(), analytics.Filter{ProjectID: p, From: at(0, 0), To: at(24, 0), Service: "router"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"": 10*writeCost - 10*905_000/7, "a-v1": 10*writeCost - 10*515_000/5}
	if len(rows) != len(want) {
		t.Fatalf("%d router rows, want the model's and a-v1's: %s", len(rows), js(rows))
	}
	for _, r := range rows {
		hash := ""
		if r.PromptHash != nil {
			hash = *r.PromptHash
		}
		if !r.Broken || r.BrokenSince == nil || !r.BrokenSince.Equal(at(11, 0)) || r.ExtraCostUSD == nil ||
			int64(*r.ExtraCostUSD) != want[hash] {
			t.Errorf("router row %s: want broken since 11:00, extra %d", js(r), want[hash])
		}
	}
}
