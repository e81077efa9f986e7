package load_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/ingest"
	"github.com/ledgerd/ledgerd/internal/app"
	"github.com/ledgerd/ledgerd/internal/apptest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/load"
	"github.com/ledgerd/ledgerd/internal/store"
	"github.com/ledgerd/ledgerd/internal/synth"
	"github.com/ledgerd/ledgerd/pricing"
	"github.com/ledgerd/ledgerd/schema"
)

// ledgerd is a ledgerd running in this process on its own database.
type ledgerd struct {
	base string
	key  string
	pool *pgxpool.Pool
}

func start(t *testing.T) ledgerd {
	t.Helper()
	dbURL := dbtest.NewURL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	key, err := store.New(pool).CreateKey(context.Background(), "load-test")
	if err != nil {
		t.Fatal(err)
	}
	return ledgerd{base: apptest.Start(t, app.Options{DatabaseURL: dbURL}), key: key, pool: pool}
}

func price(t *testing.T) func() load.Options {
	t.Helper()
	c, err := pricing.Load("")
	if err != nil {
		t.Fatal(err)
	}
	return func() load.Options { return load.Options{Price: ingest.CatalogPrice(c)} }
}

// stored reads back the project's rows and billed cost.
func stored(t *testing.T, pool *pgxpool.Pool) (rows, cost int64) {
	t.Helper()
	err := pool.QueryRow(context.Background(), `SELECT count(*), coalesce(sum(cost_nanos), 0) FROM attempts`).Scan(&rows, &cost)
	if err != nil {
		t.Fatal(err)
	}
	return rows, cost
}

// TestRun drives a real ledgerd and checks the summary, the ack log and the database agree
// exactly.
func TestRun(t *testing.T) {
	t.Parallel()
	base := price(t)
	now := time.Now()
	cases := []struct {
		name string
		opt  func(o *load.Options)
		// dups says the summary's duplicates must equal its redeliveries.
		dups bool
	}{
		// Count ends the run at exactly that many records, even mid-call and mid-batch.
		{name: "count is exact", opt: func(o *load.Options) { o.Count, o.Batch, o.Concurrency = 1000, 64, 4 }},
		// Redelivered and replayed records are answered as duplicates and logged once.
		{name: "redeliveries and a replay", dups: true, opt: func(o *load.Options) {
			o.Count, o.Batch, o.Redeliver, o.ReplayBlock = 2000, 100, 0.05, 300
		}},
		// Gzip bodies are acknowledged like plain ones.
		{name: "gzip", opt: func(o *load.Options) { o.Count, o.Batch, o.Gzip = 500, 250, true }},
		// A paced run sends at the rate asked: 400 records at 2,000/s take at least 0.2 s.
		{name: "rate", opt: func(o *load.Options) { o.Count, o.Batch, o.Rate = 400, 20, 2000 }},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := start(t)
			o := base()
			o.URL, o.Key = l.base, l.key
			o.Source = load.History(synth.New(synth.Options{Seed: int64(i), Start: now.AddDate(0, 0, -2), End: now}))
			var log bytes.Buffer
			o.AckLog = &log
			c.opt(&o)
			s, err := load.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			acks, err := load.ReadAcks(&log)
			if err != nil {
				t.Fatal(err)
			}
			truth := load.Sum(acks)
			rows, cost := stored(t, l.pool)
			if s.Sent != o.Count || s.Acknowledged != o.Count || s.Accepted != o.Count || truth.Records != o.Count || rows != o.Count {
				t.Errorf("sent %d, acknowledged %d, accepted %d, ack log %d, stored %d; want %d each",
					s.Sent, s.Acknowledged, s.Accepted, truth.Records, rows, o.Count)
			}
			if cost != truth.CostNanos {
				t.Errorf("stored cost %d nanos, ack log %d", cost, truth.CostNanos)
			}
			if c.dups && (s.Duplicates != s.Redelivered || s.Redelivered < int64(o.ReplayBlock)) {
				t.Errorf("duplicates %d, redelivered %d; want equal and at least the replay block %d", s.Duplicates, s.Redelivered, o.ReplayBlock)
			}
			if !c.dups && (s.Duplicates != 0 || s.Redelivered != 0) {
				t.Errorf("duplicates %d, redelivered %d; want 0", s.Duplicates, s.Redelivered)
			}
			if o.Rate > 0 && s.Elapsed < time.Duration(float64(o.Count-int64(o.Batch))/o.Rate*float64(time.Second)) {
				t.Errorf("%d records at %.0f/s took %s", o.Count, o.Rate, s.Elapsed)
			}
		})
	}
}

// TestRetriesShedRequests puts a front in front of ledgerd that answers the first three requests
// 503 with Retry-After, as an overloaded ledgerd would: the client must wait, post the same
// records again, and lose none.
func TestRetriesShedRequests(t *testing.T) {
	t.Parallel()
	l := start(t)
	target, err := url.Parse(l.base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var n atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 3 {
			w.Header().Set("Retry-After", "0")
			http.Error(w, `{"error":"shed"}`, http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	o := price(t)()
	o.URL, o.Key, o.Count, o.Batch, o.Concurrency = front.URL, l.key, 300, 100, 1
	o.Source = load.Live(synth.New(synth.Options{Seed: 1}))
	s, err := load.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := stored(t, l.pool)
	if s.Retries != 3 || s.Status[503] != 3 || s.Acknowledged != 300 || rows != 300 || s.Failed != 0 {
		t.Errorf("retries %d, 503s %d, acknowledged %d, stored %d, failed %d; want 3, 3, 300, 300, 0",
			s.Retries, s.Status[503], s.Acknowledged, rows, s.Failed)
	}
}

// TestGiveUp checks that records of batches that never got an answer count as failed, not as
// acknowledged, once GiveUp has passed.
func TestGiveUp(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	s, err := load.Run(context.Background(), load.Options{URL: "http://" + addr, Key: "ldg_x", Count: 25, Batch: 10,
		GiveUp: 300 * time.Millisecond, Source: load.Live(synth.New(synth.Options{Seed: 1}))})
	if err != nil {
		t.Fatal(err)
	}
	if s.Failed != 25 || s.Acknowledged != 0 || s.NetworkErrors < 3 {
		t.Errorf("failed %d, acknowledged %d, network errors %d; want 25, 0, at least one per batch", s.Failed, s.Acknowledged, s.NetworkErrors)
	}
}

// TestSpread sends to two replicas of which one is down: batches alternate between them, and each
// one the dead replica does not answer is acknowledged by the other on its retry.
func TestSpread(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var recs []json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&recs); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_ = json.NewEncoder(w).Encode(schema.IngestResponse{Accepted: len(recs), Rejected: []schema.Rejection{}})
	}))
	t.Cleanup(live.Close)
	var toDead, toLive atomic.Int64
	s, err := load.Run(context.Background(), load.Options{URL: dead, Spread: []string{live.URL}, Key: "ldg_x",
		Count: 100, Batch: 10, Concurrency: 1, Source: load.Live(synth.New(synth.Options{Seed: 1})),
		Observe: func(x load.Response) {
			if x.URL == dead {
				toDead.Add(1)
			} else if x.URL == live.URL {
				toLive.Add(1)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Acknowledged != 100 || s.Failed != 0 || toLive.Load() != 10 || toDead.Load() != 5 || s.Retries != 5 {
		t.Errorf("acknowledged %d, failed %d; requests to the live replica %d, to the dead one %d, retries %d; want 100, 0, 10, 5, 5",
			s.Acknowledged, s.Failed, toLive.Load(), toDead.Load(), s.Retries)
	}
}

// TestOptionsRequired checks that a run without a target, a key, a source or an end is refused.
func TestOptionsRequired(t *testing.T) {
	t.Parallel()
	src := load.Live(synth.New(synth.Options{}))
	cases := []struct {
		name string
		opt  load.Options
	}{
		{"no URL", load.Options{Key: "k", Source: src, Count: 1}},        // where to send
		{"no key", load.Options{URL: "http://x", Source: src, Count: 1}}, // how to authenticate
		{"no source", load.Options{URL: "http://x", Key: "k", Count: 1}}, // what to send
		{"no end", load.Options{URL: "http://x", Key: "k", Source: src}}, // when to stop
	}
	for _, c := range cases {
		if _, err := load.Run(context.Background(), c.opt); err == nil {
			t.Errorf("%s: Run succeeded", c.name)
		}
	}
}
