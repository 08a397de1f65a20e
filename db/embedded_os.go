package db

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// runAs is the system user Postgres runs as when oncehook runs as root, because
// postgres refuses to run as root. A nil *runAs means the current user.
type runAs struct {
	name string
	uid  uint32
	gid  uint32
	gids []uint32 // primary and supplementary, for the traverse check
}

// chooseRunAs returns nil unless we are root. As root, an existing data directory
// owned by a normal user keeps running as that user (it was made by them and
// Postgres insists the owner runs it); otherwise the "postgres" system user.
func chooseRunAs(dir string) (*runAs, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	if fi, err := os.Stat(dir); err == nil {
		if uid := fileUID(fi); uid != 0 {
			if u, err := user.LookupId(strconv.Itoa(int(uid))); err == nil {
				return userRunAs(u)
			}
		}
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, errors.New(`PostgreSQL refuses to run as root and there is no "postgres" user: run oncehook as a normal user, create a "postgres" system user, or set DATABASE_URL`)
	}
	return userRunAs(u)
}

func userRunAs(u *user.User) (*runAs, error) {
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user %s: %w", u.Username, err)
	}
	r := &runAs{name: u.Username, uid: uint32(uid), gid: uint32(gid), gids: []uint32{uint32(gid)}}
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if g, err := strconv.ParseUint(s, 10, 32); err == nil {
				r.gids = append(r.gids, uint32(g))
			}
		}
	}
	return r, nil
}

func (r *runAs) credential() *syscall.Credential {
	if r == nil {
		return nil
	}
	return &syscall.Credential{Uid: r.uid, Gid: r.gid}
}

// canSearch mirrors the kernel's check for entering a directory. Root skips it,
// so we cannot learn the answer by trying.
func (r *runAs) canSearch(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return true
	}
	mode := fi.Mode().Perm()
	switch {
	case st.Uid == r.uid:
		return mode&0o100 != 0
	case slices.Contains(r.gids, st.Gid):
		return mode&0o010 != 0
	default:
		return mode&0o001 != 0
	}
}

// checkTraverse fails naming the first ancestor of dir that r cannot enter: as
// root everything "works" until postgres, running as r, cannot open its own data.
func checkTraverse(dir string, r *runAs) error {
	closed, fi, err := firstClosed(dir, r)
	if err != nil || closed == "" {
		return err
	}
	return fmt.Errorf("embedded postgres runs as user %q, which cannot reach data directory %s: %s is not searchable by it (mode %04o); use a data directory it can reach, grant search permission on %s, or set DATABASE_URL",
		r.name, dir, closed, fi.Mode().Perm(), closed)
}

// firstClosed returns the first ancestor of dir, from the root down, that r cannot
// enter, or "" when r can pass through all of them. Ancestors that do not exist yet
// count as open: prepareDataDir creates them 0755. It reads the permission bits, as
// root cannot learn the answer by trying; an ACL granting r entry is not seen, and
// such a directory counts as closed.
func firstClosed(dir string, r *runAs) (string, fs.FileInfo, error) {
	var ancestors []string
	for p := filepath.Dir(dir); ; p = filepath.Dir(p) {
		ancestors = append(ancestors, p)
		if p == filepath.Dir(p) {
			break
		}
	}
	slices.Reverse(ancestors)
	for _, p := range ancestors {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return "", nil, nil
		}
		if err != nil {
			return "", nil, fmt.Errorf("check data directory: %w", err)
		}
		if !r.canSearch(fi) {
			return p, fi, nil
		}
	}
	return "", nil, nil
}

// prepareDataDir creates dir (0700) and, as root, hands it to r after checking r
// can reach it. Parents we create are 0755 so that r can pass through them.
func prepareDataDir(dir string, r *runAs) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	if r != nil {
		if err := checkTraverse(dir, r); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create data directory: %w", err)
	}
	if r == nil {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	// Only a root-owned directory is ours to give away; anything else is left for
	// initdb or postgres to judge, with their own clear messages.
	if fileUID(fi) == 0 {
		if err := os.Chown(dir, int(r.uid), int(r.gid)); err != nil {
			return fmt.Errorf("chown data directory: %w", err)
		}
	}
	return nil
}

// socketDirFor keeps the socket path far below the ~100-byte sun_path limit
// whatever the data directory's length, and stable across runs so a second
// command finds the first one's server.
func socketDirFor(absDir string) string {
	sum := sha256.Sum256([]byte(absDir))
	return "/tmp/oncehook-" + hex.EncodeToString(sum[:4])
}

// ensureSocketDir makes the socket directory private to the server's user. It is
// in /tmp under a predictable name, so a directory someone else created there is
// refused rather than used.
func ensureSocketDir(path string, r *runAs) error {
	if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create socket directory: %w", err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("create socket directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket directory %s is not a directory", path)
	}
	want := uint32(os.Geteuid())
	if r != nil {
		want = r.uid
	}
	if uid := fileUID(fi); uid != want {
		if os.Geteuid() != 0 {
			return fmt.Errorf("socket directory %s belongs to uid %d, not to us: remove it", path, uid)
		}
		if err := os.Chown(path, int(r.uid), int(r.gid)); err != nil {
			return fmt.Errorf("chown socket directory: %w", err)
		}
	}
	if err := os.Chmod(path, 0o700); err != nil {
		return fmt.Errorf("chmod socket directory: %w", err)
	}
	return nil
}

func fileUID(fi fs.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return 0
}

// lockDir serialises starting and stopping one data directory across processes, so
// two commands launched together neither both run initdb nor both start a server.
// The lock goes with the process if it dies.
func lockDir(ctx context.Context, dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock data directory: %w", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock data directory: %w", ctx.Err())
		case <-tick.C:
		}
	}
}
