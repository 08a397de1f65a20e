package ledger

import (
	"net/http"
	"sync"
	"time"

	"github.com/oncehook/oncehook/internal/settings"
)

// A breaker per destination (docs/destinations.md, "When a destination is
// down"): closed (calls go out), open (the destination is unwell: its due actions
// are parked, neither claimed nor failed, and keep their budget), half-open (one
// probe is out; its answer closes or reopens it). Every process shares its state
// through the destination's row; each process counts its own calls (Tally), so
// counting writes nothing and the only shared write is a change of state.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half_open"
)

// Health is what one answer says of the destination itself, not of the request.
type Health int

const (
	// Well: the destination answered (a success, or a 4xx about this request).
	Well Health = iota
	// Unwell: a timeout, a refused or reset connection, a TLS or DNS failure, a 5xx.
	Unwell
	// RateLimited: a 429 (or an errors rule's rate_limited): unwell only when
	// it keeps coming after the wait the destination asked for (Tally.Add).
	RateLimited
)

// HealthOf reads an outcome of a call to a destination of type destType.
func HealthOf(destType string, out Outcome) Health {
	s := out.HTTPStatus
	if destType == settings.DestinationSMTP {
		switch {
		case s == 0 && (out.Observed == ObsThrottled || out.Observed == ObsUnsure):
			return Unwell // no connection, or it broke off
		case s == 421: // "service not available, closing transmission channel"
			return Unwell
		}
		return Well // other SMTP replies are about the message
	}
	switch {
	case s == 0 && (out.Observed == ObsThrottled || out.Observed == ObsUnsure):
		return Unwell
	case s == http.StatusTooManyRequests, out.Observed == ObsThrottled && s >= 400 && s < 500:
		return RateLimited
	case s >= 500:
		return Unwell
	}
	return Well
}

// LookupHealth reads a reconcile's lookup: one that failed without an answer
// or with a 5xx is unwell; found and absent are well.
func LookupHealth(r LookupResult) Health {
	switch {
	case !r.Unsure:
		return Well
	case r.HTTPStatus == http.StatusTooManyRequests:
		return RateLimited
	case r.HTTPStatus == 0 || r.HTTPStatus >= 500:
		return Unwell
	}
	return Well
}

// tallyBuckets is how many parts the window is counted in: it slides by a tenth.
const tallyBuckets = 10

// Tally is one process's count of its calls to one destination over the
// breaker's window. It is safe for concurrent use.
type Tally struct {
	mu      sync.Mutex
	s       settings.BreakerSettings
	buckets [tallyBuckets]tallyBucket
	// waits are the last waits rate limits asked for: when each answer came
	// (at) and until when it asked to wait.
	waits []rateWait
}

type rateWait struct{ at, until time.Time }

// maxWaits is how many rate-limit waits a tally remembers.
const maxWaits = 16

type tallyBucket struct {
	start         int64 // the bucket's start, in bucket widths since the epoch
	calls, unwell int
}

// NewTally returns an empty tally for settings s (their defaults filled in).
func NewTally(s settings.BreakerSettings) *Tally { return &Tally{s: s.OrDefault()} }

// Add counts one answer to a call sent at sent and answered at now, and reports
// whether the breaker should open: at least MinCalls over the window, at least
// FailureRate of them unwell. A rate-limited answer counts as unwell only when
// the call was sent after the end of the wait an earlier one asked for
// (retryAfter, zero when it named none); within that wait it is the limit
// working, and is not counted at all.
func (t *Tally) Add(sent, now time.Time, h Health, retryAfter time.Duration) (open bool, calls, unwell int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if h == RateLimited {
		waited := t.waitedOut(sent)
		t.waits = append(t.waits, rateWait{at: now, until: now.Add(retryAfter)})
		if len(t.waits) > maxWaits {
			t.waits = t.waits[1:]
		}
		if !waited {
			calls, unwell = t.sums(now)
			return false, calls, unwell
		}
		h = Unwell
	}
	b := t.bucket(now)
	b.calls++
	if h == Unwell {
		b.unwell++
	}
	calls, unwell = t.sums(now)
	open = !t.s.Off && calls >= t.s.MinCalls && float64(unwell) >= t.s.FailureRate*float64(calls)
	return open, calls, unwell
}

// Reset forgets every call counted: the breaker changed state, and what
// happens next is counted afresh.
func (t *Tally) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buckets = [tallyBuckets]tallyBucket{}
	t.waits = nil
}

// waitedOut reports whether a call sent at sent came after the end of every
// wait a rate limit had asked for by then, and some wait had been asked for.
func (t *Tally) waitedOut(sent time.Time) bool {
	asked := false
	for _, w := range t.waits {
		if w.at.After(sent) {
			continue
		}
		if sent.Before(w.until) {
			return false
		}
		asked = true
	}
	return asked
}

func (t *Tally) width() int64 { return max(int64(t.s.Window/tallyBuckets), 1) }

// bucket returns the bucket now falls in, emptied when it last held an older part
// of time.
func (t *Tally) bucket(now time.Time) *tallyBucket {
	n := now.UnixNano() / t.width()
	b := &t.buckets[n%tallyBuckets]
	if b.start != n {
		*b = tallyBucket{start: n}
	}
	return b
}

// sums adds the buckets within the window ending at now.
func (t *Tally) sums(now time.Time) (calls, unwell int) {
	n := now.UnixNano() / t.width()
	for _, b := range t.buckets {
		if b.start > n-tallyBuckets && b.start <= n {
			calls, unwell = calls+b.calls, unwell+b.unwell
		}
	}
	return calls, unwell
}

// Breaker is a destination's breaker as the workers, the pages and the API see it.
type Breaker struct {
	Destination string
	State       string
	Since       time.Time
	Reason      string     // the last unwell outcome, in words
	OutageAt    *time.Time // when this outage began; nil while closed
	ProbeAt     *time.Time // open: when a probe may go
	OpenFor     time.Duration
	ProbeOwner  string
	ProbeUntil  *time.Time // half-open: the probe's lease
	LastProbeAt *time.Time
	LastProbe   string
}

// Parks reports whether the breaker keeps its destination's due actions from
// being claimed: open or half-open.
func (b Breaker) Parks() bool { return b.State == BreakerOpen || b.State == BreakerHalfOpen }

// ProbeDue reports whether a process may take the probe at now: the wait of an
// open breaker has passed, or a half-open one's probe lease lapsed (its process
// died before the answer).
func (b Breaker) ProbeDue(now time.Time) bool {
	switch b.State {
	case BreakerOpen:
		return b.ProbeAt != nil && !now.Before(*b.ProbeAt)
	case BreakerHalfOpen:
		return b.ProbeUntil == nil || now.After(*b.ProbeUntil)
	}
	return false
}
