package ledger_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/sandbox"
)

func TestShutdownUnderLoad(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{noEngine: true})
	reached := make(chan struct{})
	w.crm.Fail(sandbox.Fault{Delay: 700 * time.Millisecond, Reached: reached})
	for i := range 5 {
		w.crm.Fail(sandbox.Fault{Delay: 300 * time.Millisecond})
		w.deliver(checkout{eventID: fmt.Sprintf("evt_sd_%d", i), enquiry: fmt.Sprintf("enq_sd_%d", i)})
	}
	for i := 5; i < 30; i++ {
		w.deliver(checkout{eventID: fmt.Sprintf("evt_sd_%d", i), enquiry: fmt.Sprintf("enq_sd_%d", i)})
	}
	stop := w.startEngine(0)
	select {
	case <-reached:
	case <-time.After(20 * time.Second):
		t.Fatal("no call reached the CRM")
	}
	stop() // SIGTERM's path: stop claiming, let calls in flight finish, hand back the rest

	if n := w.count(`SELECT count(*) FROM actions WHERE state = 'processing'`); n != 0 {
		t.Errorf("%d actions left processing after shutdown", n)
	}
	if n := w.count(`SELECT count(*) FROM attempts WHERE status = 'started'`); n != 0 {
		t.Errorf("%d attempts left started: in-flight calls must finish within the grace period", n)
	}
	confirmed := w.count(`SELECT count(*) FROM actions WHERE name = 'open_opportunity' AND state = 'confirmed'`)
	if got := len(w.crm.Records()); got != confirmed {
		t.Errorf("CRM holds %d records but %d actions are confirmed: a finished call went unrecorded", got, confirmed)
	}

	w.startEngine(0)
	for i := range 30 {
		w.waitFor("send_welcome_email", fmt.Sprintf("enq_sd_%d", i), "confirmed")
	}
	if n := len(w.crm.Records()); n != 30 {
		t.Errorf("CRM holds %d records after restart, want 30 (one per operation)", n)
	}
	if n := len(w.mail.Messages()); n != 30 {
		t.Errorf("%d emails, want 30", n)
	}
}
