package db

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// minMajor is the oldest PostgreSQL we start: initdb --no-instructions and the
// SQL the migrations use need 14.
const minMajor = 14

// errNoPostgres is one line on purpose: it is what a newcomer without PostgreSQL sees.
var errNoPostgres = errors.New("PostgreSQL not found: install PostgreSQL " + strconv.Itoa(minMajor) +
	" or newer (initdb, pg_ctl) or set DATABASE_URL")

// binGlobs are where distributions put versioned server binaries that are not on
// PATH: Debian/Ubuntu, RHEL (PGDG) and Homebrew's postgresql@N formulas.
var binGlobs = []string{
	"/usr/lib/postgresql/*/bin",
	"/usr/pgsql-*/bin",
	"/opt/homebrew/opt/postgresql@*/bin",
	"/usr/local/opt/postgresql@*/bin",
}

// pgBin is one directory holding initdb, pg_ctl and postgres of one major version.
type pgBin struct {
	dir   string
	major int
}

func (b pgBin) path(name string) string { return filepath.Join(b.dir, name) }

// findBinaries picks the server binaries to run. PATH wins over the versioned
// directories (it is what the user chose), then the highest version. When the data
// directory already exists it was made by major want, and only that major can open
// it, so a matching install is preferred. dirs, when non-nil, replaces the search.
func findBinaries(ctx context.Context, dirs []string, want int) (pgBin, error) {
	var found []pgBin
	var tooOld []pgBin
	for _, dir := range searchDirs(dirs) {
		if !hasServerBinaries(dir) {
			continue
		}
		major, err := binMajor(ctx, filepath.Join(dir, "pg_ctl"))
		if err != nil {
			continue
		}
		b := pgBin{dir: dir, major: major}
		if major < minMajor {
			tooOld = append(tooOld, b)
			continue
		}
		found = append(found, b)
	}
	if want > 0 {
		for _, b := range found {
			if b.major == want {
				return b, nil
			}
		}
	}
	if len(found) > 0 {
		return found[0], nil
	}
	if len(tooOld) > 0 {
		return pgBin{}, fmt.Errorf("PostgreSQL %d found in %s is too old: install PostgreSQL %d or newer (initdb, pg_ctl) or set DATABASE_URL",
			tooOld[0].major, tooOld[0].dir, minMajor)
	}
	return pgBin{}, errNoPostgres
}

// searchDirs lists PATH, then the versioned install directories, highest version
// first, each directory once.
func searchDirs(dirs []string) []string {
	if dirs != nil {
		return dirs
	}
	all := filepath.SplitList(os.Getenv("PATH"))
	for _, g := range binGlobs {
		matches, _ := filepath.Glob(g)
		// Glob sorts lexically, which puts 9 after 16; sort by the number in the path.
		sortByVersionDesc(matches)
		all = append(all, matches...)
	}
	seen := map[string]bool{}
	var out []string
	for _, d := range all {
		if d == "" || seen[d] {
			continue
		}
		seen[d] = true
		out = append(out, d)
	}
	return out
}

var digitsRe = regexp.MustCompile(`\d+`)

func sortByVersionDesc(paths []string) {
	num := func(p string) int {
		n, _ := strconv.Atoi(digitsRe.FindString(p))
		return n
	}
	slices.SortStableFunc(paths, func(a, b string) int { return cmp.Compare(num(b), num(a)) })
}

// hasServerBinaries requires all three: a client-only install has pg_ctl-less
// directories, and pg_ctl runs the postgres found beside it.
func hasServerBinaries(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

var versionRe = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

// binMajor runs "pg_ctl --version" as the current user: the version flags are
// handled before pg_ctl's refusal to run as root.
func binMajor(ctx context.Context, pgCtl string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, pgCtl, "--version").Output()
	if err != nil {
		return 0, fmt.Errorf("%s --version: %w", pgCtl, err)
	}
	m := versionRe.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("%s --version: unexpected output %q", pgCtl, strings.TrimSpace(string(out)))
	}
	return strconv.Atoi(string(m[1]))
}
