package performer

import (
	"context"
	"fmt"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
)

// reconcile finds out whether an uncertain call took effect before anything is
// repeated: a lookup where the destination has one, else the destination's memory
// of the idempotency key, else a person.
func (pf *Performer) reconcile(ctx context.Context, c claim) error {
	a := c.a
	dest, ok := pf.p.Clients[a.Destination]
	if !ok {
		return pf.record(a, 0, ledger.Outcome{Observed: ledger.ObsUnknowable, Detail: "destination " + a.Destination + " is not configured"})
	}
	caps := dest.Capabilities()
	if !caps.Lookup {
		out := ledger.ReconcileWithoutLookup(a, caps, pf.now())
		pf.p.Metrics.Reconcile(out.Observed)
		return pf.record(a, 0, out)
	}
	attemptID, err := pf.startLookup(ctx, a)
	if err != nil {
		return err
	}
	sent := time.Now()
	callCtx, span := pf.startCallSpan(ctx, "oncehook.lookup", a)
	r := dest.Lookup(callCtx, ledger.SentKey(a))
	c.answered()
	out := ledger.LookupOutcome(a, r, caps, pf.now())
	endCallSpan(span, out.Observed, r.HTTPStatus)
	pf.p.Metrics.Reconcile(out.Observed)
	if h := ledger.LookupHealth(r); c.probe != nil {
		c.probe(h, lookupAnswer(r))
	} else {
		pf.breakers.observe(ctx, a.Destination, sent, h, 0, lookupAnswer(r))
	}
	return pf.record(a, attemptID, out)
}

// startLookup writes a lookup attempt as started, in a transaction that commits
// before the destination is asked. It fails when this worker no longer holds the lease.
func (pf *Performer) startLookup(ctx context.Context, a db.Action) (int64, error) {
	var id int64
	err := db.WithTx(ctx, pf.pool, func(q *db.Queries) error {
		held, err := q.ActionRenewLease(ctx, db.ActionRenewLeaseParams{
			Client: a.Client, ID: a.ID, Worker: &pf.p.Worker, LeaseSeconds: pf.leaseFor(a.Destination),
			LeaseToken: a.LeaseToken,
		})
		if err != nil {
			return fmt.Errorf("renew lease: %w", err)
		}
		if held == 0 {
			return fmt.Errorf("action %d: this worker no longer holds its lease", a.ID)
		}
		id, err = q.AttemptStart(ctx, db.AttemptStartParams{
			Client: a.Client, ActionID: a.ID, Kind: "lookup", OperationKey: ledger.SentKey(a), Worker: pf.p.Worker,
			PartDay: a.RowsDay,
		})
		if err != nil {
			return fmt.Errorf("write started lookup: %w", err)
		}
		return nil
	})
	return id, err
}

// RecoverLeases sweeps expired leases through the decision table (leaseObservation):
// a claim that never started a call is pending again; a started call, or a claim
// made to reconcile, is uncertain. It also releases held actions whose destination
// is connected (ActionReleaseStrayHeld). Safe to run in every process at once. It
// returns how many leases it recovered.
func (pf *Performer) RecoverLeases(ctx context.Context) (int, error) {
	var n, released int
	err := db.WithTx(ctx, pf.pool, func(q *db.Queries) error {
		n = 0
		// One client at a time: a lock names the client (see lanes). The
		// decisions are written together.
		var p db.ActionRecoverLeasesParams
		for _, client := range pf.lanes.All(ctx) {
			expired, err := q.ActionLockExpiredLeases(ctx, client)
			if err != nil {
				return fmt.Errorf("find expired leases: %w", err)
			}
			if err := pf.decideLeases(ctx, q, expired, &p); err != nil {
				return err
			}
		}
		k, err := pf.recoverLeases(ctx, q, p)
		if n = k; err != nil {
			return err
		}
		if released, err = pf.releaseStrayHeld(ctx, q); err != nil {
			return err
		}
		return pf.holdStray(ctx, q)
	})
	if err == nil && n+released > 0 {
		pf.performers.Send() // after the commit: see ledger.NewWakeup
	}
	if n > 0 {
		pf.logger.Info("recovered expired leases", "actions", n)
	}
	return n, err
}

// decideLeases adds to p the decision for each expired lease, and closes the calls
// started under them, with their audit entries.
func (pf *Performer) decideLeases(ctx context.Context, q *db.Queries, expired []db.ActionLockExpiredLeasesRow,
	p *db.ActionRecoverLeasesParams) error {
	for _, r := range expired {
		d := ledger.LeaseDecision(r.Action, r.CallStarted, pf.planFor(r.Action), pf.now())
		p.Clients, p.Ids = append(p.Clients, r.Action.Client), append(p.Ids, r.Action.ID)
		p.States, p.Reasons = append(p.States, d.State), append(p.Reasons, ledger.Truncate(d.Reason, 1000))
		p.NextAttemptAts = append(p.NextAttemptAts, d.NextAttemptAt)
		p.RowsDays = append(p.RowsDays, r.Action.RowsDay)
		if !r.CallStarted {
			continue
		}
		if err := q.AttemptAbandonStarted(ctx, db.AttemptAbandonStartedParams{Client: r.Action.Client, ActionID: r.Action.ID}); err != nil {
			return fmt.Errorf("close abandoned attempt: %w", err)
		}
		if err := ledger.Audit(ctx, q, r.Action.Client, r.Action.ID, "worker", "recover", d.Reason, nil); err != nil {
			return err
		}
	}
	return nil
}

// recoverLeases writes the decisions of p (ActionRecoverLeases) and returns how
// many it wrote.
func (pf *Performer) recoverLeases(ctx context.Context, q *db.Queries, p db.ActionRecoverLeasesParams) (int, error) {
	if len(p.Ids) == 0 {
		return 0, nil
	}
	recovered, err := pf.store.RecoverLeases(ctx, q, p)
	if err != nil {
		return 0, fmt.Errorf("recover leases: %w", err)
	}
	for _, r := range recovered {
		pf.p.Metrics.LeaseRecovered(r.State)
	}
	return len(recovered), nil
}

// holdStray holds the waiting actions of disconnected destinations: created by
// a router whose transaction read the destination as connected and committed
// only after the disconnect had held the others (the reverse of
// releaseStrayHeld). No claim takes them, and without this they would wait
// unseen until a reconnect.
func (pf *Performer) holdStray(ctx context.Context, q *db.Queries) error {
	names, err := q.DestinationDisconnectedList(ctx)
	if err != nil {
		return fmt.Errorf("read disconnected destinations: %w", err)
	}
	for _, name := range names {
		if _, err := pf.store.HoldDestination(ctx, q, db.ActionHoldDestinationParams{Destination: name,
			Reason: "destination " + name + " is disconnected", States: ledger.HoldableStates}, pf.laneClients); err != nil {
			return fmt.Errorf("hold the waiting actions of %s: %w", name, err)
		}
	}
	return nil
}

// releaseStrayHeld releases held actions of connected destinations
// (ActionReleaseStrayHeld) and returns how many.
func (pf *Performer) releaseStrayHeld(ctx context.Context, q *db.Queries) (int, error) {
	released, err := pf.store.ReleaseStrayHeld(ctx, q, pf.laneClients)
	if err != nil {
		return 0, fmt.Errorf("release held actions of connected destinations: %w", err)
	}
	n := len(released)
	if n > 0 {
		pf.logger.Info("released held actions of connected destinations", "actions", n)
	}
	return n, nil
}

// Finish lets calls in flight finish within the grace period, then hands back the
// claims this performer never started.
func (pf *Performer) Finish(ctx context.Context) error {
	done := make(chan struct{})
	go func() { pf.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(pf.p.Grace):
		pf.logger.Warn("calls still in flight after the grace period; their started attempts will be reconciled")
	}
	releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return pf.releaseLeases(releaseCtx)
}

// releaseLeases hands back this worker's claims that never started a call.
func (pf *Performer) releaseLeases(ctx context.Context) error {
	ids, err := pf.store.ReleaseLeases(ctx, db.New(pf.pool), pf.p.Worker, pf.laneClients)
	if err != nil {
		return fmt.Errorf("release leases: %w", err)
	}
	n := len(ids)
	if n > 0 {
		pf.logger.Info("released unstarted claims", "actions", n)
	}
	return nil
}

// laneClients is every client of the lanes: the clients the statements over
// every client's actions run for one at a time, on Citus (store.Clients).
func (pf *Performer) laneClients(ctx context.Context) ([]string, error) {
	return pf.lanes.All(ctx), nil
}
