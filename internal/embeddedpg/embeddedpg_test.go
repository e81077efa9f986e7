package embeddedpg

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

// The test binary doubles as a stand-in for a ledgerd process: with helperModeEnv set, TestMain
// runs runHelper instead of the tests.
const (
	helperModeEnv = "EMBEDDEDPG_TEST_HELPER" // helperHold or helperCheck
	helperDirEnv  = "EMBEDDEDPG_TEST_DIR"    // Options.Dir for the helper
	// helperHold starts the server, seeds it, prints helperReady and waits to be killed.
	helperHold = "hold"
	// helperCheck starts the server, seeds it, stops it and exits 0.
	helperCheck = "check"
	helperReady = "ready"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperModeEnv); mode != "" {
		os.Exit(runHelper(mode, os.Getenv(helperDirEnv)))
	}
	goleak.VerifyTestMain(m)
}

// runHelper is the stand-in ledgerd process; it returns the exit code.
func runHelper(mode, dir string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := seed(ctx, s.URL()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	switch mode {
	case helperHold:
		fmt.Println(helperReady)
		<-ctx.Done() // the test kills this process long before
		return 1
	case helperCheck:
		if err := s.Stop(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	default:
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		return 1
	}
}

// seed creates the table kept with one row, the data later runs must still see.
func seed(ctx context.Context, dbURL string) (err error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer func() { err = errors.Join(err, conn.Close(ctx)) }()
	if _, err := conn.Exec(ctx, `CREATE TABLE kept (note text NOT NULL)`); err != nil {
		return fmt.Errorf("create table: %w", err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO kept (note) VALUES ('first run')`); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	return nil
}

// keptNotes returns the rows seed wrote, read through connString.
func keptNotes(t *testing.T, connString string) []string {
	t.Helper()
	ctx := testContext(t)
	conn, err := pgx.Connect(ctx, connString)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer func() {
		if err := conn.Close(ctx); err != nil {
			t.Errorf("close connection: %v", err)
		}
	}()
	rows, err := conn.Query(ctx, `SELECT note FROM kept`)
	if err != nil {
		t.Fatalf("query kept: %v", err)
	}
	notes, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("read kept: %v", err)
	}
	return notes
}

// testContext bounds one test's server operations.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testLogger writes the package's log lines to the test's output.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// startServer starts a server in dir and stops it when the test ends if the test has not.
func startServer(t *testing.T, dir string) *Server {
	t.Helper()
	s, err := Start(testContext(t), Options{Dir: dir, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = s.Stop(ctx) // tests check Stop's result where it matters; this only reclaims the server
	})
	return s
}

// stopServer stops s and fails the test if that did not go cleanly.
func stopServer(t *testing.T, s *Server) {
	t.Helper()
	if err := s.Stop(testContext(t)); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// lookupUser returns the account name; the test machine must have it.
func lookupUser(t *testing.T, name string) runUser {
	t.Helper()
	acct, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("look up user %s: %v", name, err)
	}
	uid, err := strconv.ParseUint(acct.Uid, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	gid, err := strconv.ParseUint(acct.Gid, 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	return runUser{name: name, uid: uint32(uid), gid: uint32(gid)}
}

// requireRoot fails tests that exercise running as root when run otherwise.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test checks running as root (as CI and containers do) and must run as root")
	}
}

// checkOwnedPrivate fails unless path is a directory owned by u with mode 0700.
func checkOwnedPrivate(t *testing.T, path string, u runUser) {
	t.Helper()
	st, err := statOwner(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Uid != u.uid {
		t.Errorf("%s belongs to uid %d, want %s", path, st.Uid, u)
	}
	if mode := fs.FileMode(st.Mode).Perm(); mode != 0o700 {
		t.Errorf("%s has mode %v, want 0700", path, mode)
	}
}

// checkNoServer fails if any postgres process still works in dataDir or its postmaster.pid
// remains.
func checkNoServer(t *testing.T, dataDir string) {
	t.Helper()
	pids, err := clusterProcesses(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) > 0 {
		t.Errorf("postgres processes %v still run in %s", pids, dataDir)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "postmaster.pid")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("postmaster.pid after Stop: %v", err)
	}
}

// TestStartStopRestart runs the server as root in a directory under root-only parents, checks
// the URL, the socket and the ownership, stops it cleanly and finds the data again after a
// restart.
func TestStartStopRestart(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	parent := t.TempDir()
	dir := filepath.Join(parent, ".ledgerd")
	root := filepath.Join(dir, "postgres")
	data := filepath.Join(root, "data")

	s := startServer(t, dir)
	u, err := url.Parse(s.URL())
	if err != nil {
		t.Fatalf("parse URL: %v", err)
	}
	if u.Hostname() != "127.0.0.1" || u.Path != "/"+DefaultDatabase || u.Query().Get("sslmode") != "disable" || u.User.Username() != superuser {
		t.Errorf("URL %s: want postgres://ledgerd:…@127.0.0.1:port/ledgerd?sslmode=disable", u.Redacted())
	}
	if err := seed(testContext(t), s.URL()); err != nil {
		t.Fatalf("seed: %v", err)
	}

	// The server runs as the postgres user, which owns the cluster; the parents above the data got
	// only the search bit for others.
	pgUser := lookupUser(t, "postgres")
	checkOwnedPrivate(t, root, pgUser)
	checkOwnedPrivate(t, data, pgUser)
	procOwner, err := statOwner(filepath.Join("/proc", strconv.Itoa(s.proc.pid())))
	if err != nil {
		t.Fatal(err)
	}
	if procOwner.Uid != pgUser.uid {
		t.Errorf("postmaster runs as uid %d, want %s", procOwner.Uid, pgUser)
	}
	// t.TempDir's own directory is 0700 like /root; .ledgerd was created 0700.
	for _, d := range []string{filepath.Dir(parent), dir} {
		info, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o701 {
			t.Errorf("%s has mode %v, want 0701 (the search bit for others added, nothing else)", d, info.Mode().Perm())
		}
	}

	// The unix socket sits in the cluster directory and trusts whoever can reach it.
	socketURL := fmt.Sprintf("host=%s port=%s user=%s dbname=%s", root, u.Port(), superuser, DefaultDatabase)
	if got := keptNotes(t, socketURL); !slices.Equal(got, []string{"first run"}) {
		t.Errorf("rows through the socket: %q", got)
	}

	stopServer(t, s)
	if err := s.Stop(testContext(t)); err != nil {
		t.Errorf("second Stop: %v, want the first one's nil", err)
	}
	checkNoServer(t, data)

	s = startServer(t, dir)
	if got := keptNotes(t, s.URL()); !slices.Equal(got, []string{"first run"}) {
		t.Errorf("rows after restart: %q, want the first run's", got)
	}
	checkOwnedPrivate(t, data, pgUser)
	stopServer(t, s)
	checkNoServer(t, data)
}

// TestStartAfterUncleanEnd ends a first run badly in each of the ways a crash can, then checks
// that the next Start still works and keeps the data.
func TestStartAfterUncleanEnd(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	cases := []struct {
		name string
		// firstRun starts a server in dir, seeds it, and ends it the way the case says.
		firstRun func(t *testing.T, dir string)
	}{
		{
			// Guards the stale postmaster.pid and the orphaned children a killed postmaster leaves.
			name: "postmaster killed with SIGKILL",
			firstRun: func(t *testing.T, dir string) {
				s := startServer(t, dir)
				if err := seed(testContext(t), s.URL()); err != nil {
					t.Fatalf("seed: %v", err)
				}
				if err := syscall.Kill(s.proc.pid(), syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				<-s.proc.done
				if err := s.Stop(testContext(t)); !errors.Is(err, errExited) {
					t.Errorf("Stop after the server was killed: %v, want an error that says it exited", err)
				}
			},
		},
		{
			// Guards a server still running with no ledgerd: it must be stopped, not block the start.
			name: "server left running by a ledgerd that is gone",
			firstRun: func(t *testing.T, dir string) {
				stopServer(t, seededServer(t, dir))
				runOrphanServer(t, dir)
			},
		},
		{
			// Guards the real crash: the ledgerd process is killed while its server runs. The
			// server shuts itself down (Pdeathsig) rather than linger.
			name: "ledgerd killed with SIGKILL",
			firstRun: func(t *testing.T, dir string) {
				runKilledLedgerd(t, dir)
				data := filepath.Join(dir, "postgres", "data")
				deadline := time.Now().Add(15 * time.Second)
				for {
					pids, err := clusterProcesses(data)
					if err != nil {
						t.Fatal(err)
					}
					if len(pids) == 0 {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("server processes %v outlived their ledgerd by 15 s", pids)
					}
					time.Sleep(pollInterval)
				}
			},
		},
		{
			// Guards a postmaster.pid whose PID now belongs to an unrelated process, as after a
			// reboot or container restart; PostgreSQL alone would refuse to start.
			name: "postmaster.pid names a live unrelated process",
			firstRun: func(t *testing.T, dir string) {
				stopServer(t, seededServer(t, dir))
				sleeper := exec.Command("sleep", "60")
				if err := sleeper.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := sleeper.Process.Kill(); err != nil {
						t.Error(err)
					}
					_ = sleeper.Wait() // killed on purpose
				})
				pidFile := filepath.Join(dir, "postgres", "data", "postmaster.pid")
				content := fmt.Sprintf("%d\n%s\n0\n5433\n\n127.0.0.1\n0 0\nready   \n", sleeper.Process.Pid, filepath.Dir(pidFile))
				if err := os.WriteFile(pidFile, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), ".ledgerd")
			tc.firstRun(t, dir)

			s := startServer(t, dir)
			if got := keptNotes(t, s.URL()); !slices.Equal(got, []string{"first run"}) {
				t.Errorf("rows after the unclean end: %q, want the first run's", got)
			}
			data := filepath.Join(dir, "postgres", "data")
			pids, err := clusterProcesses(data)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(pids, s.proc.pid()) {
				t.Errorf("cluster processes %v do not include the new postmaster %d", pids, s.proc.pid())
			}
			stopServer(t, s)
			checkNoServer(t, data)
		})
	}
}

// seededServer starts a server in dir and seeds it.
func seededServer(t *testing.T, dir string) *Server {
	t.Helper()
	s := startServer(t, dir)
	if err := seed(testContext(t), s.URL()); err != nil {
		t.Fatalf("seed: %v", err)
	}
	return s
}

// runOrphanServer starts a server on dir's cluster the way an earlier ledgerd did, but without
// the lock and without dying with this process, so it stays when that "ledgerd" is gone.
func runOrphanServer(t *testing.T, dir string) {
	t.Helper()
	ctx := testContext(t)
	root := filepath.Join(dir, "postgres")
	u, _, err := chooseUser(root)
	if err != nil {
		t.Fatal(err)
	}
	binaries, err := findBinaries(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{root: root, data: filepath.Join(root, "data"), binDir: filepath.Join(binaries, "bin"), user: u}
	port, err := choosePort(0, false)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := c.prepare(exec.Command(filepath.Join(c.binDir, "postgres"), c.serverArgs(port)...))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		// The next Start stops this server; if the test failed before, kill it.
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Error(err)
		}
		<-exited
	})
	for {
		pf, err := readPIDFile(c.data)
		if err == nil && pf.pid == cmd.Process.Pid && pf.status == "ready" {
			return
		}
		select {
		case err := <-exited:
			t.Fatalf("orphan server exited: %v\n%s", err, out.String())
		case <-ctx.Done():
			t.Fatalf("orphan server not ready: %v\n%s", ctx.Err(), out.String())
		case <-time.After(pollInterval):
		}
	}
}

// runKilledLedgerd runs a stand-in ledgerd process on dir, waits until its server is up and
// seeded, and kills it with SIGKILL.
func runKilledLedgerd(t *testing.T, dir string) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := helperCommand(t, helperHold, dir)
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != helperReady {
		_ = cmd.Process.Kill() // it failed already; its output says why
		_ = cmd.Wait()
		t.Fatalf("stand-in ledgerd did not get ready (%q, %v):\n%s", line, err, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, stdout); err != nil {
		t.Fatal(err)
	}
	var exitErr *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &exitErr) || exitErr.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("stand-in ledgerd: %v, want killed by SIGKILL", err)
	}
}

// helperCommand returns a command that runs this test binary as a stand-in ledgerd.
func helperCommand(t *testing.T, mode, dir string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(testContext(t), exe)
	cmd.Env = append(os.Environ(), helperModeEnv+"="+mode, helperDirEnv+"="+dir)
	return cmd
}

// TestLockOutlastsForkedCopy checks that lockDir waits out a lock this process has released but a
// forked child still shares until it execs (a duplicate of the file stands in for the child's), and
// still refuses one held for longer than lockWait.
func TestLockOutlastsForkedCopy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		hold    time.Duration
		refused bool
	}{
		{"released while waiting", lockWait / 4, false},
		{"held past the wait", 3 * lockWait, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			first, err := lockDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			// The duplicate is close-on-exec, taken under ForkLock: a plain Dup would pass the
			// lock on to every server that parallel tests start, for as long as it runs.
			syscall.ForkLock.RLock()
			child, err := syscall.Dup(int(first.Fd()))
			if err == nil {
				syscall.CloseOnExec(child)
			}
			syscall.ForkLock.RUnlock()
			if err != nil {
				t.Fatal(err)
			}
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			released := time.AfterFunc(c.hold, func() { _ = syscall.Close(child) })
			defer func() {
				if released.Stop() {
					_ = syscall.Close(child)
				}
			}()
			second, err := lockDir(dir)
			if c.refused {
				if !errors.Is(err, ErrInUse) {
					t.Fatalf("lockDir while a copy holds the lock for %v: %v, want ErrInUse", c.hold, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("lockDir while a copy holds the lock for %v: %v", c.hold, err)
			}
			if err := second.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestStartRefusesDirectoryInUse checks that a second Start on a directory whose server runs
// fails with ErrInUse and leaves the running server alone.
func TestStartRefusesDirectoryInUse(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), ".ledgerd")
	s := seededServer(t, dir)
	_, err := Start(testContext(t), Options{Dir: dir, Logger: testLogger(t)})
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("second Start: %v, want ErrInUse", err)
	}
	if !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) {
		t.Errorf("error %q does not name the holder's pid %d", err, os.Getpid())
	}
	if got := keptNotes(t, s.URL()); !slices.Equal(got, []string{"first run"}) {
		t.Errorf("rows after the refused Start: %q", got)
	}
	stopServer(t, s)
}

// TestStartAsNonRootUser runs a stand-in ledgerd as the unprivileged user nobody, which runs the
// server as itself; then ledgerd as root starts the same data and keeps running it as its owner.
func TestStartAsNonRootUser(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	nobody := lookupUser(t, "nobody")
	base := t.TempDir()
	dir := filepath.Join(base, "home", ".ledgerd")
	binDir := filepath.Join(base, "bin")
	for _, d := range []string{dir, binDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := makeReachable(d, nobody, testLogger(t)); err != nil {
			t.Fatal(err)
		}
	}
	if err := own(dir, nobody); err != nil {
		t.Fatal(err)
	}
	// The go test binary lives in a root-only build directory: give nobody a copy.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	exeCopy := filepath.Join(binDir, "embeddedpg.test")
	if err := os.WriteFile(exeCopy, b, 0o755); err != nil {
		t.Fatal(err)
	}

	// A cluster directory that belongs to another user is refused with a clear error.
	foreign := filepath.Join(base, "home", "foreign")
	if err := os.MkdirAll(filepath.Join(foreign, "postgres"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := own(foreign, nobody); err != nil {
		t.Fatal(err)
	}
	// asNobody runs the copy as nobody on the cluster directory d, from the directory wd.
	asNobody := func(d, wd string) ([]byte, error) {
		// A child another test forks while the copy is being written inherits its open file, and
		// exec then fails with ETXTBSY until that child has exec'd in turn (golang.org/issue/22315):
		// try again a little later.
		for try := 0; ; try++ {
			cmd := helperCommand(t, helperCheck, d)
			cmd.Path, cmd.Args[0] = exeCopy, exeCopy
			cmd.Dir = wd
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: nobody.credential()}
			out, err := cmd.CombinedOutput()
			if !errors.Is(err, syscall.ETXTBSY) || try == 50 {
				return out, err
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	out, err := asNobody(foreign, "")
	if err == nil || !strings.Contains(string(out), "belongs to uid 0, not to the user running ledgerd") {
		t.Errorf("ledgerd as nobody on root's cluster directory: %v, want an error about its owner:\n%s", err, out)
	}
	if out, err := asNobody(dir, dir); err != nil {
		t.Fatalf("ledgerd as nobody: %v\n%s", err, out)
	}
	checkOwnedPrivate(t, filepath.Join(dir, "postgres", "data"), nobody)

	s := startServer(t, dir)
	procOwner, err := statOwner(filepath.Join("/proc", strconv.Itoa(s.proc.pid())))
	if err != nil {
		t.Fatal(err)
	}
	if procOwner.Uid != nobody.uid {
		t.Errorf("postmaster started by root runs as uid %d, want the data's owner %s", procOwner.Uid, nobody)
	}
	if got := keptNotes(t, s.URL()); !slices.Equal(got, []string{"first run"}) {
		t.Errorf("rows written by nobody's run: %q", got)
	}
	stopServer(t, s)
	checkOwnedPrivate(t, filepath.Join(dir, "postgres", "data"), nobody)
}

// TestStartRejectsDataOfAnotherVersion checks that data of another PostgreSQL major version is
// left alone with an error that says what to do, rather than started or wiped.
func TestStartRejectsDataOfAnotherVersion(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), ".ledgerd")
	stopServer(t, seededServer(t, dir))
	versionFile := filepath.Join(dir, "postgres", "data", "PG_VERSION")
	if err := os.WriteFile(versionFile, []byte("11\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Start(testContext(t), Options{Dir: dir, Logger: testLogger(t)})
	if err == nil {
		t.Fatal("Start on data of PostgreSQL 11: no error")
	}
	for _, want := range []string{"PostgreSQL 11", "pg_upgrade", "LEDGERD_PG_BINARIES"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if _, err := os.Stat(versionFile); err != nil {
		t.Errorf("data touched: %v", err)
	}
}

// TestStartWithoutBinaries checks that missing server binaries give an error naming the package to
// install.
func TestStartWithoutBinaries(t *testing.T) {
	t.Parallel()
	_, err := Start(testContext(t), Options{
		Dir:          filepath.Join(t.TempDir(), ".ledgerd"),
		BinariesPath: t.TempDir(),
		Logger:       testLogger(t),
	})
	if !errors.Is(err, ErrNoBinaries) {
		t.Fatalf("Start with empty BinariesPath dir: %v, want ErrNoBinaries", err)
	}
	if !strings.Contains(err.Error(), "apt-get install postgresql") {
		t.Errorf("error %q does not say to apt-get install postgresql", err)
	}
}

// TestFindBinaries checks the discovery of the installed server.
func TestFindBinaries(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	found, err := findBinaries(ctx, "", "")
	if err != nil {
		t.Fatalf("find installed binaries: %v", err)
	}
	major, err := binariesMajor(ctx, found)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, explicit, dataVersion string
		want                        string
		wantErr                     error
	}{
		// An explicit path is used as given.
		{name: "explicit", explicit: found, want: found},
		// An existing cluster's version picks the matching Debian directory when installed.
		{name: "data version", dataVersion: major, want: filepath.Join(debianRoot, major)},
		// A data version that is not installed falls back to what is.
		{name: "data version not installed", dataVersion: "99", want: found},
		// An explicit path without the programs is an error, not a fallback.
		{name: "explicit without binaries", explicit: filepath.Join(t.TempDir(), "none"), wantErr: ErrNoBinaries},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := findBinaries(ctx, tc.explicit, tc.dataVersion)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestParseMajorVersion checks reading `postgres --version`.
func TestParseMajorVersion(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, out, want string
		wantErr         bool
	}{
		// Debian's build, as installed here.
		{name: "debian", out: "postgres (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)\n", want: "15"},
		// A plain upstream build.
		{name: "upstream", out: "postgres (PostgreSQL) 17.2\n", want: "17"},
		// Pre-releases carry no dot after the major version.
		{name: "beta", out: "postgres (PostgreSQL) 18beta1\n", want: "18"},
		// 9.x numbered majors with two parts; ledgerd does not support them.
		{name: "too old", out: "postgres (PostgreSQL) 9.6.24\n", wantErr: true},
		// Output of some other program.
		{name: "not postgres", out: "bash: postgres: command not found\n", wantErr: true},
		// The marker without a number.
		{name: "no number", out: "postgres (PostgreSQL) devel\n", wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseMajorVersion(tc.out)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error: %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestStartTakesOverRootOwnedData checks that a cluster whose files belong to root (copied in or
// restored by root) is handed to the server's user and starts.
func TestStartTakesOverRootOwnedData(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	dir := filepath.Join(t.TempDir(), ".ledgerd")
	root := filepath.Join(dir, "postgres")
	stopServer(t, seededServer(t, dir))
	if err := handOver(root, runUser{name: "root", uid: 0, gid: 0}); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, dir)
	if got := keptNotes(t, s.URL()); !slices.Equal(got, []string{"first run"}) {
		t.Errorf("rows after the hand-over: %q", got)
	}
	stopServer(t, s)
	pgUser := lookupUser(t, "postgres")
	checkOwnedPrivate(t, filepath.Join(root, "data"), pgUser)
	err := filepath.WalkDir(root, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		st, err := statOwner(path)
		if err != nil {
			return err
		}
		if st.Uid != pgUser.uid {
			t.Errorf("%s still belongs to uid %d", path, st.Uid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStartWithTakenPort checks that an explicitly requested port that is taken is an error, not
// silently replaced.
func TestStartWithTakenPort(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := uint32(l.Addr().(*net.TCPAddr).Port)
	_, err = Start(testContext(t), Options{Dir: filepath.Join(t.TempDir(), ".ledgerd"), Port: port, Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("port %d on 127.0.0.1 is in use", port)) {
		t.Fatalf("Start on taken port %d: %v, want an error saying it is in use", port, err)
	}
}

// TestServerArgs checks where the server puts its unix socket.
func TestServerArgs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, root string
		port       uint32
		want       string // the unix_socket_directories setting
	}{
		// The usual case: the socket in the cluster directory.
		{name: "short path", root: "/srv/app/.ledgerd/postgres", port: 5433, want: `"/srv/app/.ledgerd/postgres"`},
		// Commas and spaces are safe inside the quotes; a quote is doubled.
		{name: "odd characters", root: `/srv/a, b "c"/postgres`, port: 5433, want: `"/srv/a, b ""c""/postgres"`},
		// Exactly the longest socket path PostgreSQL takes.
		{name: "longest", root: "/" + strings.Repeat("d", maxSocketPath-len("/.s.PGSQL.5433")-1), port: 5433,
			want: `"/` + strings.Repeat("d", maxSocketPath-len("/.s.PGSQL.5433")-1) + `"`},
		// One byte more: no socket, TCP only.
		{name: "too long", root: "/" + strings.Repeat("d", maxSocketPath-len("/.s.PGSQL.5433")), port: 5433, want: ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := &cluster{root: tc.root, data: tc.root + "/data"}
			args := c.serverArgs(tc.port)
			i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "unix_socket_directories=") })
			if i < 0 {
				t.Fatalf("no unix_socket_directories in %q", args)
			}
			if got := strings.TrimPrefix(args[i], "unix_socket_directories="); got != tc.want {
				t.Errorf("unix_socket_directories=%s, want %s", got, tc.want)
			}
			if !slices.Contains(args, "listen_addresses=127.0.0.1") {
				t.Errorf("args %q do not limit the server to 127.0.0.1", args)
			}
		})
	}
}

// TestPostmasterProcess checks how a running server is told apart from a PID that another program
// took over, the check that finds leftover servers where there is no /proc (macOS, the BSDs).
func TestPostmasterProcess(t *testing.T) {
	s := startServer(t, t.TempDir())
	b, err := os.ReadFile(filepath.Join(s.dir, "postgres", "data", "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	started, err := strconv.ParseInt(lines[2], 10, 64)
	if err != nil {
		t.Fatalf("start time in postmaster.pid: %v", err)
	}
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	// file writes a postmaster.pid naming pid, started at start, in the server's format.
	file := func(pid int, start int64) string {
		l := slices.Clone(lines)
		l[0], l[2] = strconv.Itoa(pid), strconv.FormatInt(start, 10)
		return strings.Join(l, "\n")
	}
	cases := []struct {
		name    string
		content string // "" writes no file
		want    int
	}{
		// The running server, as it wrote its file.
		{"server", file(s.proc.pid(), started), s.proc.pid()},
		// The server's PID with a start an hour earlier: a postgres that took over a reused PID.
		{"other start", file(s.proc.pid(), started-3600), 0},
		// A live program that is not postgres (this test) holds the PID.
		{"not postgres", file(os.Getpid(), started), 0},
		// No process has the PID any more.
		{"exited", file(exited.Process.Pid, started), 0},
		// A postmaster that has written its PID but not yet its start time.
		{"starting", strconv.Itoa(s.proc.pid()) + "\n", 0},
		// No file: no server.
		{"no file", "", 0},
	}
	for _, c := range cases {
		dir := t.TempDir()
		if c.content != "" {
			if err := os.WriteFile(filepath.Join(dir, "postmaster.pid"), []byte(c.content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		got, err := postmasterProcess(dir)
		if err != nil || got != c.want {
			t.Errorf("%s: postmasterProcess = %d, %v; want %d", c.name, got, err, c.want)
		}
	}
}
