package drills

import (
	"context"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/load"
	"github.com/ledgerd/ledgerd/internal/synth"
)

// TestDuplicates redelivers 3% of the records in later requests and replays a block of the first
// 500 at the end, as a client that lost its answers or restarted from its buffer would. Every
// redelivery must be answered as a duplicate, and the billed totals of raw rows and both rollups
// must equal the ack log to the nano-dollar.
func TestDuplicates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewURL(t)
	pool := connect(t, dbURL)
	p := newProject(t, pool, "drill-duplicates")
	srv := startLedgerd(t, dbURL)
	now := time.Now()
	g := synth.New(synth.Options{Seed: 11, Start: now.AddDate(0, 0, -3), End: now})
	var acks ackBuffer
	s, err := runLoad(ctx, srv.url(), p, load.Options{Source: load.History(g), Count: pick[int64](30_000, 300_000),
		Batch: 200, Concurrency: 8, Redeliver: 0.03, ReplayBlock: 500}, &acks)
	if err != nil {
		t.Fatal(err)
	}
	r := &report{name: "duplicates", sent: s}
	r.note("posted again: %d records (3%% redelivered in later requests + a replayed block of 500); ledgerd answered %d of them as duplicates",
		s.Redelivered, s.Duplicates)
	verify(t, pool, p.ID, r, acks.acks(t))
	if s.Accepted != s.Sent || s.Duplicates != s.Redelivered {
		t.Errorf("ledgerd answered accepted %d, duplicates %d; want accepted %d (records sent), duplicates %d (posted again)",
			s.Accepted, s.Duplicates, s.Sent, s.Redelivered)
	}
}
