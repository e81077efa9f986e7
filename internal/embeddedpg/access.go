package embeddedpg

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// serviceUsers are the accounts, in order of preference, that run the server when ledgerd runs as
// root and the cluster has no owner yet. Debian's postgresql package creates "postgres".
var serviceUsers = []string{"postgres", "nobody"}

// runUser is the account the server processes (initdb, postgres) run as.
type runUser struct {
	name     string
	uid, gid uint32
}

// String names the user for logs and errors.
func (u runUser) String() string {
	return fmt.Sprintf("%s (uid %d)", u.name, u.uid)
}

// credential returns the credential that makes a child process run as u, or nil when u is the
// user ledgerd already runs as. Supplementary groups are dropped.
func (u runUser) credential() *syscall.Credential {
	if int(u.uid) == os.Geteuid() {
		return nil
	}
	return &syscall.Credential{Uid: u.uid, Gid: u.gid, Groups: []uint32{}}
}

// chooseUser decides who runs the server of the cluster rooted at root (which must exist), and
// whether root's tree must be handed over to that user first:
//   - not root: ledgerd's own user, which must own root (PostgreSQL insists on owning its data);
//   - root, and root already belongs to another user (an earlier run made it, as root or as that
//     user): that user, so the same data keeps working whoever starts ledgerd;
//   - root, and root belongs to root (just created, or copied in by root): the first existing
//     serviceUsers account, and the tree is handed to it.
func chooseUser(root string) (u runUser, handOver bool, err error) {
	st, err := statOwner(root)
	if err != nil {
		return runUser{}, false, err
	}
	euid := os.Geteuid()
	if euid != 0 {
		if int(st.Uid) != euid {
			return runUser{}, false, fmt.Errorf("%s belongs to uid %d, not to the user running ledgerd (uid %d): run ledgerd as that user or as root", root, st.Uid, euid)
		}
		name := strconv.Itoa(euid)
		if cur, err := user.Current(); err == nil {
			name = cur.Username
		}
		return runUser{name: name, uid: uint32(euid), gid: uint32(os.Getegid())}, false, nil
	}
	if st.Uid != 0 {
		name := "#" + strconv.Itoa(int(st.Uid))
		if owner, err := user.LookupId(strconv.Itoa(int(st.Uid))); err == nil {
			name = owner.Username
		}
		return runUser{name: name, uid: st.Uid, gid: st.Gid}, false, nil
	}
	for _, name := range serviceUsers {
		acct, err := user.Lookup(name)
		var unknown user.UnknownUserError
		if errors.As(err, &unknown) {
			continue
		}
		if err != nil {
			return runUser{}, false, fmt.Errorf("look up user %s: %w", name, err)
		}
		uid, err := strconv.ParseUint(acct.Uid, 10, 32)
		if err != nil {
			return runUser{}, false, fmt.Errorf("uid of user %s: %w", name, err)
		}
		gid, err := strconv.ParseUint(acct.Gid, 10, 32)
		if err != nil {
			return runUser{}, false, fmt.Errorf("gid of user %s: %w", name, err)
		}
		return runUser{name: name, uid: uint32(uid), gid: uint32(gid)}, true, nil
	}
	return runUser{}, false, fmt.Errorf("PostgreSQL refuses to run as root and none of the users %v exists to run it: install postgresql (apt-get install postgresql creates the postgres user) or run ledgerd as a non-root user", serviceUsers)
}

// statOwner returns the owner and group of path.
func statOwner(path string) (*syscall.Stat_t, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil, fmt.Errorf("stat %s: no ownership information", path)
	}
	return st, nil
}

// handOver gives every file under root, root included, to u.
func handOver(root string, u runUser) error {
	err := filepath.WalkDir(root, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(u.uid), int(u.gid))
	})
	if err != nil {
		return fmt.Errorf("give %s to %s: %w", root, u, err)
	}
	return nil
}

// own gives path, which ledgerd just created, to u.
func own(path string, u runUser) error {
	if err := os.Lchown(path, int(u.uid), int(u.gid)); err != nil {
		return fmt.Errorf("give %s to %s: %w", path, u, err)
	}
	return nil
}

// makeReachable lets u reach dir: every ancestor of dir that u may not search gets the one
// search (x) bit that applies to u (owner, group or other), and nothing else; each change is
// logged. It never grants read or write, so u can open known paths but not list those
// directories. /root (mode 0700) becomes 0701 when ledgerd keeps its data under /root.
func makeReachable(dir string, u runUser, logger *slog.Logger) error {
	for parent := filepath.Dir(dir); ; parent = filepath.Dir(parent) {
		st, err := statOwner(parent)
		if err != nil {
			return err
		}
		mode := fs.FileMode(st.Mode).Perm()
		bit := searchBit(st, u)
		if mode&bit == 0 {
			if err := os.Chmod(parent, mode|bit); err != nil {
				return fmt.Errorf("let %s reach %s: %w", u, dir, err)
			}
			logger.Warn("embedded postgres: made a parent directory searchable so the server's user can reach its data",
				"dir", parent, "user", u.name, "old_mode", fmt.Sprintf("%04o", mode), "new_mode", fmt.Sprintf("%04o", mode|bit))
		}
		if parent == filepath.Dir(parent) {
			return nil
		}
	}
}

// searchBit returns the permission bit that decides whether u may search a directory with the
// given owner and group: the owner's, else the group's (u's supplementary groups are dropped),
// else the others'.
func searchBit(st *syscall.Stat_t, u runUser) fs.FileMode {
	switch {
	case st.Uid == u.uid:
		return 0o100
	case st.Gid == u.gid:
		return 0o010
	default:
		return 0o001
	}
}
