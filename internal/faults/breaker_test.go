package faults

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db/dbtest"
)

// TestBreakerSharedByTwoProcesses: two oncehook processes share one breaker of a
// CRM whose calls hang past their timeout. The process holding the half-open
// probe is killed with SIGKILL while its probe hangs, and the other takes the
// probe over once its lease lapses; then the survivor is killed while the
// breaker is open and a third process carries on. Nothing of the breaker is
// lost, no probe's effect is doubled: once the CRM is back every operation is in
// its records exactly once.
func TestBreakerSharedByTwoProcesses(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewDSN(t)
	w := newWorld(t, pool, dsn, newSecrets("breaker"))
	w.conf = strings.Replace(strings.Replace(w.conf, "    timeout: 20s\n", "    timeout: 2s\n", 1),
		"    owner: crm-admin@example.com\n",
		"    owner: crm-admin@example.com\n    breaker: {min_calls: 4, window: 1m, open_for: 1s, max_open_for: 2s}\n", 1)
	// The CRM, behind a switch: while down, every call hangs until the client
	// gives up.
	var down atomic.Bool
	up := make(chan struct{})
	endOutage := sync.OnceFunc(func() { down.Store(false); close(up) })
	t.Cleanup(endOutage)
	crm := w.crm.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if down.Load() {
			_, _ = r.Body.Read(make([]byte, 1<<16))
			select {
			case <-r.Context().Done():
			case <-up:
			}
			return
		}
		crm.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	w.crmURL = srv.URL

	a := w.serve("serve-a")
	aName := a.waitOutput(`workers started"? worker=(\S+)`)
	b, bName := w.worker("worker-b")
	procs := map[string]*process{aName: a.process, bName: b}

	down.Store(true)
	const n = 20
	for i := range n {
		enquiry := fmt.Sprintf("enq_brk_%02d", i)
		if r, _ := w.deliverStripe(context.Background(), a.url, checkout("evt_"+enquiry, enquiry), 30*time.Second, nil); r.status != http.StatusOK {
			t.Fatalf("deliver %s: %d %v %s", enquiry, r.status, r.err, r.body)
		}
	}
	owner := func() (state, who string) {
		if err := w.pool.QueryRow(context.Background(),
			`SELECT breaker_state, breaker_probe_owner FROM destinations WHERE name = 'crm'`).Scan(&state, &who); err != nil {
			return "", ""
		}
		return state, who
	}
	// Kill the prober while its probe hangs.
	var prober string
	eventually(t, 60*time.Second, "a probe held by A or B", func() bool {
		st, who := owner()
		prober = who
		return st == "half_open" && procs[who] != nil
	})
	procs[prober].signal(syscall.SIGKILL)
	procs[prober].wait(10 * time.Second)
	survivor := aName
	if prober == aName {
		survivor = bName
	}
	t.Logf("killed %s while it held the probe; %s goes on", prober, survivor)
	eventually(t, 60*time.Second, "the survivor taking the probe over", func() bool {
		st, who := owner()
		return st == "half_open" && who == survivor
	})
	if k := w.count(`SELECT count(*) FROM breaker_transitions WHERE from_state = 'half_open' AND to_state = 'half_open'`); k == 0 {
		t.Errorf("the probe was taken over without its transition")
	}
	// Kill the survivor while the breaker is open; a third process carries on.
	c, cName := w.worker("worker-c")
	eventually(t, 60*time.Second, "the breaker open again", func() bool {
		st, _ := owner()
		return st == "open"
	})
	procs[survivor].signal(syscall.SIGKILL)
	procs[survivor].wait(10 * time.Second)
	eventually(t, 60*time.Second, "worker C probing", func() bool {
		st, who := owner()
		return st == "half_open" && who == cName
	})
	if c.exited() {
		t.Fatalf("worker C exited")
	}
	if f := w.count(`SELECT count(*) FROM actions WHERE state = 'failed'`); f != 0 {
		t.Errorf("%d actions failed during the outage", f)
	}
	endOutage()
	w.waitAllConfirmed(n, 3*time.Minute)
	w.checkOneRecordPerOperation(n)
	eventually(t, 30*time.Second, "the breaker closed", func() bool {
		st, _ := owner()
		return st == "closed"
	})
}
