package embeddedpg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrNoBinaries reports that the PostgreSQL server binaries (initdb and postgres) were not found.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (bin/initdb, bin/postgres) not found: " +
	"install them (`apt-get install postgresql`; on macOS `brew install postgresql@17` with its bin " +
	"on PATH, or Postgres.app), or set LEDGERD_PG_BINARIES (--pg-binaries) to the installation " +
	"directory that holds bin/initdb (such as /usr/lib/postgresql/15 or /opt/homebrew/opt/postgresql@17)")

// debianRoot holds one directory per installed major version on Debian and Ubuntu.
const debianRoot = "/usr/lib/postgresql"

// findBinaries returns the installation directory (the one holding bin/initdb) to use. explicit
// wins when set; otherwise the first usable candidate of binaryCandidates.
func findBinaries(ctx context.Context, explicit, dataVersion string) (string, error) {
	if explicit != "" {
		dir, err := filepath.Abs(explicit)
		if err != nil {
			return "", fmt.Errorf("resolve binaries path %q: %w", explicit, err)
		}
		if err := checkBinaries(dir); err != nil {
			return "", fmt.Errorf("%w: %w", ErrNoBinaries, err)
		}
		return dir, nil
	}
	candidates := binaryCandidates(ctx, dataVersion)
	for _, dir := range candidates {
		if checkBinaries(dir) == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%w (looked in: %s)", ErrNoBinaries, strings.Join(candidates, ", "))
}

// binaryCandidates lists, best first: the Debian directory of the existing cluster's major
// version (so an installed newer major does not strand the data), pg_config --bindir's parent,
// the parent of the directory holding postgres on PATH, and the Debian directories newest first.
// Each source is optional: one that is missing simply adds no candidate.
func binaryCandidates(ctx context.Context, dataVersion string) []string {
	var dirs []string
	if dataVersion != "" {
		dirs = append(dirs, filepath.Join(debianRoot, dataVersion))
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, filepath.Dir(strings.TrimSpace(string(out))))
	}
	if path, err := exec.LookPath("postgres"); err == nil {
		if real, err := filepath.EvalSymlinks(path); err == nil {
			dirs = append(dirs, filepath.Dir(filepath.Dir(real)))
		}
	}
	dirs = append(dirs, debianVersionDirs()...)
	return slices.Compact(dirs)
}

// debianVersionDirs returns the numerically named directories under debianRoot, newest first.
func debianVersionDirs() []string {
	entries, err := os.ReadDir(debianRoot)
	if err != nil {
		return nil
	}
	type versionDir struct {
		major int
		path  string
	}
	var found []versionDir
	for _, e := range entries {
		if major, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() {
			found = append(found, versionDir{major, filepath.Join(debianRoot, e.Name())})
		}
	}
	slices.SortFunc(found, func(a, b versionDir) int { return b.major - a.major })
	dirs := make([]string, len(found))
	for i, f := range found {
		dirs[i] = f.path
	}
	return dirs
}

// checkBinaries reports whether dir/bin holds executable initdb and postgres programs.
func checkBinaries(dir string) error {
	for _, name := range []string{"initdb", "postgres"} {
		path := filepath.Join(dir, "bin", name)
		info, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("check %s: %w", path, err)
		}
		if !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("check %s: not an executable file", path)
		}
	}
	return nil
}

// binariesMajor returns the major version ("15") of the postgres program in dir/bin.
func binariesMajor(ctx context.Context, dir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	path := filepath.Join(dir, "bin", "postgres")
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("run %s --version: %w", path, err)
	}
	major, err := parseMajorVersion(string(out))
	if err != nil {
		return "", fmt.Errorf("version of %s: %w", path, err)
	}
	return major, nil
}

// parseMajorVersion reads the major version from `postgres --version` output such as
// "postgres (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)" or "postgres (PostgreSQL) 17beta1".
// Versions before 10 (numbered "9.6") are not supported.
func parseMajorVersion(out string) (string, error) {
	const marker = "(PostgreSQL) "
	_, rest, ok := strings.Cut(out, marker)
	if !ok {
		return "", fmt.Errorf("no %q in %q", marker, out)
	}
	rest = strings.TrimSpace(rest)
	digits := rest[:len(rest)-len(strings.TrimLeft(rest, "0123456789"))]
	major, err := strconv.Atoi(digits)
	if err != nil {
		return "", fmt.Errorf("unrecognised version in %q", out)
	}
	if major < 10 {
		return "", fmt.Errorf("PostgreSQL %d is too old: ledgerd needs 10 or newer", major)
	}
	return digits, nil
}

// readDataVersion returns the major version recorded in dataDir/PG_VERSION, or "" when dataDir
// does not exist yet.
func readDataVersion(dataDir string) (string, error) {
	if _, err := os.Stat(dataDir); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	path := filepath.Join(dataDir, "PG_VERSION")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s (is %s a PostgreSQL data directory?): %w", path, dataDir, err)
	}
	return strings.TrimSpace(string(b)), nil
}
