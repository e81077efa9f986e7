package app_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ledgerd/ledgerd/client"
	"github.com/ledgerd/ledgerd/internal/app"
	"github.com/ledgerd/ledgerd/internal/apptest"
	"github.com/ledgerd/ledgerd/internal/dbtest"
	"github.com/ledgerd/ledgerd/internal/store"
)

// TestClientEndToEnd drives the Go client the way a service would: an SDK-style HTTP client whose
// transport is client.Transport, talking to a provider that answers 429 once and then succeeds,
// with the service's own retry loop. The records travel through the Reporter into a real ledgerd
// and must arrive as two attempts of one logical call, priced from the catalog.
func TestClientEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewURL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	key, err := store.New(pool).CreateKey(ctx, "checkout")
	if err != nil {
		t.Fatal(err)
	}
	url := apptest.Start(t, app.Options{DatabaseURL: dbURL})

	limited, _ := os.ReadFile("../../client/testdata/anthropic-error-429.json")
	message, _ := os.ReadFile("../../client/testdata/anthropic-message.json")
	var calls atomic.Int32
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			w.Write(limited)
			return
		}
		w.Header().Set("Request-Id", "req_ok")
		w.Write(message)
	}))
	defer provider.Close()

	rep, err := client.NewReporter(client.ReporterOptions{Endpoint: url, APIKey: key, FlushInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := client.NewTransport(rep, client.TransportOptions{Service: "router", Provider: "anthropic"})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: tr}
	call := client.WithRequest(ctx, client.Call{RequestID: "ticket-42", Service: "router", Operation: "classify"})
	for try := 0; try < 2; try++ {
		req, _ := http.NewRequestWithContext(call, http.MethodPost, provider.URL+"/v1/messages",
			strings.NewReader(`{"model":"claude-haiku-5-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := rep.Close(cctx); err != nil {
		t.Fatal(err)
	}

	rows, err := pool.Query(ctx, `SELECT a.attempt_no, a.status::text, a.error_class::text, a.input_tokens,
			a.cache_read_tokens, a.output_tokens, coalesce(a.cost_nanos, -1), s.operation, coalesce(a.retry_after_ms, 0)
		FROM attempts a JOIN series s ON s.project_id = a.project_id AND s.id = a.series_id
		WHERE a.request_id = 'ticket-42' ORDER BY a.attempt_no`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		no                    int
		status, class         string
		input, cacheRead, out int64
		cost                  int64
		operation             string
		retryAfter            int64
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.no, &r.status, &r.class, &r.input, &r.cacheRead, &r.out, &r.cost, &r.operation, &r.retryAfter); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	want := []row{
		{1, "error", "rate_limited", 0, 0, 0, 0, "classify", 1000},
		// Haiku 5.5: 70 × $0.10/M + 3,856 cache reads × $0.01/M + 9 × $0.50/M = 50,060 nano-dollars.
		{2, "ok", "none", 70, 3856, 9, 50060, "classify", 0},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("attempt %d: got %+v, want %+v", i+1, got[i], want[i])
		}
	}
}
