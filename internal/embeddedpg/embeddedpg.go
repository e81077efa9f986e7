// Package embeddedpg runs ledgerd's private PostgreSQL server, the database ledgerd uses when no
// DATABASE_URL is configured.
//
// It drives the server binaries installed on the machine directly (Debian's postgresql package,
// or on macOS the PostgreSQL found on PATH or named by Options.BinariesPath): initdb once, then on
// each Start a postgres postmaster as a child process of ledgerd that listens on 127.0.0.1 only.
// Everything lives under Options.Dir:
//
//	postgres.lock        locked (flock) by the ledgerd process that runs the server
//	postgres/            the cluster, mode 0700, owned by the user the server runs as
//	postgres/data/       the data directory (PGDATA), mode 0700
//	postgres/password    the generated password of the superuser role "ledgerd", mode 0600
//	postgres/server.log  the server's log (initdb's too)
//	postgres/.s.PGSQL.N  the unix socket, for psql -h <Dir>/postgres -U ledgerd (trust: only
//	                     the cluster's owner and root can reach it)
//
// TCP connections authenticate with the password (scram-sha-256); URL carries it.
//
// PostgreSQL refuses to run as root. When ledgerd runs as root, the server processes run as the
// cluster directory's owner when that is not root, else as the "postgres" system user (or
// "nobody"), through SysProcAttr.Credential; a new cluster directory is given to that user. The
// directories above it that the user cannot search (/root is 0700, so is a test's temporary
// directory) get just the search bit that user needs, and each such change is logged.
//
// A server left behind by an earlier run, such as after ledgerd was killed, is stopped before the
// new one starts; a stale postmaster.pid does not block the start. On Linux a server started here
// also shuts itself down when the ledgerd process dies; elsewhere it runs until the next Start
// stops it. Leftovers are found through /proc on Linux, and elsewhere through postmaster.pid,
// checked against ps. The package builds on Unix systems only (Flock, Credential, signals).
package embeddedpg

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultPort is the port Start tries first when Options.Port is zero. It is the one after
// PostgreSQL's usual 5432, which a system server may hold.
const DefaultPort = 5433

// DefaultDatabase is the database Start creates and URL names when Options.Database is empty.
const DefaultDatabase = "ledgerd"

const (
	// superuser is the role initdb creates; ledgerd connects as it.
	superuser = "ledgerd"
	// logRotateSize is the size past which Start moves server.log to server.log.1.
	logRotateSize = 16 << 20
	// cleanupTimeout bounds stopping a server that Start launched but then gave up on.
	cleanupTimeout = 10 * time.Second
)

// SQL used by ensureDatabase; CREATE DATABASE cannot take its name as a parameter, so the
// quoted identifier is appended to createDatabaseSQL.
const (
	databaseExistsSQL = `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`
	createDatabaseSQL = `CREATE DATABASE `
)

// ErrInUse reports that another live ledgerd process runs the server on the same directory.
var ErrInUse = errors.New("another ledgerd process runs the embedded PostgreSQL server on this directory")

// Options configures Start.
type Options struct {
	// Dir holds the cluster and its lock file (see the package documentation), e.g.
	// "./.ledgerd". It is created if missing. Required.
	Dir string
	// BinariesPath is the PostgreSQL installation directory that holds bin/initdb and
	// bin/postgres, such as /usr/lib/postgresql/15; ledgerd's configuration fills it from
	// LEDGERD_PG_BINARIES. Empty means look for it: the Debian directory of an existing cluster's
	// major version, then the parent of `pg_config --bindir`, then that of postgres on PATH, then
	// the newest /usr/lib/postgresql/N.
	BinariesPath string
	// Port is the TCP port to listen on at 127.0.0.1. Zero means DefaultPort when it is free and
	// any free port otherwise, chosen anew on each Start; a non-zero port must be free.
	Port uint32
	// Database is the database to create when missing and to connect to; empty means
	// DefaultDatabase.
	Database string
	// Logger receives the server's lifecycle events; nil discards them.
	Logger *slog.Logger
	// ReplicaOf, when set, is the URL of a running server (as URL returns it) that a new cluster
	// is copied from with pg_basebackup -R instead of being created with initdb: the server then
	// starts as a hot standby streaming from it, with the same superuser password. It is ignored
	// when Dir already holds a cluster.
	ReplicaOf string
}

// Server is a running embedded PostgreSQL server. Stop it when done.
type Server struct {
	url    string
	dir    string
	logger *slog.Logger
	lock   *os.File
	proc   *postmaster

	stopOnce sync.Once
	stopErr  error
}

// Start starts the embedded server in opts.Dir, creating and initialising the cluster on first
// use, and returns once the database opts.Database exists and accepts connections. ctx bounds the
// start, including initdb and the wait for a server recovering from a crash.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("start embedded postgres: Options.Dir is empty")
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dir, err := prepareDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("start embedded postgres: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, fmt.Errorf("start embedded postgres in %s: %w", dir, err)
	}
	s, err := start(ctx, dir, opts, logger)
	if err != nil {
		if cerr := lock.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("release lock: %w", cerr))
		}
		return nil, fmt.Errorf("start embedded postgres in %s: %w", dir, err)
	}
	s.lock = lock
	return s, nil
}

// URL returns the postgres:// URL of the database for pgx: TCP to 127.0.0.1 as the superuser
// "ledgerd", with its password and sslmode=disable. Redact it before logging it.
func (s *Server) URL() string {
	return s.url
}

// Stop shuts the server down with PostgreSQL's fast shutdown (open transactions are rolled back)
// and releases the directory. When ctx ends first the server is forced down and the error says
// so. A server that had exited by itself (it crashed or was killed) is reported as an error.
// Further calls return the first call's result.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		err := s.proc.shutdown(ctx)
		if cerr := s.lock.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("release lock: %w", cerr))
		}
		if err != nil {
			s.stopErr = fmt.Errorf("stop embedded postgres in %s: %w", s.dir, err)
			return
		}
		s.logger.Info("embedded postgres stopped", "dir", s.dir)
	})
	return s.stopErr
}

// cluster is the on-disk server in <Dir>/postgres and the way to run its programs.
type cluster struct {
	root   string // <Dir>/postgres
	data   string // <Dir>/postgres/data
	binDir string // the installation's bin directory
	user   runUser
}

// start does Start's work once dir is locked.
func start(ctx context.Context, dir string, opts Options, logger *slog.Logger) (*Server, error) {
	root := filepath.Join(dir, "postgres")
	if err := os.Mkdir(root, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create cluster directory: %w", err)
	}
	u, transfer, err := chooseUser(root)
	if err != nil {
		return nil, err
	}
	if transfer {
		if err := handOver(root, u); err != nil {
			return nil, err
		}
	}
	if os.Geteuid() == 0 {
		if err := makeReachable(root, u, logger); err != nil {
			return nil, err
		}
	}
	// PostgreSQL insists on a private data directory; the password lives beside it.
	if err := os.Chmod(root, 0o700); err != nil {
		return nil, fmt.Errorf("make cluster directory private: %w", err)
	}
	c := &cluster{root: root, data: filepath.Join(root, "data"), user: u}

	dataVersion, err := readDataVersion(c.data)
	if err != nil {
		return nil, err
	}
	binaries, err := findBinaries(ctx, opts.BinariesPath, dataVersion)
	if err != nil {
		return nil, err
	}
	c.binDir = filepath.Join(binaries, "bin")
	major, err := binariesMajor(ctx, binaries)
	if err != nil {
		return nil, err
	}
	if dataVersion != "" && dataVersion != major {
		return nil, fmt.Errorf("the data in %s belongs to PostgreSQL %s but the server binaries in %s are PostgreSQL %s: install PostgreSQL %s (apt-get install postgresql-%s) and set LEDGERD_PG_BINARIES=/usr/lib/postgresql/%s, or upgrade the data with pg_upgrade",
			c.data, dataVersion, binaries, major, dataVersion, dataVersion, dataVersion)
	}

	logFile, err := c.openLog()
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the server writes to its own copy of the descriptor
	if dataVersion == "" {
		if opts.ReplicaOf != "" {
			logger.Info("embedded postgres: copying a standby", "data", c.data, "user", u.name, "binaries", binaries)
			if err := c.basebackup(ctx, opts.ReplicaOf, logFile); err != nil {
				return nil, err
			}
		} else {
			logger.Info("embedded postgres: creating a new cluster", "data", c.data, "user", u.name, "binaries", binaries)
			if err := c.initialize(ctx, logFile); err != nil {
				return nil, err
			}
		}
	} else if err := os.Chmod(c.data, 0o700); err != nil {
		return nil, fmt.Errorf("make data directory private: %w", err)
	}
	password, err := c.password()
	if err != nil {
		return nil, err
	}

	if err := stopLeftovers(ctx, c.data, logger); err != nil {
		return nil, err
	}
	p, port, err := c.launch(ctx, opts.Port, logFile, logger)
	if err != nil {
		return nil, err
	}
	database := cmp.Or(opts.Database, DefaultDatabase)
	if err := ensureDatabase(ctx, connURL(password, port, "postgres"), database); err != nil {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		return nil, errors.Join(err, p.shutdown(stopCtx))
	}
	logger.Info("embedded postgres started", "dir", dir, "port", port, "pid", p.pid(),
		"user", u.name, "version", major, "binaries", binaries)
	return &Server{url: connURL(password, port, database), dir: dir, logger: logger, proc: p}, nil
}

// prepareDir creates dir if needed and returns its absolute path free of symlinks, the form in
// which the kernel reports processes' working directories.
func prepareDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", abs, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", abs, err)
	}
	return real, nil
}

// lockWait is how long lockDir tries again a lock held elsewhere before it reports ErrInUse. A lock
// belongs to an open file, which a child forked by any goroutine of this process shares until it
// execs: so a lock this process has just released can stay held for that moment, and a Stop
// followed at once by a Start on the same directory (tests of the embedded server did) was
// refused now and then.
const lockWait = 200 * time.Millisecond

// lockDir takes dir/postgres.lock for this process, recording its PID there. The kernel releases
// the lock when the process exits, however it exits, so a killed ledgerd never blocks the next.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, "postgres.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := flockWithin(f, lockWait); err != nil {
		holder, rerr := io.ReadAll(f)
		err = fmt.Errorf("lock %s: %w", path, err)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			err = fmt.Errorf("%w (%s is held by pid %s)", ErrInUse, path, strings.TrimSpace(string(holder)))
		}
		return nil, errors.Join(err, rerr, f.Close())
	}
	if err := f.Truncate(0); err != nil {
		return nil, errors.Join(fmt.Errorf("clear lock file: %w", err), f.Close())
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		return nil, errors.Join(fmt.Errorf("write lock file: %w", err), f.Close())
	}
	return f, nil
}

// flockWithin takes f's exclusive lock, trying again every few milliseconds while another open
// file holds it, for up to wait.
func flockWithin(f *os.File, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// prepare makes cmd run as the cluster's user, in the cluster directory, in its own process group
// (so a Ctrl-C meant for ledgerd does not reach the server before ledgerd has shut down), with a
// C locale and no PG* variables that could redirect the programs.
func (c *cluster) prepare(cmd *exec.Cmd) *exec.Cmd {
	cmd.Dir = c.root
	cmd.Env = []string{"LC_ALL=C"}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PG") || strings.HasPrefix(name, "LC_") || name == "LANG" || name == "LANGUAGE" {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.user.credential()}
	return cmd
}

// logPath is the server's log file.
func (c *cluster) logPath() string {
	return filepath.Join(c.root, "server.log")
}

// openLog opens the server log for appending, first moving it to server.log.1 when it has grown
// past logRotateSize.
func (c *cluster) openLog() (*os.File, error) {
	path := c.logPath()
	if info, err := os.Stat(path); err == nil && info.Size() > logRotateSize {
		if err := os.Rename(path, path+".1"); err != nil {
			return nil, fmt.Errorf("rotate server log: %w", err)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open server log: %w", err)
	}
	if err := own(path, c.user); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}

// logSince returns what was appended to the server log past offset, at most its last 4 KiB,
// for error messages.
func (c *cluster) logSince(offset int64) string {
	const maxTail = 4 << 10
	b, err := os.ReadFile(c.logPath())
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", c.logPath(), err)
	}
	if offset > int64(len(b)) {
		offset = 0
	}
	b = b[offset:]
	if len(b) > maxTail {
		b = b[len(b)-maxTail:]
	}
	return fmt.Sprintf("%s says:\n%s", c.logPath(), strings.TrimSpace(string(b)))
}

// passwordPath is the file holding the superuser's password.
func (c *cluster) passwordPath() string {
	return filepath.Join(c.root, "password")
}

// password returns the superuser's password.
func (c *cluster) password() (string, error) {
	b, err := os.ReadFile(c.passwordPath())
	if err != nil {
		return "", fmt.Errorf("read the server's password (written when the cluster was created): %w", err)
	}
	pw := strings.TrimSpace(string(b))
	if pw == "" {
		return "", fmt.Errorf("read the server's password: %s is empty", c.passwordPath())
	}
	return pw, nil
}

// initialize creates the cluster with a new superuser password. initdb works in a scratch
// directory that is renamed into place only once complete, so an interrupted initdb is simply
// redone by the next Start.
func (c *cluster) initialize(ctx context.Context, out *os.File) error {
	scratch := c.data + ".init"
	if err := os.RemoveAll(scratch); err != nil {
		return fmt.Errorf("remove interrupted initdb's %s: %w", scratch, err)
	}
	pwPath := c.passwordPath()
	if err := os.Remove(pwPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("replace password file: %w", err)
	}
	if err := os.WriteFile(pwPath, []byte(rand.Text()+"\n"), 0o600); err != nil {
		return fmt.Errorf("write password file: %w", err)
	}
	if err := own(pwPath, c.user); err != nil {
		return err
	}
	cmd := c.prepare(exec.CommandContext(ctx, filepath.Join(c.binDir, "initdb"),
		"--pgdata="+scratch,
		"--username="+superuser,
		"--pwfile="+pwPath,
		"--auth-local=trust",
		"--auth-host=scram-sha-256",
		"--encoding=UTF8",
		"--locale=C",
	))
	offset, err := out.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("server log offset: %w", err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("initdb as %s: %w; %s", c.user, err, c.logSince(offset))
	}
	if err := os.Rename(scratch, c.data); err != nil {
		return fmt.Errorf("move new cluster into place: %w", err)
	}
	return nil
}

// serverArgs returns the postgres arguments for a server on port: TCP on 127.0.0.1 only, and
// the unix socket in the cluster directory, or none when that path would be too long for a
// socket address.
func (c *cluster) serverArgs(port uint32) []string {
	portText := strconv.FormatUint(uint64(port), 10)
	sockets := ""
	if len(c.root)+len("/.s.PGSQL.")+len(portText) <= maxSocketPath {
		// A double-quoted list element may hold commas and spaces; "" stands for a quote.
		sockets = `"` + strings.ReplaceAll(c.root, `"`, `""`) + `"`
	}
	return []string{
		"-D", c.data,
		"-p", portText,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=" + sockets,
		"-c", "cluster_name=ledgerd",
	}
}

// launch starts the server and waits until it accepts connections. With wantPort zero it takes
// DefaultPort or, when that is taken, any free port, and retries on another free port when the
// chosen one was taken between the check and the server's bind.
func (c *cluster) launch(ctx context.Context, wantPort uint32, out *os.File, logger *slog.Logger) (*postmaster, uint32, error) {
	preferred := cmp.Or(wantPort, DefaultPort)
	for attempt := 1; ; attempt++ {
		port, err := choosePort(preferred, wantPort != 0)
		if err != nil {
			return nil, 0, err
		}
		offset, err := out.Seek(0, io.SeekEnd)
		if err != nil {
			return nil, 0, fmt.Errorf("server log offset: %w", err)
		}
		cmd := c.prepare(exec.Command(filepath.Join(c.binDir, "postgres"), c.serverArgs(port)...))
		cmd.Stdout, cmd.Stderr = out, out
		p, err := startPostmaster(cmd)
		if err != nil {
			return nil, 0, err
		}
		err = p.waitReady(ctx, c.data)
		if err == nil {
			return p, port, nil
		}
		if !errors.Is(err, errExited) {
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
			defer cancel()
			return nil, 0, errors.Join(err, p.shutdown(stopCtx))
		}
		if wantPort == 0 && attempt < 3 && !portFree(port) {
			logger.Warn("embedded postgres: port was taken while the server started; trying another", "port", port)
			preferred = 0
			continue
		}
		return nil, 0, fmt.Errorf("%w; %s", err, c.logSince(offset))
	}
}

// choosePort returns preferred when it is free on 127.0.0.1. Otherwise it fails when explicit,
// and returns a free port chosen by the kernel when not; preferred zero means any port.
func choosePort(preferred uint32, explicit bool) (uint32, error) {
	if preferred != 0 && portFree(preferred) {
		return preferred, nil
	}
	if explicit {
		return 0, fmt.Errorf("port %d on 127.0.0.1 is in use", preferred)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	port := uint32(l.Addr().(*net.TCPAddr).Port)
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	return port, nil
}

// portFree reports whether a listener could bind port on 127.0.0.1 now.
func portFree(port uint32) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.FormatUint(uint64(port), 10)))
	if err != nil {
		return false
	}
	return l.Close() == nil
}

// connURL returns the URL of database on the server at port, as the superuser.
func connURL(password string, port uint32, database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(superuser, password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.FormatUint(uint64(port), 10)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// ensureDatabase creates database name unless it exists, connecting through adminURL.
func ensureDatabase(ctx context.Context, adminURL, name string) (err error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to the new server: %w", err)
	}
	defer func() {
		if cerr := conn.Close(ctx); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close connection: %w", cerr))
		}
	}()
	var exists bool
	if err := conn.QueryRow(ctx, databaseExistsSQL, name).Scan(&exists); err != nil {
		return fmt.Errorf("look for database %q: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, createDatabaseSQL+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %q: %w", name, err)
	}
	return nil
}

// Attach returns the URL of the server another ledgerd process runs on dir (the one Start refused
// with ErrInUse), so commands such as `ledgerd keys create` work while `ledgerd serve` runs.
func Attach(dir, database string) (string, error) {
	abs, err := prepareDir(dir)
	if err != nil {
		return "", fmt.Errorf("attach to embedded postgres: %w", err)
	}
	c := &cluster{root: filepath.Join(abs, "postgres"), data: filepath.Join(abs, "postgres", "data")}
	pid, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	if err != nil {
		return "", fmt.Errorf("attach to embedded postgres: no running server in %s: %w", abs, err)
	}
	// postmaster.pid: pid, data directory, start time, port, socket directory, ...
	lines := strings.Split(string(pid), "\n")
	if len(lines) < 4 {
		return "", fmt.Errorf("attach to embedded postgres: unreadable %s", filepath.Join(c.data, "postmaster.pid"))
	}
	port, err := strconv.ParseUint(strings.TrimSpace(lines[3]), 10, 32)
	if err != nil {
		return "", fmt.Errorf("attach to embedded postgres: port in postmaster.pid: %w", err)
	}
	password, err := c.password()
	if err != nil {
		return "", fmt.Errorf("attach to embedded postgres: %w", err)
	}
	return connURL(password, uint32(port), cmp.Or(database, DefaultDatabase)), nil
}
