package ledger_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/oncehook/oncehook/internal/ledger"
)

// stateSetOf names the Go set each SQL literal of states repeats.
var stateSetOf = map[string][]string{
	"all":               ledger.AllStates,
	"open":              ledger.OpenStates(),
	"worker":            ledger.WorkerStates,
	"person":            ledger.PersonStates,
	"closed":            ledger.ClosedStates,
	"due":               ledger.DueStates,
	"lane":              ledger.LaneStates,
	"holdable":          ledger.HoldableStates,
	"event-cancellable": ledger.EventCancellableStates,
	"conflictable":      ledger.ConflictableStates,
	"predecessor-done":  ledger.PredecessorDoneStates,
	"notify-at-once":    ledger.NotifyAtOnceStates,
	"unconfigured-wait": ledger.UnconfiguredWaitStates,
	"successor-wait":    ledger.SuccessorWaitStates,
}

// stateSetLiterals lists, for each query (by its sqlc name) and each migration (by
// its file), the sets its literals of states repeat, in the order they appear. A
// literal added, removed or edited in SQL makes the test fail until this table, and
// so the Go set it must equal, says which rule it writes.
var stateSetLiterals = map[string][]string{
	"ActionInsert":                     {"predecessor-done"},
	"ActionWaitingSuccessors":          {"successor-wait"},
	"ActionCancelSuccessors":           {"successor-wait"},
	"ActionRecordBatch":                {"successor-wait"},
	"ActionReleaseSuccessors":          {"successor-wait"},
	"ActionClaim":                      {"due"},
	"ActionClaimSharded":               {"due"},
	"ActionPark":                       {"due"},
	"ActionProbePick":                  {"due"},
	"ActionClaimProbe":                 {"due"},
	"ActionCountParked":                {"due"},
	"ActionWaitingByClient":            {"due"},
	"ActionList":                       {"all", "person", "due", "person", "open"},
	"ActionCountByStateOfClient":       {"all"},
	"DashboardCauses":                  {"person", "worker"},
	"DashboardCausesCapped":            {"person", "person", "person", "person", "worker"},
	"DashboardCausesUnconfigured":      {"unconfigured-wait"},
	"ActionCountByState":               {"all"},
	"DashboardTrendQueues":             {"person", "person", "worker"},
	"MetricsOpenActions":               {"open"},
	"NotifyCandidates":                 {"notify-at-once"},
	"ActionPruneClosed":                {"closed"},
	"EventBodiesCarry":                 {"open"},
	"EventBodiesDropOfClient":          {"open"},
	"00044_retention_per_client.sql":   {"closed", "closed"},
	"ActionClientsWithWork":            {"lane"},
	"00023_claims_by_client.sql":       {"due", "due"},
	"00002_ledger.sql":                 {"all", "due"},
	"00005_operations.sql":             {"person", "closed"},
	"00014_search_and_trends.sql":      {"person"},
	"00030_waiting_causes.sql":         {"person", "person", "person", "person", "person", "person"},
	"00031_reads_client_by_client.sql": {"person", "person"},
}

var (
	sqlComment   = regexp.MustCompile(`--[^\n]*`)
	sqlQueryName = regexp.MustCompile(`(?m)^-- name: (\w+)`)
	sqlStrList   = regexp.MustCompile(`(?:\bIN\s*\(|\bARRAY\[)\s*('[a-z_]+'(?:\s*,\s*'[a-z_]+')+)\s*[)\]]`)
	sqlString    = regexp.MustCompile(`'([a-z_]+)'`)
	sqlFarFuture = regexp.MustCompile(`'9999-[^']*'(?:::timestamptz)?`)
)

// stateLiterals returns the lists of states written in sql, comments left out: a
// list of quoted words all of which are states.
func stateLiterals(sql string) [][]string {
	var out [][]string
	for _, m := range sqlStrList.FindAllStringSubmatch(sqlComment.ReplaceAllString(sql, ""), -1) {
		var words []string
		for _, w := range sqlString.FindAllStringSubmatch(m[1], -1) {
			words = append(words, w[1])
		}
		if !slices.ContainsFunc(words, func(w string) bool { return !slices.Contains(ledger.AllStates, w) }) {
			out = append(out, words)
		}
	}
	return out
}

// sqlBlocks splits the queries into their named statements and keeps each migration
// whole, keyed as stateSetLiterals is.
func sqlBlocks(t *testing.T) map[string]string {
	t.Helper()
	blocks := map[string]string{}
	for _, dir := range []string{"../../queries", "../../migrations"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no SQL files in %s: %v", dir, err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			text := string(b)
			if dir == "../../migrations" {
				blocks[filepath.Base(f)] = text
				continue
			}
			names := sqlQueryName.FindAllStringSubmatchIndex(text, -1)
			for i, n := range names {
				end := len(text)
				if i+1 < len(names) {
					end = names[i+1][0]
				}
				blocks[text[n[2]:n[3]]] = text[n[0]:end]
			}
		}
	}
	return blocks
}

func sortedSet(states []string) []string {
	s := slices.Clone(states)
	slices.Sort(s)
	return s
}

// TestStateSetLiterals ties every literal set of states in the queries and the
// migrations to the one Go set it repeats, and the far-future time that marks a
// successor waiting for its predecessor to the Go value.
func TestStateSetLiterals(t *testing.T) {
	blocks := sqlBlocks(t)
	for name, sql := range blocks {
		found := stateLiterals(sql)
		want := stateSetLiterals[name]
		if len(found) != len(want) {
			t.Errorf("%s writes %d sets of states %v; the table ties %d (%v): name the Go set each repeats",
				name, len(found), found, len(want), want)
			continue
		}
		for i, lit := range found {
			set, ok := stateSetOf[want[i]]
			if !ok {
				t.Fatalf("%s: no Go set named %q", name, want[i])
			}
			if diff := cmp.Diff(sortedSet(set), sortedSet(lit)); diff != "" {
				t.Errorf("%s: literal %d differs from the Go set %s (-go +sql):\n%s", name, i+1, want[i], diff)
			}
		}
	}
	for name := range stateSetLiterals {
		if _, ok := blocks[name]; !ok {
			t.Errorf("the table names %s, which no query or migration is", name)
		}
	}
	marker := "'" + ledger.WaitingForPredecessor.Format("2006-01-02 15:04:05-07") + "'::timestamptz"
	uses := 0
	for name, sql := range blocks {
		for _, lit := range sqlFarFuture.FindAllString(sqlComment.ReplaceAllString(sql, ""), -1) {
			uses++
			if lit != marker {
				t.Errorf("%s marks a waiting successor with %s; the Go marker is %s", name, lit, marker)
			}
		}
	}
	if uses == 0 {
		t.Errorf("no query writes the waiting marker %s", marker)
	}
}

// TestStateSetLiteralsCatchAnEdit: the scan that TestStateSetLiterals relies on sees
// a literal of the claim with one state left out.
func TestStateSetLiteralsCatchAnEdit(t *testing.T) {
	sql := stateLiterals(strings.Replace(sqlBlocks(t)["ActionClaim"], "'pending', 'retrying', 'uncertain'", "'pending', 'retrying'", 1))
	if len(sql) != 1 || slices.Equal(sortedSet(sql[0]), sortedSet(ledger.DueStates)) {
		t.Fatalf("an edited claim literal reads as %v", sql)
	}
}
