package ledger_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestOutageIsOneFactWithItsAlerts: the breaker's changes write the outage and
// its alerts in their own transactions. Processes opening the breaker at once
// begin one outage with one down alert per channel; a probe that finds the
// destination still unwell tells no one; the close ends it with a recovered
// alert per channel due after the quiet time; a breaker opening again within
// it (flapping) continues the same outage and cancels the recovery not yet
// told, with no second down alert; once the quiet time has passed a new
// opening is a new outage.
func TestOutageIsOneFactWithItsAlerts(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	q := db.New(pool)
	plan := ledger.AlertPlan{Channels: []string{"ops-slack", "pager"}, Quiet: time.Hour}
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}
	alerts := func(kind, state string) int {
		t.Helper()
		return count(`SELECT count(*) FROM alerts WHERE destination = 'crm' AND kind = $1 AND state = $2`, kind, state)
	}
	open := func() bool {
		t.Helper()
		ok, err := ledger.OpenBreaker(ctx, pool, "crm", "503 Service Unavailable", settings.BreakerSettings{}, plan)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	probe := func(worker string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE destinations SET breaker_probe_at = now() - interval '1 second' WHERE name = 'crm'`); err != nil {
			t.Fatal(err)
		}
		if _, took, err := ledger.TakeBreakerProbe(ctx, pool, "crm", worker, time.Minute); !took || err != nil {
			t.Fatalf("take the probe: %v %v", took, err)
		}
	}
	closeBreaker := func(worker string) {
		t.Helper()
		_, ok, err := ledger.CloseBreaker(ctx, pool, "crm", worker, "lookup answered 200", plan,
			func(*db.Queries) (int64, error) { return 0, nil })
		if !ok || err != nil {
			t.Fatalf("close: %v %v", ok, err)
		}
	}

	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { open() })
	}
	wg.Wait()
	if n := count(`SELECT count(*) FROM outages WHERE destination = 'crm' AND closed_at IS NULL`); n != 1 {
		t.Fatalf("%d outages going on after 8 processes opened the breaker at once, want 1", n)
	}
	if n := alerts(ledger.AlertDown, "pending"); n != 2 {
		t.Fatalf("%d down alerts, want one per channel (2)", n)
	}
	if n := count(`SELECT count(DISTINCT channel) FROM alerts`); n != 2 {
		t.Fatalf("the alerts name %d channels, want 2", n)
	}
	if open() {
		t.Fatal("an open breaker opened again")
	}

	// Still unwell at its probe: the outage goes on, no one is told again.
	probe("w1")
	if ok, err := ledger.ReopenBreaker(ctx, pool, "crm", "w1", "503 again", time.Minute); !ok || err != nil {
		t.Fatalf("reopen: %v %v", ok, err)
	}
	if n := count(`SELECT count(*) FROM alerts`); n != 2 {
		t.Fatalf("%d alerts after a probe found it still down, want the 2 down alerts only", n)
	}

	// Well at its probe: over, told once the quiet time has passed.
	probe("w2")
	closeBreaker("w2")
	if n := count(`SELECT count(*) FROM outages WHERE closed_at IS NOT NULL`); n != 1 {
		t.Fatalf("%d outages over after the close, want 1", n)
	}
	if n := alerts(ledger.AlertRecovered, "pending"); n != 2 {
		t.Fatalf("%d recovered alerts, want one per channel (2)", n)
	}
	if n := count(`SELECT count(*) FROM alerts WHERE kind = 'recovered'
		AND due_at BETWEEN now() + interval '59 minutes' AND now() + interval '61 minutes'`); n != 2 {
		t.Fatalf("%d recovered alerts due the quiet time (1h) after the close, want 2", n)
	}

	// Down again within the quiet time: the same outage, no new page.
	if !open() {
		t.Fatal("the closed breaker did not open")
	}
	if n := count(`SELECT count(*) FROM outages`); n != 1 {
		t.Fatalf("%d outages after flapping within the quiet time, want 1", n)
	}
	if n := count(`SELECT reopened FROM outages`); n != 1 {
		t.Fatalf("the outage reopened %d times, want 1", n)
	}
	if down, cancelled := alerts(ledger.AlertDown, "pending"), alerts(ledger.AlertRecovered, "cancelled"); down != 2 || cancelled != 2 {
		t.Fatalf("%d down alerts and %d recoveries cancelled after flapping, want 2 and 2", down, cancelled)
	}
	probe("w3")
	closeBreaker("w3")
	if n := alerts(ledger.AlertRecovered, "pending"); n != 2 {
		t.Fatalf("%d recovered alerts pending after the second close, want 2", n)
	}

	// Down again after the quiet time: a new outage, paged anew.
	if _, err := pool.Exec(ctx, `UPDATE outages SET closed_at = now() - interval '2 hours'`); err != nil {
		t.Fatal(err)
	}
	if !open() {
		t.Fatal("the closed breaker did not open")
	}
	if n := count(`SELECT count(*) FROM outages`); n != 2 {
		t.Fatalf("%d outages after a quiet hour and a new opening, want 2", n)
	}
	if n := alerts(ledger.AlertDown, "pending"); n != 4 {
		t.Fatalf("%d down alerts, want 2 for each outage", n)
	}
	rows, err := q.OutageList(ctx, db.OutageListParams{Destination: "crm", MaxRows: 10})
	if err != nil || len(rows) != 2 || rows[0].ClosedAt != nil || rows[0].OpenedBy != ledger.BreakerActorWorkers ||
		rows[0].Reason != "503 Service Unavailable" {
		t.Fatalf("outages %+v (%v), want the new one first, going on, opened by the workers with its reason", rows, err)
	}
}

// TestOutageOfADestinationWithoutChannels: no channel, no owner: the outage is
// recorded, and no alert is written.
func TestOutageOfADestinationWithoutChannels(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	if ok, err := ledger.OpenBreaker(ctx, pool, "crm", "timeout", settings.BreakerSettings{}, ledger.AlertPlan{}); !ok || err != nil {
		t.Fatalf("open: %v %v", ok, err)
	}
	var outages, alerts int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM outages), (SELECT count(*) FROM alerts)`).Scan(&outages, &alerts); err != nil {
		t.Fatal(err)
	}
	if outages != 1 || alerts != 0 {
		t.Fatalf("%d outages and %d alerts, want 1 and 0", outages, alerts)
	}
}
