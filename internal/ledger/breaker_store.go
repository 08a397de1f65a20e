package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/settings"
)

// BreakerActorWorkers names the workers in a breaker's transitions, where a
// person's change names the person.
const BreakerActorWorkers = "oncehook"

// OpenBreaker opens the destination's breaker if it is closed, for s's OpenFor,
// and writes the transition and the outage (with its alerts, as plan says), in
// one transaction. It reports false, and writes nothing, when the breaker was
// not closed: another process opened it first.
func OpenBreaker(ctx context.Context, b db.Beginner, destination, reason string, s settings.BreakerSettings,
	plan AlertPlan) (bool, error) {
	s = s.OrDefault()
	reason = Truncate(reason, 500)
	opened := false
	err := db.WithTx(ctx, b, func(q *db.Queries) error {
		_, err := q.DestinationBreakerOpen(ctx, db.DestinationBreakerOpenParams{
			Name: destination, Reason: reason, OpenFor: s.OpenFor.Seconds()})
		if db.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		opened = true
		if err := q.BreakerTransitionInsert(ctx, db.BreakerTransitionInsertParams{Destination: destination,
			FromState: BreakerClosed, ToState: BreakerOpen, Reason: reason, Actor: BreakerActorWorkers}); err != nil {
			return err
		}
		return beginOutage(ctx, q, destination, reason, BreakerActorWorkers, plan)
	})
	if err != nil {
		return false, fmt.Errorf("open the breaker of %s: %w", destination, err)
	}
	return opened, nil
}

// Breakers reads every destination's breaker, by name. A destination without a
// row has a closed breaker and is not in the map.
func Breakers(ctx context.Context, q *db.Queries) (map[string]Breaker, error) {
	rows, err := q.DestinationBreakers(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the breakers: %w", err)
	}
	out := make(map[string]Breaker, len(rows))
	for _, r := range rows {
		out[r.Name] = breakerOf(r)
	}
	return out, nil
}

// BreakerTransition is one change of a breaker.
type BreakerTransition struct {
	At               time.Time
	FromState, State string
	Reason, Actor    string
}

// BreakerTransitions reads the destination's latest n changes, newest first.
func BreakerTransitions(ctx context.Context, q *db.Queries, destination string, n int) ([]BreakerTransition, error) {
	rows, err := q.BreakerTransitionList(ctx, db.BreakerTransitionListParams{Destination: destination, MaxRows: int32(n)})
	if err != nil {
		return nil, fmt.Errorf("read the changes of %s's breaker: %w", destination, err)
	}
	out := make([]BreakerTransition, len(rows))
	for i, r := range rows {
		out[i] = BreakerTransition{At: r.At, FromState: r.FromState, State: r.ToState, Reason: r.Reason, Actor: r.Actor}
	}
	return out, nil
}

// TakeBreakerProbe takes the destination's probe for worker, under a lease: the
// breaker goes half-open. It reports false when the probe is not due or another
// process took it, and otherwise the wait the breaker was at.
func TakeBreakerProbe(ctx context.Context, b db.Beginner, destination, worker string, lease time.Duration) (time.Duration, bool, error) {
	var wait time.Duration
	took := false
	err := db.WithTx(ctx, b, func(q *db.Queries) error {
		from, reason := BreakerOpen, "its wait has passed: one probe goes"
		secs, err := q.DestinationBreakerProbeTake(ctx, db.DestinationBreakerProbeTakeParams{
			Name: destination, Worker: worker, LeaseSeconds: lease.Seconds()})
		if db.IsNotFound(err) {
			from, reason = BreakerHalfOpen, "the last probe's process did not answer in time: probed again"
			secs, err = q.DestinationBreakerProbeRetake(ctx, db.DestinationBreakerProbeRetakeParams{
				Name: destination, Worker: worker, LeaseSeconds: lease.Seconds()})
		}
		if db.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		took, wait = true, time.Duration(secs*float64(time.Second))
		return q.BreakerTransitionInsert(ctx, db.BreakerTransitionInsertParams{Destination: destination,
			FromState: from, ToState: BreakerHalfOpen, Reason: reason, Actor: BreakerActorWorkers})
	})
	if err != nil {
		return 0, false, fmt.Errorf("take the probe of %s: %w", destination, err)
	}
	return wait, took, nil
}

// ReopenBreaker opens the half-open breaker whose probe worker holds again, for
// wait: the probe's answer was unwell. It reports false when worker no longer
// holds the probe.
func ReopenBreaker(ctx context.Context, b db.Beginner, destination, worker, answer string, wait time.Duration) (bool, error) {
	answer = Truncate(answer, 500)
	ok := false
	err := db.WithTx(ctx, b, func(q *db.Queries) error {
		_, err := q.DestinationBreakerReopen(ctx, db.DestinationBreakerReopenParams{Name: destination, Worker: worker,
			Reason: answer, Answer: answer, OpenFor: wait.Seconds()})
		if db.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		ok = true
		return q.BreakerTransitionInsert(ctx, db.BreakerTransitionInsertParams{Destination: destination,
			FromState: BreakerHalfOpen, ToState: BreakerOpen, Reason: "the probe: " + answer + "; next in " + wait.String(),
			Actor: BreakerActorWorkers})
	})
	if err != nil {
		return false, fmt.Errorf("reopen the breaker of %s: %w", destination, err)
	}
	return ok, nil
}

// CloseBreaker closes the half-open breaker whose probe worker holds, and
// releases its parked actions with release and ends its outage (its recovery
// told as plan says) in the same transaction. It reports how many it released,
// and false when worker no longer holds the probe (nothing changed).
func CloseBreaker(ctx context.Context, b db.Beginner, destination, worker, answer string, plan AlertPlan,
	release func(q *db.Queries) (int64, error)) (int64, bool, error) {
	var released int64
	ok := false
	err := db.WithTx(ctx, b, func(q *db.Queries) error {
		released, ok = 0, false
		_, err := q.DestinationBreakerClose(ctx, db.DestinationBreakerCloseParams{Name: destination, Worker: worker,
			Answer: Truncate(answer, 500)})
		if db.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		ok = true
		if released, err = release(q); err != nil {
			return fmt.Errorf("release parked actions: %w", err)
		}
		if err := q.BreakerTransitionInsert(ctx, db.BreakerTransitionInsertParams{Destination: destination,
			FromState: BreakerHalfOpen, ToState: BreakerClosed,
			Reason: fmt.Sprintf("the probe: %s; %d parked actions released", answer, released), Actor: BreakerActorWorkers}); err != nil {
			return err
		}
		return endOutage(ctx, q, destination, plan)
	})
	if err != nil {
		return 0, false, fmt.Errorf("close the breaker of %s: %w", destination, err)
	}
	return released, ok, nil
}

// OpenBreakerByHand opens the destination's breaker for a person (actor), as a
// planned maintenance: its due actions are parked as in an outage, and no probe
// goes before until (nil: none until a person closes it); at until it goes
// half-open and probes first, as any open breaker does, waiting s's OpenFor
// after a probe that finds it unwell. An open breaker stays open with the
// person's reason and until. The transition names the person and why; the
// outage begins (alerts told) unless one is going on.
func OpenBreakerByHand(ctx context.Context, b db.Beginner, destination, actor, reason string, until *time.Time,
	s settings.BreakerSettings, plan AlertPlan) error {
	s = s.OrDefault()
	why := Truncate("opened by hand by "+actor+": "+reason, 500)
	err := db.WithTx(ctx, b, func(q *db.Queries) error {
		from := BreakerClosed
		if bs, err := Breakers(ctx, q); err != nil {
			return err
		} else if br, ok := bs[destination]; ok {
			from = br.State
		}
		if err := q.DestinationBreakerHandOpen(ctx, db.DestinationBreakerHandOpenParams{Name: destination, Reason: why,
			Until: until, OpenFor: s.OpenFor.Seconds()}); err != nil {
			return err
		}
		note := reason
		if until != nil {
			note += "; probes from " + until.UTC().Format("2006-01-02 15:04 UTC")
		} else {
			note += "; no probe until closed by hand"
		}
		if err := q.BreakerTransitionInsert(ctx, db.BreakerTransitionInsertParams{Destination: destination,
			FromState: from, ToState: BreakerOpen, Reason: Truncate(note, 500), Actor: actor}); err != nil {
			return err
		}
		return beginOutage(ctx, q, destination, why, actor, plan)
	})
	if err != nil {
		return fmt.Errorf("open the breaker of %s by hand: %w", destination, err)
	}
	return nil
}

// CloseBreakerByHand closes the destination's breaker for a person (actor):
// its parked actions are released with release, its outage ends (its recovery
// told), and the transition names the person and why, in one transaction. It
// reports how many actions it released, and false when the breaker was closed
// (nothing changed).
func CloseBreakerByHand(ctx context.Context, b db.Beginner, destination, actor, reason string, plan AlertPlan,
	release func(q *db.Queries) (int64, error)) (int64, bool, error) {
	var released int64
	ok := false
	err := db.WithTx(ctx, b, func(q *db.Queries) error {
		released, ok = 0, false
		from := BreakerClosed
		if bs, err := Breakers(ctx, q); err != nil {
			return err
		} else if br, found := bs[destination]; found {
			from = br.State
		}
		if _, err := q.DestinationBreakerHandClose(ctx, destination); db.IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		ok = true
		var err error
		if released, err = release(q); err != nil {
			return fmt.Errorf("release parked actions: %w", err)
		}
		if err := q.BreakerTransitionInsert(ctx, db.BreakerTransitionInsertParams{Destination: destination,
			FromState: from, ToState: BreakerClosed,
			Reason: Truncate(fmt.Sprintf("closed by hand: %s; %d parked actions released", reason, released), 500),
			Actor:  actor}); err != nil {
			return err
		}
		return endOutage(ctx, q, destination, plan)
	})
	if err != nil {
		return 0, false, fmt.Errorf("close the breaker of %s by hand: %w", destination, err)
	}
	return released, ok, nil
}
