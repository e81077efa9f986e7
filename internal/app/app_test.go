package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ledgerd/ledgerd/internal/app"
	"github.com/ledgerd/ledgerd/internal/apptest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/store"
)

func post(url, key string, recs []map[string]any) (int, error) {
	body, _ := json.Marshal(recs)
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/attempts", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func rec(id string, at time.Time) map[string]any {
	return map[string]any{"attempt_id": id, "request_id": "r-" + id, "attempt_no": 1,
		"started_at": at.Format(time.RFC3339Nano), "latency_ms": 900, "provider": "anthropic",
		"model": "claude-haiku-5-5", "service": "router", "status": "ok",
		"input_tokens": 333, "output_tokens": 9}
}

// TestShutdownCommitsAccepted posts records from several clients while the service is told to stop:
// every record answered 2xx must be in the database afterwards, and Run must return cleanly.
func TestShutdownCommitsAccepted(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	dbURL := pool.Config().ConnString()
	ctx := context.Background()
	key, err := store.New(pool).CreateKey(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	url, stop := apptest.Run(t, app.Options{DatabaseURL: dbURL})
	now := time.Now().UTC().Add(-time.Minute)
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				id := fmt.Sprintf("c%d-%d", c, i)
				status, err := post(url, key, []map[string]any{rec(id, now)})
				if err != nil || status == http.StatusServiceUnavailable {
					return // the server went away: that record was not promised
				}
				if status != http.StatusOK {
					t.Errorf("status %d", status)
					return
				}
				mu.Lock()
				acked[id] = true
				mu.Unlock()
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	stop() // fails the test unless Run returns cleanly
	wg.Wait()
	rows, err := pool.Query(ctx, `SELECT attempt_id FROM attempts`)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		stored[id] = true
	}
	if len(acked) == 0 {
		t.Fatal("no record was acknowledged before shutdown")
	}
	for id := range acked {
		if !stored[id] {
			t.Errorf("acknowledged %s is missing after shutdown", id)
		}
	}
	t.Logf("%d acknowledged, %d stored", len(acked), len(stored))
}

// TestEmbeddedDefault starts ledgerd the way `make run` does — no DATABASE_URL, as root on CI —
// ingests a record, restarts on the same data folder and finds it again.
func TestEmbeddedDefault(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	opt := app.Options{DataDir: dir}
	url, stop := apptest.Run(t, opt)
	db, err := app.OpenDB(ctx, opt) // joins the running embedded server, as `ledgerd keys create` does
	if err != nil {
		t.Fatal(err)
	}
	key, err := db.Store.CreateKey(ctx, "local")
	db.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if status, err := post(url, key, []map[string]any{rec("e1", time.Now().UTC())}); err != nil || status != http.StatusOK {
		t.Fatalf("post: %d %v", status, err)
	}
	stop()
	url = apptest.Start(t, opt)
	if status, err := post(url, key, []map[string]any{rec("e2", time.Now().UTC())}); err != nil || status != http.StatusOK {
		t.Fatalf("post after restart: %d %v", status, err)
	}
	db, err = app.OpenDB(ctx, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	var n int
	if err := db.Store.Pool.QueryRow(ctx, `SELECT count(*) FROM attempts`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("%d attempts after restart, want 2", n)
	}
}

// TestPartitionsAhead checks that a starting ledgerd creates the partitions of its clock's month
// and of the next one, before any record arrives.
func TestPartitionsAhead(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	dbURL := pool.Config().ConnString()
	ctx := context.Background()
	clock := time.Date(2031, 12, 20, 8, 0, 0, 0, time.UTC)
	apptest.Start(t, app.Options{DatabaseURL: dbURL, Now: func() time.Time { return clock }})
	want := []string{"attempts_p203112", "attempts_p203201"}
	var got []string
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if got, err = store.New(pool).Partitions(ctx); err != nil {
			t.Fatal(err)
		}
		if slices.Equal(got, want) {
			return
		}
	}
	t.Fatalf("partitions %v, want %v", got, want)
}

// TestPortInUseFirst checks that an address already in use is reported before anything else is
// done: no embedded database is created (its folder stays absent) and the error comes at once.
func TestPortInUseFirst(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dataDir := filepath.Join(t.TempDir(), "ledgerd-data")
	start := time.Now()
	err = app.Run(context.Background(), app.Options{Listen: busy.Addr().String(), DataDir: dataDir,
		Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "listen on "+busy.Addr().String()) {
		t.Fatalf("Run: %v, want the listen error", err)
	}
	if _, statErr := os.Stat(dataDir); !errors.Is(statErr, fs.ErrNotExist) {
		t.Errorf("the embedded database folder was created before the port was checked (%v)", statErr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the error took %s", d)
	}
}

// TestShutdownSaysWhatItWaitsFor stops the service and checks that the log names each thing the
// stop waits for, so the seconds it takes are never silent.
func TestShutdownSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	var buf syncBuffer
	_, stop := apptest.Run(t, app.Options{DatabaseURL: pool.Config().ConnString(),
		Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	stop()
	log := buf.String()
	for _, want := range []string{"waiting for the HTTP requests in flight", "waiting for the alert evaluator to stop",
		"waiting for the writer to commit the records it accepted", "waiting for the database pool to close", "shut down"} {
		if !strings.Contains(log, want) {
			t.Errorf("the shutdown log does not say %q:\n%s", want, log)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPublicURLChecked checks that a --public-url alert links could not open is refused at start,
// naming it, before the port or a database is touched.
func TestPublicURLChecked(t *testing.T) {
	t.Parallel()
	err := app.Run(context.Background(), app.Options{PublicURL: "ledgerd.local", Listen: "127.0.0.1:0",
		DataDir: filepath.Join(t.TempDir(), "data"), Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), `public URL "ledgerd.local" must be an http(s) URL`) {
		t.Errorf("Run: %v", err)
	}
}
