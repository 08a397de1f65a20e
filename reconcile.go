package oncehook

import (
	"context"
	"fmt"
	"time"

	"github.com/oncehook/oncehook/db"
)

// reconcile finds out whether an uncertain call took effect before anything is
// repeated: a lookup where the destination has one, else the destination's memory
// of the idempotency key, else a person.
func (e *Engine) reconcile(ctx context.Context, c claim) error {
	a := c.a
	dest, ok := e.p.Destinations[a.Destination]
	if !ok {
		return e.record(a, 0, Outcome{Observed: ObsUnknowable, Detail: "destination " + a.Destination + " is not configured"})
	}
	caps := dest.Capabilities()
	now := e.now()
	if !caps.Lookup {
		out := reconcileWithoutLookup(a, caps, now)
		e.p.Metrics.Reconcile(out.Observed)
		return e.record(a, 0, out)
	}
	attemptID, err := e.startLookup(ctx, a)
	if err != nil {
		return err
	}
	r := dest.Lookup(ctx, a.OperationKey)
	c.answered()
	out := Outcome{HTTPStatus: r.HTTPStatus, Detail: r.Detail}
	switch {
	case r.Unsure && now.After(a.GiveUpAt):
		out.Observed = ObsUnknowable
		out.Detail = "lookups kept failing until the budget ran out: " + r.Detail
	case r.Unsure:
		// The lookup proves nothing: stay uncertain and look again later.
		d := Decision{State: StateUncertain, Rule: ruleOf[ObsUnsure],
			Reason:        "lookup failed, will look again: " + r.Detail,
			NextAttemptAt: now.Add(Backoff(2, e.p.BackoffBase, e.p.BackoffMax))}
		e.p.Metrics.Reconcile(ObsUnsure)
		return e.commit(a, attemptID, Outcome{Observed: ObsUnsure, HTTPStatus: r.HTTPStatus, Detail: r.Detail}, d)
	case r.Found:
		out.Observed, out.ExternalRef, out.Result = ObsFound, r.ExternalRef, r.Result
		out.Detail = "found by lookup"
	case caps.StrongLookup:
		out.Observed = ObsAbsentStrong
		out.Detail = "a strong lookup found no record with this key; retrying with the same key"
	default:
		out.Observed = ObsUnknowable
		out.Detail = "an eventual lookup found no record, which does not prove it was never created"
	}
	e.p.Metrics.Reconcile(out.Observed)
	return e.record(a, attemptID, out)
}

// reconcileWithoutLookup relies on the destination's key memory while it lasts.
func reconcileWithoutLookup(a db.Action, caps Capabilities, now time.Time) Outcome {
	if caps.KeyMemory > 0 && a.FirstAttemptAt != nil {
		age := now.Sub(*a.FirstAttemptAt)
		if caps.KeyRemembered(*a.FirstAttemptAt, now) {
			return Outcome{Observed: ObsKeyRemembered, Detail: fmt.Sprintf(
				"the key is %s old and the destination remembers keys for %s; retrying with the same key",
				age.Round(time.Second), caps.KeyMemory)}
		}
		return Outcome{Observed: ObsUnknowable, Detail: fmt.Sprintf(
			"no lookup exists and the destination's key memory (%s) has passed", caps.KeyMemory)}
	}
	if caps.KeyMemory > 0 { // never called: nothing can have happened
		return Outcome{Observed: ObsKeyRemembered, Detail: "no call was made yet"}
	}
	return Outcome{Observed: ObsUnknowable, Detail: "the destination offers no lookup and no key memory; check it by hand"}
}

// RecoverLeases sweeps expired leases, per the decision table: a claim that never
// started a call is pending again; a started call becomes uncertain. It also
// releases held actions whose destination is connected (ActionReleaseStrayHeld).
// Safe to run in every process at once. It returns how many leases it recovered.
func (e *Engine) RecoverLeases(ctx context.Context) (int, error) {
	var n int
	err := db.WithTx(ctx, e.pool, func(q *db.Queries) error {
		rows, err := q.ActionRecoverLeases(ctx)
		if err != nil {
			return fmt.Errorf("recover leases: %w", err)
		}
		n = len(rows)
		for _, r := range rows {
			e.p.Metrics.LeaseRecovered(r.State)
			if !r.CallStarted {
				continue
			}
			if err := q.AttemptAbandonStarted(ctx, db.AttemptAbandonStartedParams{Client: r.Client, ActionID: r.ID}); err != nil {
				return fmt.Errorf("close abandoned attempt: %w", err)
			}
			if err := audit(ctx, q, r.Client, r.ID, "worker", "recover",
				string(ObsLeaseStarted)+": reconcile before any repeat", nil); err != nil {
				return err
			}
		}
		released, err := q.ActionReleaseStrayHeld(ctx)
		if err != nil {
			return fmt.Errorf("release held actions of connected destinations: %w", err)
		}
		if len(released) > 0 {
			e.logger.Info("released held actions of connected destinations", "actions", len(released))
		}
		if n+len(released) > 0 {
			return q.Notify(ctx, channelActions)
		}
		return nil
	})
	if n > 0 {
		e.logger.Info("recovered expired leases", "actions", n)
	}
	return n, err
}

// releaseLeases hands back this worker's claims that never started a call.
func (e *Engine) releaseLeases(ctx context.Context) error {
	ids, err := db.New(e.pool).ActionReleaseLeases(ctx, &e.p.Worker)
	if err != nil {
		return fmt.Errorf("release leases: %w", err)
	}
	if len(ids) > 0 {
		e.logger.Info("released unstarted claims", "actions", len(ids))
	}
	return nil
}
