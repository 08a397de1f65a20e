package oncehook

import (
	"context"
	"fmt"
	"time"

	"github.com/oncehook/oncehook/db"
)

// planFor is the retry budget of an action as the decision table needs it.
func (e *Engine) planFor(a db.Action) RetryPlan {
	first := e.now()
	if a.FirstAttemptAt != nil {
		first = *a.FirstAttemptAt
	}
	return RetryPlan{
		Attempts: int(a.Attempts), MaxAttempts: int(a.MaxAttempts), GiveUpAt: a.GiveUpAt,
		FirstAttempt: first, Owner: a.Owner, BackoffBase: e.p.BackoffBase, BackoffMax: e.p.BackoffMax,
	}
}

// record decides what an outcome means and writes it: the attempt's evidence and the
// action's next state, in one transaction, only while this worker holds the lease.
func (e *Engine) record(ctx context.Context, a db.Action, attemptID int64, out Outcome) error {
	d := Decide(out.Observed, e.planFor(a), out.Detail, out.RetryAfter, e.now())
	return e.commit(ctx, a, attemptID, out, d)
}

// commit writes a decision. It runs on a context of its own: a call that finished
// must be recorded even while the process is stopping. Storage trouble is retried
// briefly; if it persists the lease expires and recovery makes the action uncertain.
func (e *Engine) commit(ctx context.Context, a db.Action, attemptID int64, out Outcome, d Decision) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	var lost bool
	err := retryStorage(ctx, func() error {
		return db.WithTx(ctx, e.pool, func(q *db.Queries) error {
			var err error
			lost, err = e.writeDecision(ctx, q, a, attemptID, out, d)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("record outcome of action %d: %w", a.ID, err)
	}
	if lost {
		e.logger.Warn("lease lost before the outcome was recorded; the attempt keeps the evidence",
			"action_id", a.ID, "observed", string(out.Observed))
	}
	e.logger.Debug("action outcome", "action_id", a.ID, "observed", string(out.Observed), "state", d.State)
	return nil
}

func (e *Engine) writeDecision(ctx context.Context, q *db.Queries, a db.Action, attemptID int64, out Outcome, d Decision) (lost bool, err error) {
	if attemptID != 0 {
		var status *int32
		if out.HTTPStatus != 0 {
			s := int32(out.HTTPStatus)
			status = &s
		}
		if err := q.AttemptFinish(ctx, db.AttemptFinishParams{
			Client: a.Client, ID: attemptID, Observed: string(out.Observed), HttpStatus: status,
			Error: truncate(out.Detail, 1000), Evidence: out.ExternalRef,
		}); err != nil {
			return false, fmt.Errorf("finish attempt: %w", err)
		}
	}
	n, err := q.ActionRecord(ctx, db.ActionRecordParams{
		Client: a.Client, ID: a.ID, Worker: &e.p.Worker, State: d.State, Reason: truncate(d.Reason, 1000),
		NextAttemptAt: d.NextAttemptAt, ExternalRef: out.ExternalRef, Result: out.Result,
	})
	if err != nil {
		return false, fmt.Errorf("record action state: %w", err)
	}
	if n == 0 {
		return true, nil
	}
	switch d.State {
	case StateConfirmed:
		released, err := q.ActionReleaseSuccessors(ctx, db.ActionReleaseSuccessorsParams{Client: a.Client, AfterID: &a.ID})
		if err != nil {
			return false, fmt.Errorf("release successors: %w", err)
		}
		// NOTIFY serialises committing transactions on a server-wide lock: only
		// wake the performers when there is new work for them.
		if released > 0 {
			return false, q.Notify(ctx, channelActions)
		}
		return false, nil
	case StateHeld:
		return false, e.disconnect(ctx, q, a.Destination, out.Detail)
	case StateRetrying, StateUncertain:
		if !d.NextAttemptAt.After(e.now()) {
			return false, q.Notify(ctx, channelActions)
		}
	}
	return false, nil
}

// disconnect marks a destination whose credentials failed and holds its waiting
// actions: no further calls until an admin reconnects it.
func (e *Engine) disconnect(ctx context.Context, q *db.Queries, name, detail string) error {
	reason := "credentials refused: " + detail
	if err := q.DestinationSetStatus(ctx, db.DestinationSetStatusParams{Name: name, Status: "disconnected", Reason: truncate(reason, 500)}); err != nil {
		return fmt.Errorf("mark destination disconnected: %w", err)
	}
	if _, err := q.ActionHoldDestination(ctx, db.ActionHoldDestinationParams{
		Destination: name, Reason: "destination " + name + " is disconnected",
	}); err != nil {
		return fmt.Errorf("hold destination's actions: %w", err)
	}
	return nil
}

// retryStorage runs fn until it succeeds, fails for a reason other than storage
// being unavailable, or ctx ends.
func retryStorage(ctx context.Context, fn func() error) error {
	delay := 100 * time.Millisecond
	for {
		err := fn()
		if err == nil || !db.IsUnavailable(err) || ctx.Err() != nil {
			return err
		}
		sleepCtx(ctx, delay)
		delay = min(delay*2, 2*time.Second)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 { // do not cut a UTF-8 sequence
		n--
	}
	return s[:n] + "…"
}
