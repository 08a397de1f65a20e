package faults

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// keptSeedsFile lists the seeds of histories that once failed, one a line (a
// comment after #). TestHistories runs them before its random ones, so `make test`
// replays every history that ever found a fault; a history that fails adds its
// seed here, to be committed with the fix.
const keptSeedsFile = "testdata/histories_failed.txt"

// keptSeeds reads keptSeedsFile.
func keptSeeds(t *testing.T) []uint64 {
	t.Helper()
	f, err := os.Open(keptSeedsFile)
	if err != nil {
		t.Fatalf("kept seeds: %v", err)
	}
	defer f.Close()
	var seeds []uint64
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		if text = strings.TrimSpace(text); text == "" {
			continue
		}
		seed, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			t.Fatalf("%s:%d: %v", keptSeedsFile, line, err)
		}
		seeds = append(seeds, seed)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("kept seeds: %v", err)
	}
	return seeds
}

// keepSeed adds a failing history's seed to keptSeedsFile, once.
func keepSeed(t *testing.T, seed uint64) {
	if slices.Contains(keptSeeds(t), seed) {
		return
	}
	f, err := os.OpenFile(keptSeedsFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Errorf("keep seed %d: %v", seed, err)
		return
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%d # %s\n", seed, strings.Join(failedFaults(seed), " ")); err != nil {
		t.Errorf("keep seed %d: %v", seed, err)
		return
	}
	t.Logf("seed %d added to %s: commit it", seed, keptSeedsFile)
}

// failedFaults names the faults seed plans, for the note beside it.
func failedFaults(seed uint64) []string {
	seen := map[string]bool{}
	var out []string
	for _, o := range planHistory(seed) {
		k := string(o.Kind)
		if o.Kind == opFault {
			k = o.Mode
		}
		if o.Kind != opPost && o.Kind != opRepeat && o.Kind != opCopies && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}
