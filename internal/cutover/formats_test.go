package cutover_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/cutover"
)

// TestImportCSV: a spreadsheet's export, a key of two parts in key_1 and key_2,
// params as JSON text, a byte order mark before the header; rows with problems
// are named by their line in the file, a quoted field over two lines counted.
func TestImportCSV(t *testing.T) {
	t.Parallel()
	pool, cfg := setup(t)
	csvText := "\ufeffaction,key_1,key_2,external_ref,performed_at,params\n" +
		`open_opportunity,enq_1,cs_1,opp_1,2026-11-30T10:00:00Z,"{""enquiry_id"":""enq_1""}"` + "\n" +
		`open_opportunity,enq_2,cs_2,opp_2,2026-11-30T10:00:00Z,` + "\n"
	p := cutover.Params{Pool: pool, Config: cfg, Client: "acme", File: "ops.csv", Format: cutover.FormatCSV, By: "ada"}
	rep, err := cutover.Import(context.Background(), p, strings.NewReader(csvText))
	if err != nil || rep.New != 2 {
		t.Fatalf("csv import: %+v %v", rep, err)
	}
	if n := count(t, pool); n != 2 {
		t.Fatalf("%d actions, want 2", n)
	}
	// The same operations as JSON lines: already recorded, params and all.
	if rep, err := run(pool, cfg, "acme", line("enq_1", "cs_1", "opp_1"), false); err != nil || rep.Already != 1 {
		t.Errorf("the first row again as a JSON line: %+v %v", rep, err)
	}

	bad := "action,key_1,key_2,external_ref,performed_at,params\n" +
		`open_opportunity,enq_3,cs_3,opp_3,2026-11-30T10:00:00Z,"{""note"":""two lines"",` + "\n" + `""n"":1}"` + "\n" + // lines 2-3: good
		`open_opportunity,enq_4,cs_4,opp_4,yesterday,` + "\n" + // line 4
		`open_opportunity,enq_5,opp_5,2026-11-30T10:00:00Z` + "\n" + // line 5: a column short
		`open_opportunity,enq_6,cs_6,opp_6,2026-11-30T10:00:00Z,{not json}` + "\n" // line 6
	_, err = cutover.Import(context.Background(), p, strings.NewReader(bad))
	var problems *cutover.Problems
	if !errors.As(err, &problems) {
		t.Fatalf("a bad csv: %v", err)
	}
	want := []string{"ops.csv:4: performed_at \"yesterday\"", "ops.csv:5: not a row of the header's columns",
		"ops.csv:6: params is not JSON"}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error lacks %q:\n%v", w, err)
		}
	}
	if problems.Count != 3 || count(t, pool) != 2 {
		t.Errorf("%d problems, %d actions; want 3 and the 2 before", problems.Count, count(t, pool))
	}
	for _, header := range []string{"action,key,colour\n", "action,key,key_1,external_ref,performed_at\n",
		"action,key_2,external_ref,performed_at\n", "key,external_ref,performed_at\n"} {
		if _, err := cutover.Import(context.Background(), p, strings.NewReader(header)); err == nil || !strings.Contains(err.Error(), "header") {
			t.Errorf("header %q: %v", header, err)
		}
	}
}

// generated is a file of n performed operations made as it is read, never held
// whole: the way a file of any length reaches the import.
type generated struct {
	n, i int
	buf  []byte
}

func (g *generated) Read(p []byte) (int, error) {
	for len(g.buf) < len(p) && g.i < g.n {
		g.buf = fmt.Appendf(g.buf, `{"action":"open_opportunity","key":["enq_%d","cs_%d"],"external_ref":"opp_%d",`+
			`"performed_at":"2026-11-30T10:00:00Z","params":{"enquiry_id":"enq_%d","note":"%s"}}`+"\n",
			g.i, g.i, g.i, g.i, strings.Repeat("x", 200))
		g.i++
	}
	if len(g.buf) == 0 {
		return 0, io.EOF
	}
	k := copy(p, g.buf)
	g.buf = g.buf[:copy(g.buf, g.buf[k:])]
	return k, nil
}

// TestImportStreamsALargeFile: a dry run of 100,000 operations (about 30 MB of
// JSON lines, which held in memory as parsed operations would take twice that;
// ONCEHOOK_IMPORT_LINES sets another count, 1000000 for the million of
// docs/cutover.md) reads them a few thousand at a time: the heap stays far below
// the file's size, and the report counts every one.
func TestImportStreamsALargeFile(t *testing.T) {
	pool, cfg := setup(t)
	n := 100_000
	if v := os.Getenv("ONCEHOOK_IMPORT_LINES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatalf("ONCEHOOK_IMPORT_LINES=%q: %v", v, err)
		}
	}
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	start := time.Now()
	rep, err := cutover.Import(context.Background(), cutover.Params{Pool: pool, Config: cfg, Client: "acme",
		File: "million.jsonl", By: "ada", DryRun: true}, &generated{n: n})
	close(done)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a dry run of %d lines in %v, heap in use at most %d MiB", n, time.Since(start).Round(time.Second), peak.Load()>>20)
	if rep.Operations != n || rep.New != n {
		t.Errorf("report %+v, want %d operations, all new", rep, n)
	}
	if peak.Load() > 32<<20 {
		t.Errorf("the heap grew to %d MiB reading %d lines: the file is held, not streamed", peak.Load()>>20, n)
	}
	if c := count(t, pool); c != 0 {
		t.Errorf("the dry run left %d actions", c)
	}
}
