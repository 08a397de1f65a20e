package faults

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// TestServeTerminatedMidCalls sends SIGTERM to `oncehook serve` while the CRM holds
// four calls: three finish within the grace period (10 s), one never does. New
// requests are refused at once while the process is still finishing; the three
// calls are recorded as confirmed; the fourth is either recorded (uncertain) or left
// as a started attempt under its lease; no claim without a started call is kept.
// After a restart nothing is stuck in processing and the CRM holds one record per
// operation.
func TestServeTerminatedMidCalls(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewDSN(t)
	w := newWorld(t, pool, dsn, newSecrets("term"))
	a := w.serve("serve-a")
	aName := a.waitOutput(`workers started"? worker=(\S+)`)

	hang := make(chan struct{})
	defer close(hang)
	var reached []chan struct{}
	for i := range 4 {
		r := make(chan struct{})
		reached = append(reached, r)
		f := sandbox.Fault{Delay: 3 * time.Second, Reached: r}
		if i == 3 {
			f = sandbox.Fault{Hang: hang, Reached: r}
		}
		w.crm.Fail(f)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			enq := fmt.Sprintf("enq_term_%d", i)
			if r, _ := w.deliverStripe(context.Background(), a.url, checkout("evt_"+enq, enq), 30*time.Second, nil); r.status != http.StatusOK {
				t.Errorf("deliver %s: %d %v", enq, r.status, r.err)
			}
		}()
	}
	wg.Wait()
	for _, r := range reached {
		select {
		case <-r:
		case <-time.After(30 * time.Second):
			t.Fatal("a call never reached the CRM")
		}
	}

	a.signal(syscall.SIGTERM)
	// New requests are refused while the calls in flight are still finishing. A
	// request that was already on its way may still be served; if it is answered
	// 200 it must be stored like any other.
	var late []string // acknowledged after the signal
	probe := 0
	eventually(t, 5*time.Second, "a delivery to be refused after SIGTERM", func() bool {
		probe++
		id := fmt.Sprintf("enq_late_%d", probe)
		body := checkout("evt_"+id, id)
		r := post(a.url+"/hooks/stripe-live", w.signed("stripe", senderDelivery(body)), body)
		if r.err == nil && r.status == http.StatusOK {
			late = append(late, id)
		} else if r.err == nil {
			t.Errorf("delivery after SIGTERM: %d %s, want 200 or a refused connection", r.status, r.body)
		}
		return r.err != nil
	})
	if a.exited() {
		t.Fatalf("serve exited before its calls in flight finished: %v", a.err)
	}
	a.wait(45 * time.Second)
	if a.err != nil {
		t.Errorf("serve exited with %v after SIGTERM, want a clean exit", a.err)
	}
	if n := w.count(`SELECT count(*) FROM events WHERE source_event_id LIKE 'evt_enq_late_%'`); n != len(late) {
		t.Errorf("%d deliveries sent after SIGTERM are stored, but %d were acknowledged", n, len(late))
	}
	t.Logf("%d of %d deliveries sent after SIGTERM were still served", len(late), probe)

	// The three calls that finished within the grace period are recorded.
	// (Which event's call the CRM held is up to the order the calls arrived in.)
	held := ""
	for i := range 4 {
		enq := fmt.Sprintf("enq_term_%d", i)
		if st, _ := w.actionState(enq); st != "confirmed" {
			if held != "" {
				t.Errorf("%s and %s are not confirmed after shutdown; only one call outlived the grace period", held, enq)
			}
			held = enq
		}
	}
	if held == "" {
		t.Fatal("every call was confirmed, including the one the CRM never answered")
	}
	// No claim without a started call is left behind; the call that outlived the
	// grace period is either recorded or left as a started attempt under its lease.
	if n := w.count(`SELECT count(*) FROM actions a WHERE state = 'processing' AND NOT EXISTS (
		SELECT 1 FROM attempts t WHERE t.client = a.client AND t.action_id = a.id
		AND t.kind = 'call' AND t.status = 'started')`); n != 0 {
		t.Errorf("%d claims without a started call kept after shutdown", n)
	}
	var state, reason string
	if err := pool.QueryRow(context.Background(), `SELECT state, reason FROM actions WHERE business_key = $1`, held).Scan(&state, &reason); err != nil {
		t.Fatal(err)
	}
	started := w.count(`SELECT count(*) FROM attempts WHERE status = 'started'`)
	switch state {
	case "uncertain":
		if started != 0 {
			t.Errorf("the call was recorded as uncertain but %d attempts are still started", started)
		}
	case "processing":
		if started != 1 {
			t.Errorf("the call was left processing with %d started attempts, want 1", started)
		}
		// Its lease runs for timeout + 30 s; the test moves it to now, as the clock would.
		if _, err := pool.Exec(context.Background(), `UPDATE actions SET lease_expires_at = now()
			WHERE state = 'processing' AND lease_owner = $1`, aName); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("the call that outlived the grace period is %s (%s)", state, reason)
	}
	t.Logf("the call that outlived the grace period was left %s: %s", state, reason)

	// After a restart the held call is reconciled (the CRM never stored it: a strong
	// lookup says absent) and performed once.
	w.serve("serve-a2")
	w.waitAllConfirmed(4+len(late), 90*time.Second)
	w.checkOneRecordPerOperation(4 + len(late))
	if n := w.count(`SELECT count(*) FROM actions WHERE state = 'processing'`); n != 0 {
		t.Errorf("%d actions stuck in processing after the restart", n)
	}
}
