//go:build linux

package embeddedpg

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// maxSocketPath is the longest unix socket path PostgreSQL accepts: sun_path (108 bytes on
// Linux) less its NUL.
const maxSocketPath = 107

// dieWithParent has the kernel send the server SIGINT, PostgreSQL's fast shutdown, when ledgerd
// dies.
func dieWithParent(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGINT
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
