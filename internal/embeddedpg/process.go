package embeddedpg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pollInterval is how often readiness and shutdown are checked.
const pollInterval = 20 * time.Millisecond

// errExited reports that the postmaster exited while it was expected to run.
var errExited = errors.New("postgres exited")

// postmaster is a running postgres server process, a child of ledgerd.
type postmaster struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // cmd.Wait's result; read only after done is closed
}

// startPostmaster starts cmd (a prepared postgres command). On Linux the server gets SIGINT,
// PostgreSQL's fast shutdown, when ledgerd dies, so a killed ledgerd leaves no server behind
// (dieWithParent); elsewhere the next Start stops it (stopLeftovers).
func startPostmaster(cmd *exec.Cmd) (*postmaster, error) {
	dieWithParent(cmd.SysProcAttr)
	p := &postmaster{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Linux sends the parent-death signal when the thread that forked the child exits, not
		// the process: keep this goroutine, and so its thread, alive until the server exits.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	return p, nil
}

// pid returns the postmaster's process ID.
func (p *postmaster) pid() int {
	return p.cmd.Process.Pid
}

// exitError describes how the postmaster ended before it was asked to.
func (p *postmaster) exitError() error {
	if p.err != nil {
		return fmt.Errorf("%w (pid %d): %w", errExited, p.pid(), p.err)
	}
	return fmt.Errorf("%w (pid %d) with status 0: something else shut it down", errExited, p.pid())
}

// waitReady waits until the postmaster reports in dataDir/postmaster.pid that it accepts
// connections, it exits, or ctx ends.
func (p *postmaster) waitReady(ctx context.Context, dataDir string) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for postgres to accept connections: %w", ctx.Err())
		case <-p.done:
			return p.exitError()
		case <-tick.C:
		}
		pf, err := readPIDFile(dataDir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if pf.pid == p.pid() && pf.status == "ready" {
			return nil
		}
	}
}

// shutdown stops the postmaster with a fast shutdown (SIGINT: roll back open transactions, write
// a checkpoint, exit). When ctx ends first it escalates to an immediate shutdown (SIGQUIT) and,
// two seconds later, kills the server's whole process group; it returns once the postmaster has
// exited. A postmaster that had already exited is reported as an error.
func (p *postmaster) shutdown(ctx context.Context) error {
	select {
	case <-p.done:
		return p.exitError()
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal postgres (pid %d) to shut down: %w", p.pid(), err)
	}
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("postgres (pid %d) shut down: %w", p.pid(), p.err)
		}
		return nil
	case <-ctx.Done():
	}
	errs := []error{fmt.Errorf("postgres (pid %d) did not finish its fast shutdown in time, forcing it: %w", p.pid(), ctx.Err())}
	if err := p.cmd.Process.Signal(syscall.SIGQUIT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		errs = append(errs, fmt.Errorf("signal immediate shutdown: %w", err))
	}
	select {
	case <-p.done:
	case <-time.After(2 * time.Second):
		// The postmaster leads its own process group (Setpgid), which holds all its children.
		if err := syscall.Kill(-p.pid(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kill process group %d: %w", p.pid(), err))
		}
		<-p.done
	}
	return errors.Join(errs...)
}

// pidFile is what a postmaster records in its data directory's postmaster.pid.
type pidFile struct {
	pid     int
	started int64  // the postmaster's start, in Unix seconds (line 3); 0 before it is written
	status  string // "starting", "ready", "stopping" (line 8); "" before the postmaster writes it
}

// readPIDFile reads dataDir/postmaster.pid; the error wraps fs.ErrNotExist when there is none.
func readPIDFile(dataDir string) (pidFile, error) {
	path := filepath.Join(dataDir, "postmaster.pid")
	b, err := os.ReadFile(path)
	if err != nil {
		return pidFile{}, fmt.Errorf("read %s: %w", path, err)
	}
	lines := strings.Split(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil {
		// The postmaster creates the file and writes it in two steps; a reader can see it empty.
		if len(b) == 0 {
			return pidFile{}, nil
		}
		return pidFile{}, fmt.Errorf("read %s: bad pid: %w", path, err)
	}
	pf := pidFile{pid: pid}
	if len(lines) > 2 {
		pf.started, _ = strconv.ParseInt(strings.TrimSpace(lines[2]), 10, 64)
	}
	if len(lines) > 7 {
		pf.status = strings.TrimSpace(lines[7])
	}
	return pf, nil
}

// startSlack is how far a process's start time may lie from the one its postmaster.pid records
// for postmasterProcess to take it for the file's writer: ps reports whole seconds, and the
// postmaster writes the file just after it starts. A PID reused by another program starts later.
const startSlack = 5 * time.Second

// postmasterProcess returns the PID that dataDir/postmaster.pid names when that process is the
// postmaster that wrote the file: a program named postgres that started when the file says. It
// returns 0 when there is no file, the process has exited, or the PID now belongs to another
// program. It asks ps, which macOS and the BSDs have, for the process's start and name.
func postmasterProcess(dataDir string) (int, error) {
	pf, err := readPIDFile(dataDir)
	if errors.Is(err, fs.ErrNotExist) || err == nil && (pf.pid == 0 || pf.started == 0) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	out, err := exec.Command("ps", "-o", "lstart=,comm=", "-p", strconv.Itoa(pf.pid)).Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return 0, nil // ps fails when no process has the PID
	}
	if err != nil {
		return 0, fmt.Errorf("look up process %d: %w", pf.pid, err)
	}
	// lstart is a fixed-width date such as "Tue Dec  1 10:32:16 2026", in local time.
	line := strings.TrimSpace(string(out))
	if len(line) < len(time.ANSIC) {
		return 0, fmt.Errorf("look up process %d: unreadable ps output %q", pf.pid, line)
	}
	started, err := time.ParseInLocation(time.ANSIC, line[:len(time.ANSIC)], time.Local)
	if err != nil {
		return 0, fmt.Errorf("look up process %d: start time in ps output %q: %w", pf.pid, line, err)
	}
	name := filepath.Base(strings.TrimSpace(line[len(time.ANSIC):]))
	if !strings.HasPrefix(name, "postgres") || started.Sub(time.Unix(pf.started, 0)).Abs() > startSlack {
		return 0, nil
	}
	return pf.pid, nil
}

// stopLeftovers makes sure no server from an earlier run still uses dataDir: one whose ledgerd was
// killed before it could stop it, or the children of a postmaster that was killed. It asks the
// postmaster named in postmaster.pid for a fast shutdown, then escalates to an immediate shutdown
// and to SIGKILL. A postmaster.pid left behind that names a live process which is not one of this
// cluster's (its PID was reused after a reboot or a container restart) is removed; PostgreSQL
// itself would refuse to start on it. One naming a dead process is left for PostgreSQL, which then
// also checks and frees the old server's shared memory.
func stopLeftovers(ctx context.Context, dataDir string, logger *slog.Logger) error {
	pids, err := clusterProcesses(dataDir)
	if err != nil {
		return err
	}
	pf, err := readPIDFile(dataDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if len(pids) > 0 {
		logger.Warn("embedded postgres: a server from an earlier run still uses the data directory; stopping it",
			"data", dataDir, "pids", pids)
		if err := stopProcesses(ctx, dataDir, pids, pf.pid); err != nil {
			return err
		}
		// A postmaster that shut down cleanly removed its file.
		if pf, err = readPIDFile(dataDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if pf.pid == 0 || !processAlive(pf.pid) {
		return nil
	}
	path := filepath.Join(dataDir, "postmaster.pid")
	logger.Warn("embedded postgres: removing a stale postmaster.pid that names an unrelated live process",
		"file", path, "pid", pf.pid)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale %s: %w", path, err)
	}
	return nil
}

// stopProcesses stops the cluster processes pids: a fast shutdown of the postmaster (when it is
// among them; orphaned children exit by themselves once they notice it gone), then SIGQUIT, then
// SIGKILL for whatever is left, until no process works in dataDir.
func stopProcesses(ctx context.Context, dataDir string, pids []int, postmasterPID int) error {
	stages := []struct {
		sig  syscall.Signal
		wait time.Duration
	}{
		{syscall.SIGINT, 15 * time.Second},
		{syscall.SIGQUIT, 3 * time.Second},
		{syscall.SIGKILL, 3 * time.Second},
	}
	for _, stage := range stages {
		for _, pid := range pids {
			if stage.sig == syscall.SIGINT && pid != postmasterPID {
				continue
			}
			if err := syscall.Kill(pid, stage.sig); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("signal %v to leftover postgres process %d: %w", stage.sig, pid, err)
			}
		}
		deadline := time.Now().Add(stage.wait)
		for {
			var err error
			if pids, err = clusterProcesses(dataDir); err != nil {
				return err
			}
			if len(pids) == 0 {
				return nil
			}
			if time.Now().After(deadline) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("stop leftover postgres processes %v: %w", pids, ctx.Err())
			case <-time.After(pollInterval):
			}
		}
	}
	return fmt.Errorf("leftover postgres processes %v in %s survived SIGKILL", pids, dataDir)
}
