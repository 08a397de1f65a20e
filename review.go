package oncehook

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
)

// Roles of people and API tokens.
const (
	RoleAdmin    = "admin"
	RoleOperator = "operator"
)

// Actor is who asks for a manual act: a signed-in person or an API token.
type Actor struct {
	Name string // an email, or "token:<name>"
	Role string
}

// Review is the service behind the dashboard and the JSON API: the manual acts on
// actions and destinations, each guarded and written to the audit trail.
type Review struct {
	pool         *pgxpool.Pool
	cfg          *Config
	destinations map[string]DestinationClient
	now          func() time.Time
}

// NewReview returns the review service.
func NewReview(pool *pgxpool.Pool, cfg *Config, destinations map[string]DestinationClient) *Review {
	return &Review{pool: pool, cfg: cfg, destinations: destinations, now: time.Now}
}

// ActParams is the body of a manual act.
type ActParams struct {
	Note               string
	ExternalRef        string
	Owner              string
	CheckedDestination bool
}

// Retry asks the worker to perform a failed or uncertain action again with its
// original operation key. It is refused (ECONFLICT, with the reason) while a worker
// holds it, when it is in another state (naming who retried it, if someone just did),
// and when the destination's key memory has passed and no lookup exists, unless the
// person says they checked the destination and leaves a note.
func (r *Review) Retry(ctx context.Context, actor Actor, id int64, p ActParams) (db.Action, error) {
	return r.act(ctx, actor, id, "retry", func(q *db.Queries, a db.Action) (db.Action, error) {
		if err := r.retryGuard(a, p); err != nil {
			return a, err
		}
		rule, _ := r.cfg.Action(a.Name)
		attempts, within := rule.Retry.Attempts, rule.Retry.Within
		if attempts <= 0 {
			attempts, within = 8, 72*time.Hour
		}
		return q.ActionManualRetry(ctx, db.ActionManualRetryParams{
			Client: a.Client, ID: a.ID, Reason: "retry requested by " + actor.Name,
			BudgetAttempts: int32(attempts), WithinSeconds: within.Seconds(),
		})
	}, p, map[string]any{"operation_key": "", "checked_destination": p.CheckedDestination})
}

func (r *Review) retryGuard(a db.Action, p ActParams) error {
	if a.State != StateFailed && a.State != StateUncertain {
		return nil // the conditional update refuses it with the right words
	}
	dest, ok := r.destinations[a.Destination]
	if !ok || a.FirstAttemptAt == nil {
		return nil
	}
	caps := dest.Capabilities()
	if caps.Lookup || caps.KeyRemembered(*a.FirstAttemptAt, r.now()) {
		return nil
	}
	age := r.now().Sub(*a.FirstAttemptAt)
	if p.CheckedDestination && strings.TrimSpace(p.Note) != "" {
		return nil
	}
	memory := "no memory of idempotency keys"
	if caps.KeyMemory > 0 {
		memory = fmt.Sprintf("a key memory of %s, which has passed (first attempt %s ago)", caps.KeyMemory, age.Round(time.Second))
	}
	return Errorf(ECONFLICT, "Destination %s has %s and no lookup, so a retry could act twice. "+
		"Check the destination first, then retry with checked_destination and a note saying what you found.", a.Destination, memory)
}

// Reconcile asks the worker to look an uncertain or failed action up again now.
func (r *Review) Reconcile(ctx context.Context, actor Actor, id int64, p ActParams) (db.Action, error) {
	return r.act(ctx, actor, id, "reconcile", func(q *db.Queries, a db.Action) (db.Action, error) {
		return q.ActionManualReconcile(ctx, db.ActionManualReconcileParams{
			Client: a.Client, ID: a.ID, Reason: "reconcile requested by " + actor.Name,
		})
	}, p, nil)
}

// Resolve closes an action by hand with a note and optional evidence.
func (r *Review) Resolve(ctx context.Context, actor Actor, id int64, p ActParams) (db.Action, error) {
	if strings.TrimSpace(p.Note) == "" {
		return db.Action{}, Errorf(EINVALID, "Resolving needs a note saying how it was settled.")
	}
	return r.act(ctx, actor, id, "resolve", func(q *db.Queries, a db.Action) (db.Action, error) {
		b, err := q.ActionClose(ctx, db.ActionCloseParams{Client: a.Client, ID: a.ID, State: StateResolved,
			Reason: "resolved by " + actor.Name + ": " + p.Note, ExternalRef: p.ExternalRef})
		if err != nil {
			return b, err
		}
		// A resolved predecessor lets its waiting successors run.
		_, err = q.ActionReleaseSuccessors(ctx, db.ActionReleaseSuccessorsParams{Client: a.Client, AfterID: &a.ID})
		return b, err
	}, p, map[string]any{"external_ref": p.ExternalRef})
}

// Cancel closes an action that will not be performed.
func (r *Review) Cancel(ctx context.Context, actor Actor, id int64, p ActParams) (db.Action, error) {
	return r.act(ctx, actor, id, "cancel", func(q *db.Queries, a db.Action) (db.Action, error) {
		reason := "cancelled by " + actor.Name
		if p.Note != "" {
			reason += ": " + p.Note
		}
		b, err := q.ActionClose(ctx, db.ActionCloseParams{Client: a.Client, ID: a.ID, State: StateCancelled, Reason: reason})
		if err != nil {
			return b, err
		}
		return b, cancelSuccessors(ctx, q, a.Client, a.ID, actor.Name)
	}, p, nil)
}

// Assign names the owner of an action. Admins only.
func (r *Review) Assign(ctx context.Context, actor Actor, id int64, p ActParams) (db.Action, error) {
	if actor.Role != RoleAdmin {
		return db.Action{}, Errorf(EFORBIDDEN, "Only admins can assign actions.")
	}
	if strings.TrimSpace(p.Owner) == "" {
		return db.Action{}, Errorf(EINVALID, "Assigning needs an owner.")
	}
	return r.act(ctx, actor, id, "assign", func(q *db.Queries, a db.Action) (db.Action, error) {
		return q.ActionAssign(ctx, db.ActionAssignParams{Client: a.Client, ID: a.ID, Owner: strings.TrimSpace(p.Owner)})
	}, p, map[string]any{"owner": p.Owner, "previous_owner": ""})
}

// act runs one guarded manual act in a transaction with its audit line. A guarded
// update that matches no row means the action is not in a state that allows it:
// the person is told its state and, if someone just acted on it, who and when.
func (r *Review) act(ctx context.Context, actor Actor, id int64, act string,
	apply func(*db.Queries, db.Action) (db.Action, error), p ActParams, detail map[string]any) (db.Action, error) {
	if err := checkText("note, reference or owner", p.Note, p.ExternalRef, p.Owner); err != nil {
		return db.Action{}, err
	}
	var out db.Action
	err := db.WithTx(ctx, r.pool, func(q *db.Queries) error {
		a, err := q.ActionGet(ctx, id)
		if db.IsNotFound(err) {
			return Errorf(ENOTFOUND, "Action %d does not exist.", id)
		}
		if err != nil {
			return fmt.Errorf("read action: %w", err)
		}
		out, err = apply(q, a)
		if db.IsNotFound(err) {
			return r.refusal(ctx, q, a, act)
		}
		if err != nil {
			return err
		}
		if detail == nil {
			detail = map[string]any{}
		}
		if _, ok := detail["operation_key"]; ok {
			detail["operation_key"] = a.OperationKey
		}
		if _, ok := detail["previous_owner"]; ok {
			detail["previous_owner"] = a.Owner
		}
		if err := audit(ctx, q, a.Client, a.ID, actor.Name, act, p.Note, detail); err != nil {
			return err
		}
		return q.Notify(ctx, channelActions)
	})
	return out, err
}

// refusal says why act cannot be done now, and who last did it: a retry that lost
// a race finds the action already claimed by a worker, and the person should still
// learn who retried it.
func (r *Review) refusal(ctx context.Context, q *db.Queries, a db.Action, act string) error {
	msg := fmt.Sprintf("Cannot %s an action that is %s.", act, a.State)
	if a.State == StateProcessing {
		msg = "A worker is performing this action right now; wait for its outcome."
	}
	if last, err := q.AuditLatest(ctx, db.AuditLatestParams{Client: a.Client, ActionID: a.ID, Act: act}); err == nil {
		msg += fmt.Sprintf(" %s already did it at %s.", last.Actor, last.At.UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	return Errorf(ECONFLICT, "%s", msg)
}

// Reconnect re-checks a destination's credentials and, if they are accepted, marks
// it connected and releases its held actions. Admins only.
func (r *Review) Reconnect(ctx context.Context, actor Actor, name string) (int, error) {
	if actor.Role != RoleAdmin {
		return 0, Errorf(EFORBIDDEN, "Only admins can reconnect destinations.")
	}
	dest, ok := r.destinations[name]
	if !ok {
		return 0, Errorf(ENOTFOUND, "No destination is named %q.", name)
	}
	if err := dest.Check(ctx); err != nil {
		return 0, &Error{Code: ECONFLICT, Message: "The destination still refuses: " + err.Error(), Err: err}
	}
	var released []int64
	err := db.WithTx(ctx, r.pool, func(q *db.Queries) error {
		if err := q.DestinationSetStatus(ctx, db.DestinationSetStatusParams{Name: name, Status: "connected",
			Reason: "reconnected by " + actor.Name}); err != nil {
			return fmt.Errorf("mark destination connected: %w", err)
		}
		var err error
		released, err = q.ActionReleaseHeld(ctx, name)
		if err != nil {
			return fmt.Errorf("release held actions: %w", err)
		}
		for _, id := range released {
			a, err := q.ActionGet(ctx, id)
			if err != nil {
				return fmt.Errorf("read released action: %w", err)
			}
			if err := audit(ctx, q, a.Client, id, actor.Name, "reconnect", "destination "+name+" reconnected", nil); err != nil {
				return err
			}
		}
		return q.Notify(ctx, channelActions)
	})
	return len(released), err
}
