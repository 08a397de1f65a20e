package oncehook

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/oncehook/oncehook/db"
)

// performBatch claims as many due actions as there are free call slots and starts
// each in its own goroutine. It returns how many it claimed.
func (e *Engine) performBatch(ctx context.Context) (int, error) {
	free := cap(e.slots) - len(e.slots)
	if free == 0 {
		// Every slot is busy: wait for one to free, then claim for it at once
		// rather than sleeping until the next notification or poll.
		select {
		case e.slots <- struct{}{}:
			<-e.slots
		case <-ctx.Done():
			return 0, nil
		}
		free = max(cap(e.slots)-len(e.slots), 1)
	}
	var claimed []db.Action
	err := db.WithTx(ctx, e.pool, func(q *db.Queries) error {
		var err error
		claimed, err = q.ActionClaim(ctx, db.ActionClaimParams{
			MaxActions: int32(free), Worker: &e.p.Worker, LeaseSeconds: e.leaseFor(""),
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("claim actions: %w", err)
	}
	for _, a := range claimed {
		e.slots <- struct{}{}
		e.inflight.Add(1)
		go func() {
			defer func() { <-e.slots; e.inflight.Done() }()
			e.work(context.WithoutCancel(ctx), ctx, a)
		}()
	}
	return len(claimed), nil
}

// leaseFor is the lease for a call to the named destination: longer than its timeout,
// so a lease never expires while a live worker is still waiting for the reply.
func (e *Engine) leaseFor(destination string) float64 {
	timeout := 30 * time.Second
	if d, ok := e.cfg.Destination(destination); ok && d.Timeout > 0 {
		timeout = d.Timeout
	} else if destination == "" {
		timeout = e.maxTimeout()
	}
	return (timeout + e.p.LeaseExtra).Seconds()
}

func (e *Engine) maxTimeout() time.Duration {
	var m time.Duration
	for _, d := range e.cfg.Destinations {
		m = max(m, d.Timeout)
	}
	if m == 0 {
		m = 30 * time.Second
	}
	return m
}

// work performs or reconciles one claimed action. callCtx outlives a shutdown for the
// grace period; stopCtx ending means the process is stopping.
func (e *Engine) work(callCtx, stopCtx context.Context, a db.Action) {
	ctx, cancel := context.WithCancel(callCtx)
	defer cancel()
	go func() { // a call still running after the grace period is abandoned to recovery
		select {
		case <-ctx.Done():
		case <-stopCtx.Done():
			select {
			case <-ctx.Done():
			case <-time.After(e.p.Grace):
				cancel()
			}
		}
	}()
	stopRenew := e.renewLease(ctx, a)
	defer stopRenew()
	var err error
	if a.ClaimedFrom == StateUncertain {
		err = e.reconcile(ctx, a)
	} else {
		err = e.call(ctx, a)
	}
	if err != nil {
		e.logger.Warn("action step failed; its lease will expire and recovery decides",
			"action_id", a.ID, "err", err)
	}
}

// renewLease keeps the lease alive while the call is in flight.
func (e *Engine) renewLease(ctx context.Context, a db.Action) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	every := max(e.p.LeaseExtra/3, 50*time.Millisecond)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				q := db.New(e.pool)
				if _, err := q.ActionRenewLease(ctx, db.ActionRenewLeaseParams{
					Client: a.Client, ID: a.ID, Worker: &e.p.Worker, LeaseSeconds: e.leaseFor(a.Destination),
				}); err != nil && ctx.Err() == nil {
					e.logger.Debug("renew lease", "action_id", a.ID, "err", err)
				}
			}
		}
	}()
	return cancel
}

// call performs one attempt: the attempt is written and committed before the
// destination hears anything, the call runs outside any transaction, and the outcome
// is recorded through the decision table.
func (e *Engine) call(ctx context.Context, a db.Action) error {
	dest, ok := e.p.Destinations[a.Destination]
	if !ok {
		return e.record(ctx, a, 0, Outcome{Observed: ObsRejected, Detail: "destination " + a.Destination + " is not configured"})
	}
	params, err := e.fillResults(ctx, a)
	if err != nil {
		return err
	}
	attemptID, attempts, first, err := e.startAttempt(ctx, a, "call")
	if err != nil {
		return err
	}
	a.Attempts, a.FirstAttemptAt = attempts, &first
	start := time.Now()
	out := dest.Perform(ctx, Call{OperationKey: a.OperationKey, Params: params, ActionName: a.Name, BusinessKey: a.BusinessKey})
	e.p.Metrics.Attempt(a.Destination, out.Observed, time.Since(start))
	e.logger.Debug("destination called", "action_id", a.ID, "destination", a.Destination,
		"observed", string(out.Observed), "status", out.HTTPStatus)
	return e.record(ctx, a, attemptID, out)
}

// startAttempt counts the attempt and writes it as started, in one transaction that
// commits before the call. It fails when this worker no longer holds the lease.
func (e *Engine) startAttempt(ctx context.Context, a db.Action, kind string) (id int64, attempts int32, first time.Time, err error) {
	err = db.WithTx(ctx, e.pool, func(q *db.Queries) error {
		attempts, first = a.Attempts, e.now()
		if a.FirstAttemptAt != nil {
			first = *a.FirstAttemptAt
		}
		if kind == "call" {
			row, err := q.ActionStartCall(ctx, db.ActionStartCallParams{Client: a.Client, ID: a.ID, Worker: &e.p.Worker})
			if err != nil {
				return fmt.Errorf("count attempt (lease lost?): %w", err)
			}
			attempts = row.Attempts
			if row.FirstAttemptAt != nil {
				first = *row.FirstAttemptAt
			}
		}
		id, err = q.AttemptStart(ctx, db.AttemptStartParams{
			Client: a.Client, ActionID: a.ID, Kind: kind, OperationKey: a.OperationKey, Worker: e.p.Worker,
		})
		if err != nil {
			return fmt.Errorf("write started attempt: %w", err)
		}
		return nil
	})
	return id, attempts, first, err
}

// fillResults adds the params that name a predecessor's result to the stored ones.
func (e *Engine) fillResults(ctx context.Context, a db.Action) (json.RawMessage, error) {
	rule, ok := e.cfg.Action(a.Name)
	if !ok || a.AfterID == nil {
		return a.Params, nil
	}
	var needs bool
	for _, p := range rule.Params {
		needs = needs || p.Result != ""
	}
	if !needs {
		return a.Params, nil
	}
	params := map[string]any{}
	if err := json.Unmarshal(a.Params, &params); err != nil {
		return nil, fmt.Errorf("decode stored params: %w", err)
	}
	chain, err := e.predecessors(ctx, a)
	if err != nil {
		return nil, err
	}
	for _, p := range rule.Params {
		if p.Result == "" {
			continue
		}
		pred, ok := chain[p.Result]
		if !ok {
			continue
		}
		if p.ResultPointer == "" {
			params[p.Name] = pred.ExternalRef
			continue
		}
		var doc any
		if len(pred.Result) > 0 {
			_ = json.Unmarshal(pred.Result, &doc)
		}
		params[p.Name], _ = Pointer(doc, p.ResultPointer)
	}
	b, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("encode params: %w", err)
	}
	return b, nil
}

// predecessors walks the after chain of a, by rule name.
func (e *Engine) predecessors(ctx context.Context, a db.Action) (map[string]db.Action, error) {
	q := db.New(e.pool)
	chain := map[string]db.Action{}
	for next := a.AfterID; next != nil && len(chain) < 32; {
		p, err := q.ActionGet(ctx, *next)
		if err != nil {
			return nil, fmt.Errorf("read predecessor %d: %w", *next, err)
		}
		chain[p.Name] = p
		next = p.AfterID
	}
	return chain, nil
}
