package db

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// spareRoot is where, as root, a cluster goes whose data directory the server's
// user cannot reach (a checkout in root's 0700 home, say): one directory per data
// directory, named by a hash of its absolute path, so every command given the same
// --data-dir finds the same cluster. It is persistent and writable by root alone,
// so nobody else can plant a directory under a name we will look for.
const spareRoot = "/var/lib/oncehook"

// spareNote, beside the cluster, holds the data directory it stands for.
const spareNote = "data-dir"

// EmbeddedDataDir returns the directory StartEmbedded keeps the cluster for the
// data directory dir in: dir itself, made absolute, or, when oncehook runs as root
// and the user Postgres runs as cannot reach dir (see placeDataDir), a directory
// under /var/lib/oncehook. It creates nothing; the error is a failed lookup or
// stat, or no "postgres" user as root.
func EmbeddedDataDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("embedded postgres: %w", err)
	}
	place, _, _, err := placeDataDir(abs)
	return place, err
}

// placeDataDir decides where the cluster for the absolute data directory dir lives
// and who runs it. Only root has a choice. The first that applies wins:
//
//  1. dir holds a cluster: dir (if its user cannot reach it, prepareDataDir says so).
//  2. the spare directory for dir holds one or was made earlier: the spare.
//  3. the server's user can reach dir: dir.
//  4. the spare; closed names the directory the user cannot enter.
//
// Rules 1 and 2 keep a cluster where it was first made, whatever the permissions
// on the way to dir have become since. It creates nothing.
func placeDataDir(dir string) (place string, r *runAs, closed string, err error) {
	r, err = chooseRunAs(dir)
	if err != nil || r == nil {
		return dir, r, "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err == nil {
		return dir, r, "", nil
	}
	spare := spareDirFor(dir)
	if _, err := os.Stat(spare); err == nil {
		r, err := chooseRunAs(spare)
		return spare, r, "", err
	}
	closed, _, err = firstClosed(dir, r)
	if err != nil || closed == "" {
		return dir, r, "", err
	}
	return spare, r, closed, nil
}

// spareDirFor is the cluster directory under spareRoot that stands for dir.
func spareDirFor(absDir string) string {
	sum := sha256.Sum256([]byte(absDir))
	return filepath.Join(spareRoot, hex.EncodeToString(sum[:8]), "pg")
}

// prepareSpareDir creates the directories above a spare cluster, open to every
// user for passing through (whatever the umask), and the note naming the data
// directory it stands for; prepareDataDir then makes the cluster directory itself.
func prepareSpareDir(spare, dataDir string) error {
	for _, p := range []string{spareRoot, filepath.Dir(spare)} {
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create %s for the embedded postgres: %w", p, err)
		}
		if err := os.Chmod(p, 0o755); err != nil {
			return fmt.Errorf("create %s for the embedded postgres: %w", p, err)
		}
	}
	note := filepath.Join(filepath.Dir(spare), spareNote)
	if err := os.WriteFile(note, []byte(dataDir+"\n"), 0o644); err != nil {
		return fmt.Errorf("create %s: %w", note, err)
	}
	return nil
}
