package batch

import "context"

// Slots bounds how many of something are under way at once (calls in flight,
// claims not yet answered): each holder takes a slot and frees it when done.
type Slots struct {
	c chan struct{} // one token per slot taken
}

// NewSlots returns n free slots.
func NewSlots(n int) *Slots { return &Slots{c: make(chan struct{}, n)} }

// Take waits for a free slot and takes it. It returns ctx's error when ctx ends
// first, having taken nothing.
func (s *Slots) Take(ctx context.Context) error {
	select {
	case s.c <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Hold takes a slot for a caller that has made sure there is room (it counted
// it, and no one else takes these slots), so it does not wait.
func (s *Slots) Hold() { s.c <- struct{}{} }

// TryTake takes a free slot if there is one, and says whether it did.
func (s *Slots) TryTake() bool {
	select {
	case s.c <- struct{}{}:
		return true
	default:
		return false
	}
}

// Free gives back a slot taken.
func (s *Slots) Free() { <-s.c }

// Busy is how many slots are taken.
func (s *Slots) Busy() int { return len(s.c) }

// Room is how many slots are free.
func (s *Slots) Room() int { return cap(s.c) - len(s.c) }

// Cap is how many slots there are.
func (s *Slots) Cap() int { return cap(s.c) }

// WaitRoom waits until n slots (at most Cap) have been free at once, and returns
// ctx's error when ctx ends first. It takes the slots it finds free meanwhile and
// gives them all back before it returns, so it suits the one goroutine that takes
// these slots, waiting for the room others free as they finish.
func (s *Slots) WaitRoom(ctx context.Context, n int) error {
	n = min(n, s.Cap())
	taken := 0
	defer func() {
		for ; taken > 0; taken-- {
			s.Free()
		}
	}()
	for taken < n {
		if err := s.Take(ctx); err != nil {
			return err
		}
		taken++
	}
	return nil
}
