package batch_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/oncehook/oncehook/internal/batch"
)

// Calls that come while a wake-up is being sent return at once and are folded
// into one more, sent after it; a call after them all sends its own.
func TestWakeupFoldsABurst(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	sending, unblock := make(chan struct{}), make(chan struct{})
	w := batch.NewWakeup(func() {
		if runs.Add(1) == 1 {
			close(sending)
			<-unblock
		}
	})
	first := make(chan struct{})
	go func() { w.Send(); close(first) }()
	<-sending
	var burst sync.WaitGroup
	for range 16 {
		burst.Go(w.Send)
	}
	burst.Wait() // each returned while the first send is still under way
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d sends while the first was held, want 1", n)
	}
	close(unblock)
	<-first
	if n := runs.Load(); n != 2 {
		t.Errorf("a burst of 16 during a send made %d sends in all, want 2", n)
	}
	w.Send()
	if n := runs.Load(); n != 3 {
		t.Errorf("a call after the burst: %d sends in all, want 3", n)
	}
}

// Sends to a Signal nobody waits on are folded into the one pending wake-up.
func TestSignalFoldsSends(t *testing.T) {
	t.Parallel()
	s := batch.NewSignal()
	s.Send()
	s.Send() // never blocks
	<-s
	select {
	case <-s:
		t.Error("two sends left two wake-ups, want one")
	default:
	}
}

func TestSlots(t *testing.T) {
	t.Parallel()
	s := batch.NewSlots(3)
	for range 3 {
		if err := s.Take(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if s.TryTake() {
		t.Fatal("took a fourth of three slots")
	}
	s.Free()
	s.Hold()
	if s.Busy() != 3 || s.Room() != 0 || s.Cap() != 3 {
		t.Fatalf("busy %d, room %d, cap %d; want 3, 0, 3", s.Busy(), s.Room(), s.Cap())
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Take(gone); !errors.Is(err, context.Canceled) {
		t.Errorf("Take with no room and a ctx that ended: %v, want context.Canceled", err)
	}
	roomy := make(chan error, 1)
	go func() { roomy <- s.WaitRoom(context.Background(), 2) }()
	s.Free()
	s.Free()
	if err := <-roomy; err != nil {
		t.Fatal(err)
	}
	if s.Busy() != 1 {
		t.Errorf("after WaitRoom, %d slots busy, want 1: it gives back what it took", s.Busy())
	}
	if err := s.WaitRoom(gone, 3); !errors.Is(err, context.Canceled) || s.Busy() != 1 {
		t.Errorf("WaitRoom for more than is free, ctx ended: %v with %d busy, want context.Canceled with 1", err, s.Busy())
	}
}
