package faults

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db/dbtest"
)

// TestTwoServersOneDatabase floods two `oncehook serve` processes on one database
// with five copies of each of thirty events, all sent at once and spread across
// both: every sender is acknowledged, the inbox holds each event once with all its
// deliveries counted, and the CRM holds exactly one record per operation.
func TestTwoServersOneDatabase(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewDSN(t)
	w := newWorld(t, pool, dsn, newSecrets("instances"))
	servers := []*server{w.serve("serve-a"), w.serve("serve-b")}

	const events, copies = 30, 5
	type sent struct {
		server int
		r      reply
	}
	results := make(chan sent, events*copies)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range events {
		body := checkout(fmt.Sprintf("evt_flood_%02d", i), fmt.Sprintf("enq_flood_%02d", i))
		for c := range copies {
			wg.Add(1)
			srv := (i + c) % len(servers) // every event reaches both servers
			go func() {
				defer wg.Done()
				hdr := w.signed("stripe", senderDelivery(body))
				<-start
				results <- sent{srv, post(servers[srv].url+"/hooks/stripe-live", hdr, body)}
			}()
		}
	}
	close(start)
	wg.Wait()
	close(results)

	perServer := make([]int, len(servers))
	var duplicates int
	for s := range results {
		if s.r.err != nil || s.r.status != 200 {
			t.Errorf("server %d: %d %v %s", s.server, s.r.status, s.r.err, s.r.body)
			continue
		}
		perServer[s.server]++
		var ack struct{ Duplicate bool }
		if err := json.Unmarshal(s.r.body, &ack); err != nil {
			t.Errorf("acknowledgement %s: %v", s.r.body, err)
		}
		if ack.Duplicate {
			duplicates++
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if duplicates != events*(copies-1) {
		t.Errorf("%d acknowledgements said duplicate, want %d (all but the first copy of each)", duplicates, events*(copies-1))
	}
	t.Logf("acknowledged per server: %v", perServer)

	// The inbox: thirty events, 150 deliveries counted, no conflict.
	if n := w.count(`SELECT count(*) FROM events`); n != events {
		t.Errorf("%d events stored, want %d", n, events)
	}
	if n := w.count(`SELECT coalesce(sum(deliveries), 0)::int FROM events`); n != events*copies {
		t.Errorf("%d deliveries counted, want %d", n, events*copies)
	}
	if n := w.count(`SELECT count(*) FROM events WHERE conflict`); n != 0 {
		t.Errorf("%d events flagged as conflicts; the copies are identical", n)
	}

	w.waitAllConfirmed(events, 90*time.Second)
	w.checkOneRecordPerOperation(events)
	// Both processes' workers shared the work through the database.
	workers := w.count(`SELECT count(DISTINCT worker) FROM attempts`)
	t.Logf("attempts were made by %d worker(s); %d CRM requests for %d records",
		workers, len(w.crm.Requests()), len(w.crm.Records()))
	if n := w.count(`SELECT count(*) FROM attempts WHERE kind = 'call'`); n != events {
		t.Errorf("%d calls made, want %d: an operation was called twice", n, events)
	}
}
