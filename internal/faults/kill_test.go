package faults

import (
	"context"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// heldCall is one destination call that the CRM holds open.
type heldCall struct {
	enquiry     string
	afterCommit bool // the CRM stored the record before holding the reply
	owner       string
}

// TestWorkerKilledDuringCalls runs `oncehook serve` (A) and `oncehook worker` (B)
// on one database while the CRM holds every create request open, half of them
// after storing the record. Once B holds calls of both kinds it is killed with
// SIGKILL. A carries on (its own held calls complete, new events are performed),
// and B's leases are recovered per the decision table: a started call becomes
// uncertain and is reconciled by lookup before anything is repeated, so the record
// the CRM stored is found and confirmed, the one it never stored is created once
// with the same operation key. The CRM ends with one record per operation.
func TestWorkerKilledDuringCalls(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewDSN(t)
	w := newWorld(t, pool, dsn, newSecrets("kill"))
	a := w.serve("serve-a")
	b, bName := w.worker("worker-b")

	hang := make(chan struct{})
	released := false
	defer func() {
		if !released {
			close(hang)
		}
	}()
	var calls []heldCall
	var onB []heldCall
	bothKinds := func() bool {
		var after, before bool
		for _, c := range onB {
			after = after || c.afterCommit
			before = before || !c.afterCommit
		}
		return after && before
	}
	// A holds at most 16 calls at once (its concurrency), so from the 17th on every
	// call is B's: B holds both kinds well before 40.
	for i := 0; !bothKinds(); i++ {
		if i == 40 {
			t.Fatalf("worker B never held calls of both kinds: %+v", onB)
		}
		c := heldCall{enquiry: fmt.Sprintf("enq_kill_%02d", i), afterCommit: i%2 == 0}
		reached := make(chan struct{})
		w.crm.Fail(sandbox.Fault{Hang: hang, AfterCommit: c.afterCommit, Reached: reached})
		if r, _ := w.deliverStripe(context.Background(), a.url, checkout("evt_"+c.enquiry, c.enquiry), 30*time.Second, nil); r.status != http.StatusOK {
			t.Fatalf("deliver %s: %d %v %s", c.enquiry, r.status, r.err, r.body)
		}
		select {
		case <-reached:
		case <-time.After(30 * time.Second):
			t.Fatalf("the call for %s never reached the CRM", c.enquiry)
		}
		c.owner = w.leaseOwner(c.enquiry)
		calls = append(calls, c)
		if c.owner == bName {
			onB = append(onB, c)
		}
	}
	t.Logf("%d calls held, %d of them by worker B", len(calls), len(onB))
	for _, c := range onB {
		if n := w.count(`SELECT count(*) FROM attempts t JOIN actions a ON a.client = t.client AND a.id = t.action_id
			WHERE a.business_key = $1 AND t.kind = 'call' AND t.status = 'started' AND t.worker = $2`, c.enquiry, bName); n != 1 {
			t.Fatalf("%s: %d started call attempts by B before the kill, want 1", c.enquiry, n)
		}
	}

	b.signal(syscall.SIGKILL)
	b.wait(30 * time.Second)
	// The CRM sees B's connections close: what was held before storing stores nothing.
	bKeys := map[string]bool{}
	for _, c := range onB {
		bKeys[w.operationKey(c.enquiry)] = true
	}
	eventually(t, 30*time.Second, "the CRM to see B's requests abandoned", func() bool {
		n := 0
		for _, r := range w.crm.Requests() {
			if r.Method == http.MethodPost && r.Status == 0 && bKeys[r.IdempotencyKey] {
				n++
			}
		}
		return n == len(onB)
	})
	close(hang)
	released = true

	// B is dead and renews nothing, but its leases run for the destination timeout
	// plus 30 s. Nobody may touch them before they expire; rather than wait that
	// long, the test then moves their expiry to now, as the clock would.
	if n := w.count(`SELECT count(*) FROM actions WHERE state = 'processing' AND lease_owner = $1`, bName); n != len(onB) {
		t.Fatalf("%d actions still leased by the dead worker, want %d", n, len(onB))
	}
	if _, err := pool.Exec(context.Background(), `UPDATE actions SET lease_expires_at = now()
		WHERE state = 'processing' AND lease_owner = $1`, bName); err != nil {
		t.Fatal(err)
	}

	// A carries on with new work meanwhile.
	for i := range 3 {
		id := fmt.Sprintf("enq_after_%d", i)
		if r, _ := w.deliverStripe(context.Background(), a.url, checkout("evt_"+id, id), 30*time.Second, nil); r.status != http.StatusOK {
			t.Fatalf("deliver %s: %d %v", id, r.status, r.err)
		}
	}
	total := len(calls) + 3
	w.waitAllConfirmed(total, 90*time.Second)
	w.checkOneRecordPerOperation(total)

	for _, c := range onB {
		// The killed call is kept as evidence, the recovery is audited, and a lookup
		// came before anything else.
		if n := w.attempts(c.enquiry, "call", "abandoned"); n != 1 {
			t.Errorf("%s: %d abandoned call attempts, want B's one", c.enquiry, n)
		}
		if n := w.count(`SELECT count(*) FROM audit u JOIN actions a ON a.client = u.client AND a.id = u.action_id
			WHERE a.business_key = $1 AND u.act = 'recover'`, c.enquiry); n != 1 {
			t.Errorf("%s: %d recover audit entries, want 1", c.enquiry, n)
		}
		kinds := w.attemptKinds(c.enquiry)
		want := []string{"call", "lookup"} // stored by the CRM: found, confirmed
		if !c.afterCommit {
			want = []string{"call", "lookup", "call"} // absent: called again, same key
		}
		if fmt.Sprint(kinds) != fmt.Sprint(want) {
			t.Errorf("%s (stored before the kill: %v): attempts %v, want %v", c.enquiry, c.afterCommit, kinds, want)
		}
	}
	// Every request for one operation carried that operation's key.
	keys := map[string]bool{}
	for _, r := range w.crm.Requests() {
		if r.Method == http.MethodPost {
			keys[r.IdempotencyKey] = true
		}
	}
	if len(keys) != total {
		t.Errorf("%d distinct idempotency keys sent, want %d (one per operation)", len(keys), total)
	}
	if a.exited() {
		t.Errorf("serve A exited: %v", a.err)
	}
}

// TestWorkerKilledBeforeCalling kills `oncehook worker` (B) after it has claimed
// actions but before its attempts were written: a worker claims and starts its calls
// in one transaction, and the database holds B's attempt writes (a trigger waits on
// a lock the test holds) so the kill lands inside it. Nothing B did survives: A
// performs those actions once each, with no reconcile and nothing abandoned.
func TestWorkerKilledBeforeCalling(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewDSN(t)
	w := newWorld(t, pool, dsn, newSecrets("claim"))
	a := w.serve("serve-a")
	b, bName := w.worker("worker-b")

	ctx := context.Background()
	const gate = 6_060_606 // advisory lock key
	// On Citus the trigger runs where the attempts' shards are, on the workers
	// (citus.enable_unsafe_triggers lets it be created there): the gate is held,
	// and waited on, on every node.
	ddl := []string{`CREATE FUNCTION faults_hold_attempt() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.worker = ` + quoteLiteral(bName) + ` THEN PERFORM pg_advisory_xact_lock_shared(` + fmt.Sprint(gate) + `); END IF;
  RETURN NEW;
END $$`, `CREATE TRIGGER faults_hold_attempt BEFORE INSERT ON attempts
  FOR EACH ROW EXECUTE FUNCTION faults_hold_attempt()`}
	if dbtest.OnCitus() {
		ddl = append([]string{`SET citus.enable_unsafe_triggers = on`}, ddl...)
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, stmt := range ddl {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var gates []*pgx.Conn // a connection a node, each holding the gate
	for _, nodeDSN := range dbtest.NodeDSNs(t, dsn) {
		c, err := pgx.Connect(ctx, nodeDSN)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, `SELECT pg_advisory_lock($1)`, gate); err != nil {
			t.Fatal(err)
		}
		gates = append(gates, c)
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			for _, c := range gates {
				_ = c.Close(ctx) // the gate goes with the session
			}
		}
	}
	defer unlock()

	// B's claiming transaction is stuck once one of its backends waits for the gate.
	bWaiting := func() bool {
		for _, c := range gates {
			var n int
			if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
				AND classid = 0 AND objid::bigint = $1 AND objsubid = 1`, gate).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				return true
			}
		}
		return false
	}
	// Deliver events one at a time until B holds a claim; A performs the rest.
	// Each action is confirmed before the next event, so B's one stuck claim
	// is on the action of the latest event.
	var onB []string
	n := 0
	for ; len(onB) < 1; n++ {
		if n == 40 {
			t.Fatalf("worker B claimed %d of 40 actions", len(onB))
		}
		enq := fmt.Sprintf("enq_claim_%02d", n)
		if r, _ := w.deliverStripe(ctx, a.url, checkout("evt_"+enq, enq), 30*time.Second, nil); r.status != http.StatusOK {
			t.Fatalf("deliver %s: %d %v", enq, r.status, r.err)
		}
		var state string
		eventually(t, 30*time.Second, enq+" confirmed by A or claimed by B", func() bool {
			state, _ = w.actionState(enq)
			return state == "confirmed" || bWaiting()
		})
		if state != "confirmed" {
			onB = append(onB, enq)
		}
	}
	t.Logf("B holds claims on %v of %d actions", onB, n)

	b.signal(syscall.SIGKILL)
	b.wait(30 * time.Second)
	unlock() // B's blocked claim now finds its client gone and rolls back: no lease to wait for
	w.waitAllConfirmed(n, 90*time.Second)
	w.checkOneRecordPerOperation(n)
	for _, enq := range onB {
		if kinds := w.attemptKinds(enq); fmt.Sprint(kinds) != "[call]" {
			t.Errorf("%s: attempts %v, want one call: no attempt was started, so nothing is reconciled", enq, kinds)
		}
		if n := w.attempts(enq, "call", "abandoned"); n != 0 {
			t.Errorf("%s: %d abandoned attempts", enq, n)
		}
		if n := w.count(`SELECT attempts FROM actions WHERE business_key = $1`, enq); n != 1 {
			t.Errorf("%s: attempts counter %d, want 1", enq, n)
		}
	}
	if a.exited() {
		t.Errorf("serve A exited: %v", a.err)
	}
}

// leaseOwner is the worker holding the lease on the action for enquiry.
func (w *world) leaseOwner(enquiry string) string {
	w.t.Helper()
	_, owner := w.actionState(enquiry)
	return owner
}

func (w *world) operationKey(enquiry string) string {
	w.t.Helper()
	var key string
	if err := w.pool.QueryRow(context.Background(), `SELECT operation_key FROM actions WHERE business_key = $1`, enquiry).Scan(&key); err != nil {
		w.t.Fatal(err)
	}
	return key
}

func (w *world) actionState(enquiry string) (state, owner string) {
	w.t.Helper()
	err := w.pool.QueryRow(context.Background(),
		`SELECT state, coalesce(lease_owner, '') FROM actions WHERE business_key = $1`, enquiry).Scan(&state, &owner)
	if err != nil && err != pgx.ErrNoRows {
		w.t.Fatal(err)
	}
	return state, owner
}

func (w *world) attempts(enquiry, kind, status string) int {
	w.t.Helper()
	return w.count(`SELECT count(*) FROM attempts t JOIN actions a ON a.client = t.client AND a.id = t.action_id
		WHERE a.business_key = $1 AND t.kind = $2 AND t.status = $3`, enquiry, kind, status)
}

// attemptKinds lists the kinds of the action's attempts in order.
func (w *world) attemptKinds(enquiry string) []string {
	w.t.Helper()
	rows, err := w.pool.Query(context.Background(), `SELECT t.kind FROM attempts t
		JOIN actions a ON a.client = t.client AND a.id = t.action_id WHERE a.business_key = $1 ORDER BY t.id`, enquiry)
	if err != nil {
		w.t.Fatal(err)
	}
	kinds, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		w.t.Fatal(err)
	}
	return kinds
}

func quoteLiteral(s string) string {
	return "'" + stringsReplaceAll(s, "'", "''") + "'"
}
