package batch_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/oncehook/oncehook/internal/batch"
)

// plug is an item whose write waits until the test lets it go: what is submitted
// meanwhile queues up behind it.
const plug = -1

// store is a Write for tests: it keeps every group it was given and answers each
// item with ten times its value, or fails the groups fail picks.
type store struct {
	mu     sync.Mutex
	groups [][]int
	held   chan struct{} // closed when the plug's write begins
	open   chan struct{} // closed to let the plug's write finish
	let    func()        // closes open, once
	fail   func(group []int) error
}

func newStore() *store {
	s := &store{held: make(chan struct{}), open: make(chan struct{})}
	s.let = sync.OnceFunc(func() { close(s.open) })
	return s
}

func (s *store) write(_ context.Context, group []int) ([]batch.Result[int], error) {
	if slices.Contains(group, plug) {
		close(s.held)
		<-s.open
	}
	s.mu.Lock()
	s.groups = append(s.groups, slices.Clone(group))
	s.mu.Unlock()
	if s.fail != nil {
		if err := s.fail(group); err != nil {
			return nil, err
		}
	}
	out := make([]batch.Result[int], len(group))
	for i, v := range group {
		out[i].Value = 10 * v
	}
	return out, nil
}

// written is the groups written so far, in the order of their writes.
func (s *store) written() [][]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.groups)
}

// sizes is how many items each write took, in the order of the writes.
func (s *store) sizes() []int {
	var out []int
	for _, g := range s.written() {
		out = append(out, len(g))
	}
	return out
}

// newWriter returns a Writer on s, closed when the test ends (after the plug, if
// any, has been let go).
func newWriter(t *testing.T, s *store, p batch.Params[int, int]) *batch.Writer[int, int] {
	t.Helper()
	p.Write = s.write
	w := batch.New(p)
	t.Cleanup(w.Close)
	t.Cleanup(s.let)
	return w
}

// hold submits the plug and returns once its write has begun.
func hold(t *testing.T, w *batch.Writer[int, int], s *store) <-chan batch.Result[int] {
	t.Helper()
	r := submit(w, context.Background(), plug)
	<-s.held
	return r
}

// release lets the plug's write finish.
func release(s *store) { s.let() }

func submit(w *batch.Writer[int, int], ctx context.Context, v int) <-chan batch.Result[int] {
	r := make(chan batch.Result[int], 1)
	go func() {
		got, err := w.Submit(ctx, v)
		r <- batch.Result[int]{Value: got, Err: err}
	}()
	return r
}

// queue submits each value once the one before it is queued, so that they queue in
// order behind the plug.
func queue(t *testing.T, w *batch.Writer[int, int], values ...int) []<-chan batch.Result[int] {
	t.Helper()
	var out []<-chan batch.Result[int]
	for _, v := range values {
		before := w.Queued()
		out = append(out, submit(w, context.Background(), v))
		waitUntil(t, "the submission is queued", func() bool { return w.Queued() == before+1 })
	}
	return out
}

// waitUntil polls cond until it holds, failing the test after a deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s, still not true: %s", what)
		}
		time.Sleep(50 * time.Microsecond) // poll interval
	}
}

func answered(r <-chan batch.Result[int]) bool {
	select {
	case <-r:
		return true
	default:
		return false
	}
}

func values(t *testing.T, rs []<-chan batch.Result[int]) []int {
	t.Helper()
	var out []int
	for _, r := range rs {
		got := <-r
		if got.Err != nil {
			t.Fatalf("submission refused: %v", got.Err)
		}
		out = append(out, got.Value)
	}
	return out
}

// With nothing being written, a submission is written at once, alone: it does
// not wait for company that may never come.
func TestWriterWritesALoneItemAtOnce(t *testing.T) {
	t.Parallel()
	s := newStore()
	w := newWriter(t, s, batch.Params[int, int]{Wait: time.Hour})
	for v := range 3 {
		got, err := w.Submit(context.Background(), v)
		if err != nil || got != 10*v {
			t.Fatalf("Submit(%d) = %d, %v; want %d", v, got, err, 10*v)
		}
	}
	if diff := cmp.Diff([]int{1, 1, 1}, s.sizes()); diff != "" {
		t.Errorf("write sizes (-want +got):\n%s", diff)
	}
}

// Submissions that arrive while a group is being written are written together,
// in groups of at most Size, each submitter told its own result.
func TestWriterGroupsConcurrentSubmissions(t *testing.T) {
	t.Parallel()
	s := newStore()
	w := newWriter(t, s, batch.Params[int, int]{Size: 64, Wait: time.Hour})
	plugged := hold(t, w, s)
	const n = 99
	rs := make([]<-chan batch.Result[int], n)
	for i := range n {
		rs[i] = submit(w, context.Background(), i)
	}
	waitUntil(t, "every submission is queued", func() bool { return w.Queued() == n })
	release(s)
	<-plugged
	for i, r := range rs {
		if got := <-r; got.Err != nil || got.Value != 10*i {
			t.Errorf("submission %d told %d, %v; want %d", i, got.Value, got.Err, 10*i)
		}
	}
	// The plug alone, then a full group, then the rest once the full one is written.
	if diff := cmp.Diff([]int{1, 64, 35}, s.sizes()); diff != "" {
		t.Errorf("write sizes (-want +got):\n%s", diff)
	}
}

// A full group is written as soon as a slot is free, without waiting for company.
func TestWriterFlushesAFullGroup(t *testing.T) {
	t.Parallel()
	s := newStore()
	w := newWriter(t, s, batch.Params[int, int]{Size: 4, Wait: time.Hour, Writers: 2})
	hold(t, w, s) // takes one of the two slots, and so gives reason to wait
	rs := make([]<-chan batch.Result[int], 4)
	for i := range rs {
		rs[i] = submit(w, context.Background(), i+1)
	}
	if diff := cmp.Diff([]int{10, 20, 30, 40}, values(t, rs)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{4}, s.sizes()); diff != "" {
		t.Errorf("writes while the plug is held (-want +got):\n%s", diff)
	}
}

// A group that is not full waits for company for Wait, then is written: while
// a group is being written, and while Coming says more is on its way.
func TestWriterFlushesAfterTheWait(t *testing.T) {
	t.Parallel()
	const wait = 20 * time.Millisecond
	t.Run("WhileAGroupIsWritten", func(t *testing.T) {
		t.Parallel()
		s := newStore()
		w := newWriter(t, s, batch.Params[int, int]{Wait: wait, Writers: 2})
		hold(t, w, s)
		start := time.Now()
		if got, err := w.Submit(context.Background(), 7); err != nil || got != 70 {
			t.Fatalf("Submit = %d, %v; want 70", got, err)
		}
		if waited := time.Since(start); waited < wait {
			t.Errorf("written after %v, before the wait of %v for company was over", waited, wait)
		}
	})
	t.Run("WhileMoreIsComing", func(t *testing.T) {
		t.Parallel()
		s := newStore()
		w := newWriter(t, s, batch.Params[int, int]{Wait: wait, Coming: func() bool { return true }})
		start := time.Now()
		if got, err := w.Submit(context.Background(), 7); err != nil || got != 70 {
			t.Fatalf("Submit = %d, %v; want 70", got, err)
		}
		if waited := time.Since(start); waited < wait {
			t.Errorf("written after %v, before the wait of %v for company was over", waited, wait)
		}
	})
	t.Run("UntilFull", func(t *testing.T) {
		t.Parallel()
		s := newStore()
		w := newWriter(t, s, batch.Params[int, int]{Size: 2, Wait: time.Hour, Coming: func() bool { return true }})
		rs := []<-chan batch.Result[int]{submit(w, context.Background(), 1), submit(w, context.Background(), 2)}
		if diff := cmp.Diff([]int{10, 20}, values(t, rs)); diff != "" {
			t.Errorf("results (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]int{2}, s.sizes()); diff != "" {
			t.Errorf("write sizes (-want +got):\n%s", diff)
		}
	})
}

var errBoom = errors.New("boom")

// failOn fails every group holding v, and, unless alone, every group of more than one.
func failOn(v int, alone bool) func([]int) error {
	return func(group []int) error {
		if slices.Contains(group, v) || !alone && len(group) > 1 {
			return errBoom
		}
		return nil
	}
}

func TestWriterErrors(t *testing.T) {
	t.Parallel()
	t.Run("GroupErrorReachesEveryWaiter", func(t *testing.T) {
		t.Parallel()
		s := newStore()
		s.fail = failOn(3, true)
		w := newWriter(t, s, batch.Params[int, int]{Wait: time.Hour})
		plugged := hold(t, w, s)
		rs := queue(t, w, 1, 2, 3, 4, 5)
		release(s)
		<-plugged
		for i, r := range rs {
			if got := <-r; !errors.Is(got.Err, errBoom) {
				t.Errorf("submission %d told %v, want the group's error", i+1, got.Err)
			}
		}
		if diff := cmp.Diff([]int{1, 5}, s.sizes()); diff != "" {
			t.Errorf("write sizes (-want +got):\n%s", diff)
		}
	})
	t.Run("SplitIsolatesTheBadItem", func(t *testing.T) {
		t.Parallel()
		s := newStore()
		s.fail = failOn(3, false)
		w := newWriter(t, s, batch.Params[int, int]{Wait: time.Hour, Split: func(err error) bool { return errors.Is(err, errBoom) }})
		plugged := hold(t, w, s)
		rs := queue(t, w, 1, 2, 3, 4)
		release(s)
		<-plugged
		var errs []bool
		for _, r := range rs {
			got := <-r
			errs = append(errs, got.Err != nil)
		}
		if diff := cmp.Diff([]bool{false, false, true, false}, errs); diff != "" {
			t.Errorf("failed submissions (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]int{1, 4, 1, 1, 1, 1}, s.sizes()); diff != "" {
			t.Errorf("write sizes (-want +got):\n%s", diff)
		}
	})
	t.Run("ItemErrorReachesItsWaiterOnly", func(t *testing.T) {
		t.Parallel()
		w := batch.New(batch.Params[int, int]{Write: func(_ context.Context, group []int) ([]batch.Result[int], error) {
			out := make([]batch.Result[int], len(group))
			for i, v := range group {
				if v == 2 {
					out[i].Err = errBoom
				}
			}
			return out, nil
		}})
		t.Cleanup(w.Close)
		for v, want := range map[int]error{1: nil, 2: errBoom} {
			if _, err := w.Submit(context.Background(), v); !errors.Is(err, want) {
				t.Errorf("Submit(%d): %v, want %v", v, err, want)
			}
		}
	})
}

// Close refuses new submissions at once, and answers every submission made
// before it, written without waiting for company.
func TestWriterCloseAnswersEveryWaiter(t *testing.T) {
	t.Parallel()
	s := newStore()
	w := newWriter(t, s, batch.Params[int, int]{Wait: time.Hour})
	plugged := hold(t, w, s)
	rs := queue(t, w, 1, 2, 3, 4, 5)
	closed := make(chan struct{})
	go func() { w.Close(); close(closed) }()
	gone, cancel := context.WithCancel(context.Background())
	cancel() // refused unqueued either way: ErrClosed once Close has begun, else Canceled
	waitUntil(t, "Close refuses submissions", func() bool {
		_, err := w.Submit(gone, 0)
		return errors.Is(err, batch.ErrClosed)
	})
	for i, r := range rs {
		if answered(r) {
			t.Fatalf("submission %d answered while the only slot is held (the test's premise)", i+1)
		}
	}
	release(s)
	<-closed
	<-plugged
	if diff := cmp.Diff([]int{10, 20, 30, 40, 50}, values(t, rs)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if _, err := w.Submit(context.Background(), 6); !errors.Is(err, batch.ErrClosed) {
		t.Errorf("Submit after Close: %v, want ErrClosed", err)
	}
	w.Close() // a second Close is harmless
}

// A submitter that leaves before its group is written is told its ctx's error,
// and its item is left out of the group.
func TestWriterSkipsWaitersThatLeft(t *testing.T) {
	t.Parallel()
	s := newStore()
	w := newWriter(t, s, batch.Params[int, int]{Wait: time.Hour})
	plugged := hold(t, w, s)
	ctx, cancel := context.WithCancel(context.Background())
	left := submit(w, ctx, 1)
	waitUntil(t, "the submission is queued", func() bool { return w.Queued() == 1 })
	stays := queue(t, w, 2)
	cancel()
	if got := <-left; !errors.Is(got.Err, context.Canceled) {
		t.Errorf("the submitter that left was told %v, want context.Canceled", got.Err)
	}
	release(s)
	<-plugged
	if diff := cmp.Diff([]int{20}, values(t, stays)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]int{{plug}, {2}}, s.written()); diff != "" {
		t.Errorf("groups written (-want +got):\n%s", diff)
	}
}

// After runs once the group's waiters have been answered: whatever it does, it
// does not hold them up.
func TestWriterAfterFollowsTheAnswers(t *testing.T) {
	t.Parallel()
	s := newStore()
	after := make(chan []batch.Result[int], 1)
	unblock := make(chan struct{})
	w := newWriter(t, s, batch.Params[int, int]{After: func(rs []batch.Result[int]) {
		after <- rs
		<-unblock
	}})
	t.Cleanup(func() { close(unblock) }) // before Close, which waits for After
	if got, err := w.Submit(context.Background(), 4); err != nil || got != 40 {
		t.Fatalf("Submit = %d, %v; want 40", got, err)
	}
	if diff := cmp.Diff([]batch.Result[int]{{Value: 40}}, <-after, cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
		t.Errorf("After's results (-want +got):\n%s", diff)
	}
}

// A group's write lasts as long as its most patient waiter.
func TestWriterContextOutlastsEachWaiter(t *testing.T) {
	t.Parallel()
	deadlines := make(chan time.Time, 1)
	w := batch.New(batch.Params[int, int]{Timeout: time.Hour, Write: func(ctx context.Context, group []int) ([]batch.Result[int], error) {
		dl, _ := ctx.Deadline()
		deadlines <- dl
		return make([]batch.Result[int], len(group)), nil
	}})
	t.Cleanup(w.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := w.Submit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if dl := <-deadlines; time.Until(dl) < 50*time.Second {
		t.Errorf("the write's deadline is %v away, want the waiter's minute", time.Until(dl))
	}
	if _, err := w.Submit(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if dl := <-deadlines; time.Until(dl) < 50*time.Minute {
		t.Errorf("the write's deadline is %v away, want the hour of Timeout", time.Until(dl))
	}
}

func BenchmarkWriter(b *testing.B) {
	w := batch.New(batch.Params[int, int]{Writers: 2, Write: func(_ context.Context, group []int) ([]batch.Result[int], error) {
		return make([]batch.Result[int], len(group)), nil
	}})
	defer w.Close()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := w.Submit(context.Background(), 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}
