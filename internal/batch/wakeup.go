package batch

import "sync/atomic"

// Signal wakes one waiting loop. A send that finds a wake-up already pending is
// folded into it, so a sender never blocks and the loop wakes once for a burst.
type Signal chan struct{}

// NewSignal returns a Signal with no wake-up pending.
func NewSignal() Signal { return make(Signal, 1) }

// Send wakes the loop, or leaves the wake-up already pending.
func (s Signal) Send() {
	select {
	case s <- struct{}{}:
	default:
	}
}

// Wakeup runs a function that tells others there is new work (a notification to
// other processes) on behalf of callers that may ask at the same time. Calls that
// arrive while it runs are folded into one more run after it: a burst of calls
// costs a few runs, not one each, and every call is followed by a run that began
// after it, so no wake-up is lost.
type Wakeup struct {
	send  func()
	state atomic.Int32 // wakeIdle, wakeSending or wakeAgain
}

const (
	wakeIdle    int32 = iota // send is not running
	wakeSending              // it is running
	wakeAgain                // it is running, and another run was asked for meanwhile
)

// NewWakeup returns a Wakeup that runs send. send reports its own failures:
// listeners are expected to poll, so a lost notification only delays them.
func NewWakeup(send func()) *Wakeup { return &Wakeup{send: send} }

// Send runs send, or leaves it to the call already running it, which then runs
// it once more; in that case it returns at once.
func (w *Wakeup) Send() {
	for !w.state.CompareAndSwap(wakeIdle, wakeSending) {
		if w.state.CompareAndSwap(wakeSending, wakeAgain) || w.state.Load() == wakeAgain {
			return
		}
	}
	for {
		w.send()
		if w.state.CompareAndSwap(wakeSending, wakeIdle) {
			return
		}
		w.state.Store(wakeSending) // it was wakeAgain: run the one asked for meanwhile
	}
}
