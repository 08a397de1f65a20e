package review

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// BreakerChange is what a person asks of a destination's breaker: open it
// (until a time, or until closed by hand) or close it, and why.
type BreakerChange struct {
	State  string // ledger.BreakerOpen or ledger.BreakerClosed
	Reason string
	Until  *time.Time // open only: when it may probe again; nil for never
}

// BreakerResult is what a change of a breaker by hand did, and what waits.
type BreakerResult struct {
	Destination string
	State       string
	Until       *time.Time
	Released    int64           // actions released by a close
	Waiting     []ClientWaiting // the actions that wait for the destination, by client
}

// ClientWaiting is how many actions of a client wait for a destination.
type ClientWaiting struct {
	Client  string
	Actions int64
}

// MaxBreakerHold is how far ahead a breaker may be opened by hand until.
const MaxBreakerHold = 30 * 24 * time.Hour

// checkBreakerChange refuses a change that is not one: its state, its reason,
// its until.
func (r *Review) checkBreakerChange(actor ledger.Actor, name string, ch BreakerChange) error {
	if actor.Role != settings.RoleAdmin {
		return ledger.Errorf(ledger.EFORBIDDEN, "Only admins open or close a breaker: a destination serves every client.")
	}
	if _, ok := r.cfg.Destination(name); !ok {
		return ledger.Errorf(ledger.ENOTFOUND, "No destination is named %q.", name)
	}
	if strings.TrimSpace(ch.Reason) == "" {
		return ledger.Errorf(ledger.EINVALID, "Say why: a breaker changed by hand needs a reason.")
	}
	switch ch.State {
	case ledger.BreakerOpen:
		if ch.Until != nil && !ch.Until.After(r.now()) {
			return ledger.Errorf(ledger.EINVALID, "Until (%s) is past: open it until a later time, or with no until.",
				ch.Until.UTC().Format("2006-01-02 15:04 UTC"))
		}
		if ch.Until != nil && ch.Until.Sub(r.now()) > MaxBreakerHold {
			return ledger.Errorf(ledger.EINVALID, "Until is more than %d days ahead.", int(MaxBreakerHold.Hours()/24))
		}
	case ledger.BreakerClosed:
		if ch.Until != nil {
			return ledger.Errorf(ledger.EINVALID, "Until goes with opening, not closing.")
		}
	default:
		return ledger.Errorf(ledger.EINVALID, "The state is open or closed, not %q.", ch.State)
	}
	return nil
}

// WaitingFor counts the actions that wait for the destination, by client: what
// a change of its breaker holds back or lets go, shown before and after it.
func (r *Review) WaitingFor(ctx context.Context, name string) ([]ClientWaiting, error) {
	rows, err := db.New(r.pool).ActionWaitingByClient(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("count the actions waiting for %s: %w", name, err)
	}
	out := make([]ClientWaiting, len(rows))
	for i, w := range rows {
		out[i] = ClientWaiting{Client: w.Client, Actions: w.Waiting}
	}
	return out, nil
}

// SetBreaker opens or closes a destination's breaker by hand (admins only): a
// planned maintenance until a time, or closing it early when the destination
// is known to be back. The transition names who and why; an opening begins an
// outage (its alerts told) as the workers' does, a close ends it and releases
// the parked actions.
func (r *Review) SetBreaker(ctx context.Context, actor ledger.Actor, name string, ch BreakerChange) (BreakerResult, error) {
	if err := r.checkBreakerChange(actor, name, ch); err != nil {
		return BreakerResult{}, err
	}
	d, _ := r.cfg.Destination(name)
	plan := ledger.AlertPlanOf(r.cfg, name)
	res := BreakerResult{Destination: name, State: ch.State, Until: ch.Until}
	switch ch.State {
	case ledger.BreakerOpen:
		if err := ledger.OpenBreakerByHand(ctx, r.pool, name, actor.Label(), ch.Reason, ch.Until, d.Breaker, plan); err != nil {
			return res, err
		}
	case ledger.BreakerClosed:
		released, ok, err := ledger.CloseBreakerByHand(ctx, r.pool, name, actor.Label(), ch.Reason, plan,
			func(q *db.Queries) (int64, error) {
				return r.store.ReleaseParked(ctx, q, name, r.now(), q.ActionClientsWithWork)
			})
		if err != nil {
			return res, err
		}
		if !ok {
			return res, ledger.Errorf(ledger.ECONFLICT, "The breaker of %s is closed already.", name)
		}
		res.Released = released
		r.wakeWork.Send()
	}
	var err error
	res.Waiting, err = r.WaitingFor(ctx, name)
	return res, err
}
