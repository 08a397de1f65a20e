package faults

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
)

// TestPostgresRestartMidStream stops Postgres the hard way (pg_ctl -m immediate: no
// checkpoint, crash recovery at the next start) while four senders stream events
// into `oncehook serve`, and starts it again. Senders retry what is not
// acknowledged, as providers do. Every delivery acknowledged before the stop is in
// the inbox after it, every event is acknowledged in the end and stored once, the
// server never answers anything but 200 or 503, and the CRM holds exactly one record
// per operation.
func TestPostgresRestartMidStream(t *testing.T) {
	t.Parallel()
	cluster, dsn := dbtest.Cluster(t)
	w := newWorld(t, nil, dsn, newSecrets("restart"))
	srv := w.serve("serve")

	const events, senders, stopAfter = 40, 4, 12
	var (
		mu           sync.Mutex
		stopped      bool
		ackedBefore  []string // acknowledged before the stop began
		refusedAfter int      // tries refused once the stop began
		acks         = map[string]int{}
	)
	stopNow := make(chan struct{})    // closed once stopAfter deliveries are acknowledged
	outageSeen := make(chan struct{}) // closed once senders have been refused during the outage
	var stopOnce, seenOnce sync.Once

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	queue := make(chan int, events)
	for i := range events {
		queue <- i
	}
	close(queue)
	verdicts := make(chan string, events)
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range queue {
				id := fmt.Sprintf("evt_restart_%02d", i)
				r, _ := w.deliverStripe(ctx, srv.url, checkout(id, fmt.Sprintf("enq_restart_%02d", i)), 3*time.Minute, func() {
					mu.Lock()
					defer mu.Unlock()
					if stopped {
						refusedAfter++
						if refusedAfter >= 3 {
							seenOnce.Do(func() { close(outageSeen) })
						}
					}
				})
				mu.Lock()
				if r.err != nil || r.status != http.StatusOK {
					verdicts <- fmt.Sprintf("%s: %d %v %s", id, r.status, r.err, r.body)
					mu.Unlock()
					continue
				}
				acks[id]++
				if !stopped {
					ackedBefore = append(ackedBefore, id)
					if len(ackedBefore) >= stopAfter {
						stopOnce.Do(func() { close(stopNow) })
					}
				}
				mu.Unlock()
			}
		}()
	}

	select {
	case <-stopNow:
	case <-time.After(60 * time.Second):
		t.Fatal("the stream never got going")
	}
	mu.Lock()
	stopped = true
	before := append([]string(nil), ackedBefore...)
	mu.Unlock()
	if err := cluster.StopImmediate(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("postgres stopped (immediate) after %d acknowledgements", len(before))
	select {
	case <-outageSeen:
	case <-time.After(60 * time.Second):
		t.Fatal("no sender was refused while Postgres was down")
	}
	// The server stays up and says it is not ready.
	if r := get(srv.url + "/readyz"); r.status != http.StatusServiceUnavailable {
		t.Errorf("readyz during the outage: %d %v", r.status, r.err)
	}
	startCtx, cancelStart := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancelStart()
	if err := cluster.Start(startCtx); err != nil {
		t.Fatal(err)
	}
	t.Log("postgres started again")

	wg.Wait()
	close(verdicts)
	for v := range verdicts {
		t.Errorf("delivery not acknowledged (a provider would retry, but oncehook must answer 200 or 503): %s", v)
	}
	if srv.exited() {
		t.Fatalf("the server exited: %v", srv.err)
	}
	mu.Lock()
	t.Logf("%d tries were refused during the outage and retried", refusedAfter)
	if len(acks) != events {
		t.Errorf("%d of %d events acknowledged", len(acks), events)
	}
	mu.Unlock()

	pool, err := db.Open(context.Background(), dsn, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	w.pool = pool
	for _, id := range before {
		if n := w.count(`SELECT count(*) FROM events WHERE source_event_id = $1`, id); n != 1 {
			t.Errorf("%s was acknowledged before the stop but is stored %d times after it", id, n)
		}
	}
	if n := w.count(`SELECT count(*) FROM events`); n != events {
		t.Errorf("%d events stored, want %d", n, events)
	}
	eventually(t, 30*time.Second, "readyz after the restart", func() bool {
		return get(srv.url+"/readyz").status == http.StatusOK
	})
	w.waitAllConfirmed(events, 2*time.Minute)
	w.checkOneRecordPerOperation(events)
}

func get(url string) reply {
	res, err := client.Get(url)
	if err != nil {
		return reply{err: err}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return reply{status: res.StatusCode, body: b}
}
