package ledger_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/destination"
	"github.com/oncehook/oncehook/internal/engine"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// The crash tests run the performer in a child process (this test binary, re-run
// with childEnv set) and kill it with SIGKILL while the destination holds the request.

const (
	childEnv       = "ONCEHOOK_TEST_CHILD_DSN"
	childConfigEnv = "ONCEHOOK_TEST_CHILD_CONFIG"
)

// runChild runs an engine until killed. It is the child side of the crash tests.
func runChild() {
	getenv := func(k string) string {
		return map[string]string{"STRIPE_SECRET": stripeSecret, "CRM_TOKEN": crmToken}[k]
	}
	cfg, err := config.Parse("child.yaml", []byte(os.Getenv(childConfigEnv)), getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		os.Exit(3)
	}
	ctx := context.Background()
	pool, err := db.Open(ctx, os.Getenv(childEnv), 4)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child database:", err)
		os.Exit(3)
	}
	eng := engine.New(engine.Params{
		Pool: pool, Config: cfg, Clients: destination.NewClients(cfg),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)), Worker: "child",
		Poll: 50 * time.Millisecond, LeaseExtra: time.Second, BackoffBase: 20 * time.Millisecond,
	})
	_ = eng.Run(ctx)
	os.Exit(0)
}

// startChild starts a performer process on the world's database and config.
func (w *world) startChild() *exec.Cmd {
	w.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+w.dsn, childConfigEnv+"="+w.yaml)
	cmd.Stderr = w.logs
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd
}

func TestCrashAfterDestinationCommitted(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{lookup: "strong", noEngine: true})
	hang := make(chan struct{})
	w.crm.Fail(sandbox.Fault{AfterCommit: true, Hang: hang})
	child := w.startChild()
	w.deliver(checkout{eventID: "evt_crash", enquiry: "enq_crash"})

	// Wait until the CRM has committed the record and holds the reply.
	deadline := time.Now().Add(20 * time.Second)
	for len(w.crm.Records()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the child never reached the CRM\n%s", tail(w.logs.String(), 3000))
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	close(hang)

	var started int
	if err := w.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM attempts WHERE status = 'started' AND kind = 'call'`).Scan(&started); err != nil {
		t.Fatal(err)
	}
	if started != 1 {
		t.Fatalf("%d started attempts after the kill, want the one left unrecorded", started)
	}

	// A new process recovers it: lease expired with a started attempt → uncertain →
	// the strong lookup finds the record → confirmed, with no second record.
	w.startEngine(time.Second)
	a := w.waitFor("open_opportunity", "enq_crash", "confirmed")
	recs := w.crm.Records()
	if len(recs) != 1 || a.ExternalRef != recs[0].ID {
		t.Fatalf("records %+v, action ref %q; want the one record, found", recs, a.ExternalRef)
	}
	if a.Attempts != 1 {
		t.Errorf("attempts %d; recovery must not call again", a.Attempts)
	}
	var abandoned int
	_ = w.pool.QueryRow(context.Background(), `SELECT count(*) FROM attempts WHERE status = 'abandoned'`).Scan(&abandoned)
	if abandoned != 1 {
		t.Errorf("%d abandoned attempts, want the killed one kept as evidence", abandoned)
	}
}

// TestCrashDuringLookup kills the performer while the CRM holds its reconcile lookup
// open. Recovery makes the action uncertain again, a new lookup finds the record and
// confirms it, and the killed lookup is closed as abandoned: no attempt of a confirmed
// action is left "started" in its evidence.
func TestCrashDuringLookup(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{lookup: "strong", noEngine: true})
	hang, reached := make(chan struct{}), make(chan struct{})
	defer close(hang)
	w.crm.Fail(sandbox.Fault{AfterCommit: true, Status: 500}) // stored, but the reply says 500: uncertain
	w.crm.Fail(sandbox.Fault{Method: "GET", Hang: hang, Reached: reached})
	child := w.startChild()
	w.deliver(checkout{eventID: "evt_crash_lookup", enquiry: "enq_crash_lookup"})
	select {
	case <-reached:
	case <-time.After(20 * time.Second):
		t.Fatalf("the child never looked the operation up\n%s", tail(w.logs.String(), 3000))
	}
	// The lookup's started attempt commits before the CRM is asked.
	if n := w.count(`SELECT count(*) FROM attempts WHERE kind = 'lookup' AND status = 'started'`); n != 1 {
		t.Fatalf("%d started lookups while the CRM holds one, want 1", n)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	w.startEngine(time.Second)
	a := w.waitFor("open_opportunity", "enq_crash_lookup", "confirmed")
	recs := w.crm.Records()
	if len(recs) != 1 || a.ExternalRef != recs[0].ID {
		t.Fatalf("records %+v, action ref %q; want the one record, found", recs, a.ExternalRef)
	}
	var kinds []string
	for _, raw := range w.detail(a.ID)["attempts"].([]any) {
		at := raw.(map[string]any)
		kinds = append(kinds, fmt.Sprintf("%s:%s", at["kind"], at["status"]))
	}
	want := "[call:finished lookup:abandoned lookup:finished]"
	if fmt.Sprint(kinds) != want {
		t.Errorf("the confirmed action's attempts are %v, want %s: the killed lookup is closed, not left started", kinds, want)
	}
}
