// Package batch holds the throughput machinery the ledger uses: a group-commit
// Writer, the wake-ups that fold a burst of requests into a few, the call slots,
// and the one set of waits they share (waits.go). It knows nothing of the
// database: what a group is written with is the caller's function.
package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// ErrClosed is what Submit returns after Close.
var ErrClosed = errors.New("the writer is closed")

// Defaults of Params.
const (
	// DefaultSize bounds one group: a statement with more rows costs more to plan
	// and holds its locks longer, for little more sharing.
	DefaultSize = 64
	// DefaultTimeout bounds a group's write when none of its waiters has a deadline.
	DefaultTimeout = 10 * time.Second
)

// Result is what one submission is told: its value, or why it failed.
type Result[R any] struct {
	Value R
	Err   error
}

// Params configures a Writer. Write is required; zero values take the defaults.
type Params[T, R any] struct {
	// Write writes one group, typically with one statement or transaction, and
	// returns each item's result in order; an error fails the whole group. It may
	// run for several groups at once when Writers > 1.
	Write func(ctx context.Context, group []T) ([]Result[R], error)
	// Split says whether a group that failed with err is written again item by
	// item, so that one item the database refuses cannot fail the others; nil
	// never splits. Trouble that would fail every item alone (storage being
	// unavailable) should not split.
	Split func(err error) bool
	// Coming says whether more submissions are on their way although no group is
	// being written (the outcomes of calls in flight): a group then waits for
	// them too. nil: company is expected only while a group is being written.
	// It is called with the writer's lock held, so it must be quick.
	Coming func() bool
	// After runs once a group's waiters have been answered and its write slot is
	// free, with its results: for what must follow a commit without holding up
	// the group's waiters (a notification).
	After func(results []Result[R])

	Size    int           // most items in one group; default DefaultSize
	Wait    time.Duration // longest an item waits for company; default GroupWait
	Writers int           // groups written at once; default 1
	Timeout time.Duration // bounds a write whose waiters have no deadline; default DefaultTimeout
}

// Writer writes concurrent submissions together: a durable commit costs about
// the same for one row as for dozens, so a burst written as a few groups costs a
// few commits instead of one each, and every submitter is answered only after its
// group's write has returned.
//
// A group is written as soon as a write slot is free and it has no reason to
// wait for company: when it is full, when its first item has waited Wait, when
// Close has begun, or when no group is being written and Coming (if set) does
// not say more is on its way. A lone submission to an idle writer is therefore
// written at once, and groups grow with the load: what arrives while a group is
// written forms the next one. The goroutines that gather and write groups run
// only while there is work, so a Writer that is never closed leaks nothing.
type Writer[T, R any] struct {
	p Params[T, R]

	mu      sync.Mutex
	queue   []*waiter[T, R]
	writing int  // groups being written
	running bool // a goroutine is gathering the queue into groups (run)
	closed  bool
	changed Signal // the queue grew, a write ended, or Close began
	work    sync.WaitGroup
}

// waiter is one submission waiting for its group.
type waiter[T, R any] struct {
	ctx   context.Context
	item  T
	since time.Time
	reply chan Result[R] // buffered: a write never waits for a waiter that left
}

// New returns a Writer. It panics without p.Write.
func New[T, R any](p Params[T, R]) *Writer[T, R] {
	if p.Write == nil {
		panic("batch: Params.Write is required")
	}
	if p.Size <= 0 {
		p.Size = DefaultSize
	}
	if p.Wait <= 0 {
		p.Wait = GroupWait
	}
	if p.Writers <= 0 {
		p.Writers = 1
	}
	if p.Timeout <= 0 {
		p.Timeout = DefaultTimeout
	}
	return &Writer[T, R]{p: p, changed: NewSignal()}
}

// Submit hands item to the next group and waits for that group's write. It
// returns ErrClosed once Close has begun; ctx's error when ctx ends first, in
// which case the item is left out of its group unless the group's write has
// already begun (so a caller that ends its ctx may not know whether the item was
// written); otherwise the group's error or the item's own result.
func (w *Writer[T, R]) Submit(ctx context.Context, item T) (R, error) {
	wt := &waiter[T, R]{ctx: ctx, item: item, since: time.Now(), reply: make(chan Result[R], 1)}
	if err := w.enqueue(wt); err != nil {
		var zero R
		return zero, err
	}
	select {
	case r := <-wt.reply:
		return r.Value, r.Err
	case <-ctx.Done():
		var zero R
		return zero, ctx.Err()
	}
}

func (w *Writer[T, R]) enqueue(wt *waiter[T, R]) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	if err := wt.ctx.Err(); err != nil {
		return err
	}
	w.queue = append(w.queue, wt)
	if !w.running {
		w.running = true
		w.work.Add(1)
		go w.run()
	}
	w.changed.Send()
	return nil
}

// Queued is how many submissions wait for a group to take them.
func (w *Writer[T, R]) Queued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}

// Close stops taking submissions and returns once every submission already made
// has been answered: what is queued is written without waiting for company.
// Submit returns ErrClosed from then on. Close may be called more than once.
func (w *Writer[T, R]) Close() {
	w.mu.Lock()
	w.closed = true
	w.changed.Send()
	w.mu.Unlock()
	w.work.Wait()
}

// run gathers the queue into groups and starts their writes, until it is empty.
func (w *Writer[T, R]) run() {
	defer w.work.Done()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.queue) > 0 {
		w.await(timer)
		n := min(len(w.queue), w.p.Size)
		group := slices.Clone(w.queue[:n])
		w.queue = slices.Delete(w.queue, 0, n)
		w.writing++
		w.work.Add(1)
		go w.write(group)
	}
	w.running = false
}

// await returns, with w.mu held as on entry, once a write slot is free and the
// group at the head of the queue has no reason to wait for company (see Writer).
func (w *Writer[T, R]) await(timer *time.Timer) {
	for {
		left := w.companyWait()
		if left <= 0 && w.writing < w.p.Writers {
			return
		}
		var expired <-chan time.Time
		if left > 0 {
			timer.Reset(left)
			expired = timer.C
		}
		w.mu.Unlock()
		select {
		case <-w.changed:
		case <-expired:
		}
		w.mu.Lock()
		timer.Stop()
	}
}

// companyWait is how much longer the group at the head of the queue waits for
// company; zero or less when it has no reason to.
func (w *Writer[T, R]) companyWait() time.Duration {
	if len(w.queue) >= w.p.Size || w.closed {
		return 0
	}
	if w.writing == 0 && (w.p.Coming == nil || !w.p.Coming()) {
		return 0
	}
	return w.p.Wait - time.Since(w.queue[0].since)
}

// write writes one group, answers its waiters, frees its slot, then runs After.
func (w *Writer[T, R]) write(group []*waiter[T, R]) {
	defer w.work.Done()
	results := w.writeGroup(group)
	w.mu.Lock()
	w.writing--
	w.changed.Send()
	w.mu.Unlock()
	if w.p.After != nil && len(results) > 0 {
		w.p.After(results)
	}
}

// writeGroup writes the group's items whose waiters are still there (the others
// were told their ctx's error, and writing their items would surprise them),
// splits the group when Split says so, and answers every waiter it wrote for.
func (w *Writer[T, R]) writeGroup(group []*waiter[T, R]) []Result[R] {
	live := slices.DeleteFunc(group, func(wt *waiter[T, R]) bool { return wt.ctx.Err() != nil })
	if len(live) == 0 {
		return nil
	}
	results, err := w.call(live)
	if err != nil && len(live) > 1 && w.p.Split != nil && w.p.Split(err) {
		var all []Result[R]
		for _, wt := range live {
			all = append(all, w.writeGroup([]*waiter[T, R]{wt})...)
		}
		return all
	}
	if err != nil {
		results = make([]Result[R], len(live))
		for i := range results {
			results[i].Err = err
		}
	}
	for i, wt := range live {
		wt.reply <- results[i]
	}
	return results
}

// call runs Write for the items of live, on a context of its own that lasts as
// long as the most patient of their waiters: one waiter leaving must not cut off
// a write the others wait for.
func (w *Writer[T, R]) call(live []*waiter[T, R]) ([]Result[R], error) {
	var latest time.Time
	items := make([]T, len(live))
	for i, wt := range live {
		items[i] = wt.item
		dl, ok := wt.ctx.Deadline()
		if !ok {
			dl = time.Now().Add(w.p.Timeout)
		}
		if dl.After(latest) {
			latest = dl
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), latest)
	defer cancel()
	results, err := w.p.Write(ctx, items)
	if err == nil && len(results) != len(items) {
		err = fmt.Errorf("batch: %d results for a group of %d", len(results), len(items))
	}
	return results, err
}
