//go:build unix && !linux

package embeddedpg

import (
	"errors"
	"syscall"
)

// maxSocketPath is the longest unix socket path PostgreSQL accepts: sun_path (104 bytes on macOS
// and the BSDs) less its NUL.
const maxSocketPath = 103

// dieWithParent does nothing: only Linux has a parent-death signal. A server whose ledgerd was
// killed runs on until the next Start stops it (stopLeftovers).
func dieWithParent(*syscall.SysProcAttr) {}

// clusterProcesses returns the postmaster that works in dataDir, if it runs. Without /proc there
// is no portable way to find the processes whose working directory is dataDir, so it takes the
// one postmaster.pid names, checked by name and start time (postmasterProcess). The postmaster's
// children exit by themselves once it has.
func clusterProcesses(dataDir string) ([]int, error) {
	pid, err := postmasterProcess(dataDir)
	if err != nil || pid == 0 {
		return nil, err
	}
	return []int{pid}, nil
}

// processAlive reports whether pid names a running process: signal 0 fails with ESRCH only when
// there is none (EPERM means one of another user).
func processAlive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
