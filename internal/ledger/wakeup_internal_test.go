package ledger

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db/dbtest"
)

// Wake-ups asked for at the same time reach the listeners, folded (see
// batch.Wakeup for the folding itself): every call returns, at least one
// notification and at most one per call arrives, and a later call sends its own.
func TestWakeupFoldsConcurrentCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	listener, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Release()
	if _, err := listener.Exec(ctx, "LISTEN test_wake"); err != nil {
		t.Fatal(err)
	}
	defer listener.Exec(ctx, "UNLISTEN test_wake") //nolint:errcheck // the test is over
	w := NewWakeup(pool, "test_wake", slog.New(slog.NewTextHandler(io.Discard, nil)))
	const calls = 64
	var wg sync.WaitGroup
	for range calls {
		wg.Add(1)
		go func() { defer wg.Done(); w.Send() }()
	}
	wg.Wait()
	// Each call returned after the notification it was folded into was sent.
	received := 0
	for {
		wait, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		n, err := listener.Conn().WaitForNotification(wait)
		cancel()
		if err != nil {
			break // none more: a bounded wait for notifications that are not coming
		}
		if n.Channel != "test_wake" {
			t.Errorf("notification on %q, want test_wake", n.Channel)
		}
		received++
	}
	if received < 1 || received > calls {
		t.Errorf("%d notifications for %d calls, want 1 to %d", received, calls, calls)
	}
	t.Logf("%d calls sent %d notifications", calls, received)
	// A call after them all is not folded into anything gone: it sends its own.
	w.Send()
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := listener.Conn().WaitForNotification(wait); err != nil {
		t.Errorf("a later call sent no notification: %v", err)
	}
}
