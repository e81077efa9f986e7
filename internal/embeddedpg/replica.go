package embeddedpg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// basebackup copies the cluster of the server at primaryURL into c.data with pg_basebackup -R,
// which also writes standby.signal and the primary_conninfo (password included) the standby
// streams with, and stores the superuser password beside it as initialize does. The password
// travels in the environment, not on the command line. The copy is made in a scratch directory
// renamed into place once complete, so an interrupted copy is simply redone by the next Start.
func (c *cluster) basebackup(ctx context.Context, primaryURL string, out *os.File) error {
	u, err := url.Parse(primaryURL)
	if err != nil {
		return fmt.Errorf("parse the primary's URL: %w", err)
	}
	password, ok := u.User.Password()
	if !ok || password == "" {
		return errors.New("copy a standby: the primary's URL carries no password")
	}
	u.User = url.User(u.User.Username())
	scratch := c.data + ".init"
	if err := os.RemoveAll(scratch); err != nil {
		return fmt.Errorf("remove interrupted copy's %s: %w", scratch, err)
	}
	pwPath := c.passwordPath()
	if err := os.Remove(pwPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("replace password file: %w", err)
	}
	if err := os.WriteFile(pwPath, []byte(password+"\n"), 0o600); err != nil {
		return fmt.Errorf("write password file: %w", err)
	}
	if err := own(pwPath, c.user); err != nil {
		return err
	}
	cmd := c.prepare(exec.CommandContext(ctx, filepath.Join(c.binDir, "pg_basebackup"),
		"--pgdata="+scratch,
		"--dbname="+u.String(),
		"--write-recovery-conf",
		"--checkpoint=fast",
		"--wal-method=stream",
		"--no-password",
	))
	cmd.Env = append(cmd.Env, "PGPASSWORD="+password)
	offset, err := out.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("server log offset: %w", err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pg_basebackup from %s as %s: %w; %s", u.Redacted(), c.user, err, c.logSince(offset))
	}
	if err := os.Rename(scratch, c.data); err != nil {
		return fmt.Errorf("move the copied cluster into place: %w", err)
	}
	return nil
}

// Kill ends the server at once, as a crash of its machine would: the postmaster and every server
// process get SIGKILL, so nothing is flushed, checkpointed or shut down, and connections break
// without a goodbye. Failover drills use it on a primary. It returns once they are gone; further
// calls of Kill or Stop return its result.
func (s *Server) Kill() error {
	s.stopOnce.Do(func() {
		err := s.proc.kill(filepath.Join(s.dir, "postgres", "data"))
		if cerr := s.lock.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("release lock: %w", cerr))
		}
		if err != nil {
			s.stopErr = fmt.Errorf("kill embedded postgres in %s: %w", s.dir, err)
			return
		}
		s.logger.Warn("embedded postgres killed", "dir", s.dir)
	})
	return s.stopErr
}

// kill sends SIGKILL to the postmaster and to every process working in dataDir (each server
// process leads a process group of its own, so signalling the postmaster's group is not enough),
// until none is left or killWait has passed. A postmaster that had already exited is reported as
// an error.
func (p *postmaster) kill(dataDir string) error {
	select {
	case <-p.done:
		return p.exitError()
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill postgres (pid %d): %w", p.pid(), err)
	}
	for deadline := time.Now().Add(killWait); ; time.Sleep(pollInterval) {
		pids, err := clusterProcesses(dataDir)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres processes %v in %s survived SIGKILL", pids, dataDir)
		}
		for _, pid := range pids {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("kill postgres process %d: %w", pid, err)
			}
		}
	}
	<-p.done
	return nil
}

// killWait bounds the wait for a killed server's processes to be gone.
const killWait = 5 * time.Second
