package embeddedpg

import (
	"bytes"
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

// startPostmaster starts cmd (a prepared postgres command). The server gets SIGINT, PostgreSQL's
// fast shutdown, when ledgerd dies, so a killed ledgerd leaves no server behind.
func startPostmaster(cmd *exec.Cmd) (*postmaster, error) {
	cmd.SysProcAttr.Pdeathsig = syscall.SIGINT
	p := &postmaster{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Linux sends Pdeathsig when the thread that forked the child exits, not the process:
		// keep this goroutine, and so its thread, alive until the server exits.
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
	pid    int
	status string // "starting", "ready", "stopping" (line 8); "" before the postmaster writes it
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
	if len(lines) > 7 {
		pf.status = strings.TrimSpace(lines[7])
	}
	return pf, nil
}

// clusterProcesses returns the IDs of the postgres processes that work in dataDir, which must be
// a path free of symlinks: the postmaster and every one of its children change into the data
// directory at startup and stay there. Processes that exit during the scan, or that ledgerd may not
// inspect (other users' processes when ledgerd is not root, which cannot run this cluster), are
// not counted.
func clusterProcesses(dataDir string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue // not a process directory
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && cwd == dataDir {
			pids = append(pids, pid)
		}
	}
	return pids, nil
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

// processAlive reports whether pid names a running process. A zombie (exited, not yet reaped by
// its parent, as a killed ledgerd's server is until init gets to it) is not running.
func processAlive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err != nil {
		return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}
	// The state letter follows the command name, which is in parentheses and may hold any byte.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	return b[i+2] != 'Z' && b[i+2] != 'X'
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
