package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/oncehook/oncehook/db"
)

// BreakerActorWorkers names the workers in a breaker's transitions, where a
// person's change names the person.
const BreakerActorWorkers = "oncehook"

// OpenBreaker opens the destination's breaker if it is closed, for s's OpenFor,
// and writes the transition, in one transaction. It reports false, and writes
// nothing, when the breaker was not closed: another process opened it first.
func OpenBreaker(ctx context.Context, b db.Beginner, destination, reason string, s BreakerSettings) (bool, error) {
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
		return q.BreakerTransitionInsert(ctx, db.BreakerTransitionInsertParams{Destination: destination,
			FromState: BreakerClosed, ToState: BreakerOpen, Reason: reason, Actor: BreakerActorWorkers})
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
