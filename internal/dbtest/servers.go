package dbtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ledgerd/ledgerd/internal/embeddedpg"
)

// Server is a PostgreSQL server of a test's own, started from the installed binaries by
// embeddedpg in a temporary directory on a free loopback port: one the test may stop, kill,
// replicate or promote, never the shared server at DATABASE_URL.
type Server struct {
	*embeddedpg.Server
	Port uint32
}

// StartServer starts a new server; it is stopped when the test ends.
func StartServer(t testing.TB) *Server {
	t.Helper()
	return start(t, embeddedpg.Options{})
}

// StartStandby copies primary into a hot standby (pg_basebackup -R) and starts it streaming. With
// sync, the primary then waits for the standby to flush every commit before acknowledging it
// (synchronous_standby_names = '*', synchronous_commit on), and StartStandby returns once the
// standby is the synchronous one.
func StartStandby(t testing.TB, primary *Server, sync bool) *Server {
	t.Helper()
	s := start(t, embeddedpg.Options{ReplicaOf: primary.URL()})
	if !sync {
		return s
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, primary.URL())
	if err != nil {
		t.Fatalf("dbtest: connect to the primary: %v", err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{`ALTER SYSTEM SET synchronous_standby_names = '*'`, `ALTER SYSTEM SET synchronous_commit = 'on'`,
		`SELECT pg_reload_conf()`} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("dbtest: %s: %v", q, err)
		}
	}
	for {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'`).Scan(&n); err != nil {
			t.Fatalf("dbtest: wait for the synchronous standby: %v", err)
		}
		if n > 0 {
			return s
		}
		select {
		case <-ctx.Done():
			t.Fatal("dbtest: the standby did not become synchronous within a minute")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func start(t testing.TB, opt embeddedpg.Options) *Server {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := uint32(ln.Addr().(*net.TCPAddr).Port)
	_ = ln.Close()
	opt.Dir, opt.Port = filepath.Join(t.TempDir(), "pg"), port
	s, err := embeddedpg.Start(ctx, opt)
	if err != nil {
		t.Fatalf("dbtest: start a server of the test's own: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Stop(ctx) // a server the test killed reports that it had exited
	})
	return &Server{Server: s, Port: port}
}

// Promote makes a standby a primary and returns once it takes writes.
func Promote(t testing.TB, s *Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		t.Fatalf("dbtest: connect to the standby: %v", err)
	}
	defer conn.Close(ctx)
	var ok bool
	if err := conn.QueryRow(ctx, `SELECT pg_promote(wait => true, wait_seconds => 60)`).Scan(&ok); err != nil || !ok {
		t.Fatalf("dbtest: promote the standby: %v (promoted: %v)", err, ok)
	}
}

// MultiHostURL is the URL of the servers' database naming every server in order, with
// target_session_attrs set to attrs (read-write for a primary and its standbys, prefer-standby for
// reads), as a client that follows a failover is configured.
func MultiHostURL(attrs string, servers ...*Server) string {
	u, err := url.Parse(servers[0].URL())
	if err != nil {
		panic(fmt.Sprintf("dbtest: embeddedpg URL %v", err))
	}
	hosts := make([]string, len(servers))
	for i, s := range servers {
		hosts[i] = net.JoinHostPort("127.0.0.1", strconv.FormatUint(uint64(s.Port), 10))
	}
	u.Host = strings.Join(hosts, ",")
	q := u.Query()
	q.Set("target_session_attrs", attrs)
	u.RawQuery = q.Encode()
	return u.String()
}
