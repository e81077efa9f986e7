package client

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ledgerd/ledgerd/schema"
)

// TestMain fails the run if any test leaves a goroutine behind (a Reporter's sender, a server's
// handler, a connection's reader).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// capture is a Sink that keeps what it is given.
type capture struct {
	mu  sync.Mutex
	got []schema.Attempt
}

func (c *capture) Report(a schema.Attempt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, a)
}

func (c *capture) all() []schema.Attempt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]schema.Attempt(nil), c.got...)
}

// one returns the single record captured, failing the test if there is not exactly one.
func (c *capture) one(t *testing.T) schema.Attempt {
	t.Helper()
	got := c.all()
	if len(got) != 1 {
		t.Fatalf("got %d records, want 1: %+v", len(got), got)
	}
	return got[0]
}

// fixture reads a file of testdata.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reply is what a fake provider answers.
type reply struct {
	status int
	header map[string]string
	file   string // a testdata file served as the body; its extension sets the Content-Type
	body   string // the body when file is empty
}

// serveReply answers every request with rep. An SSE body is written event by event, flushing after
// each, like a provider streaming.
func serveReply(t testing.TB, rep reply) *httptest.Server {
	t.Helper()
	body := []byte(rep.body)
	ct := "application/json"
	if rep.file != "" {
		body = fixture(t, rep.file)
		if strings.HasSuffix(rep.file, ".sse") {
			ct = "text/event-stream"
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ct)
		for k, v := range rep.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(rep.status)
		if ct != "text/event-stream" {
			_, _ = w.Write(body)
			return
		}
		for _, ev := range bytes.SplitAfter(body, []byte("\n\n")) {
			_, _ = w.Write(ev)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// fixedClock is a clock a test sets by hand.
type fixedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fixedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fixedClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
