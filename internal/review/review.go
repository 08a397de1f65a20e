package review

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/batch"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/internal/store"
)

// Review is the service behind the dashboard and the JSON API: the manual acts on
// actions and destinations, each guarded and written to the audit trail.
type Review struct {
	pool      *pgxpool.Pool
	cfg       *settings.Config
	clients   map[string]ledger.DestinationClient // each destination's client, by its name
	now       func() time.Time
	scope     ledger.Scope  // what the reads see; see For
	hint      string        // the client an item's URL names; see In
	store     store.Store   // what Citus does differently
	known     *knownClients // on Citus, the clients with actions (readClients)
	estimates *db.Estimates // on Citus, the shards' planners' estimates, kept a while
	wakeWork  *batch.Wakeup // the performers, once an act made work due
	wakeRoute *batch.Wakeup // the routers, once a replay queued events
}

// New returns the review service.
func New(pool *pgxpool.Pool, cfg *settings.Config, clients map[string]ledger.DestinationClient) *Review {
	return &Review{pool: pool, cfg: cfg, clients: clients, now: time.Now, scope: ledger.EveryClient,
		store: store.For(pool), known: &knownClients{},
		estimates: db.NewEstimates(estimatesKept),
		wakeWork:  ledger.NewWakeup(pool, ledger.ChannelActions, slog.Default()),
		wakeRoute: ledger.NewWakeup(pool, ledger.ChannelEvents, slog.Default())}
}

// change runs fn in a transaction and, once it has committed, sends wake: a
// wake-up is sent after the commit, never inside the transaction (see
// ledger.NewWakeup).
func change(ctx context.Context, b db.Beginner, wake *batch.Wakeup, fn func(q *db.Queries) error) error {
	if err := db.WithTx(ctx, b, fn); err != nil {
		return err
	}
	wake.Send()
	return nil
}

// ActParams is the body of a manual act.
type ActParams struct {
	Note               string
	ExternalRef        string
	Owner              string
	CheckedDestination bool
	Until              time.Time // a snooze's end
	previous           *Snooze   // the snooze a new one replaces, for its undo
}

// Manual acts on an action, by name: the API's path segment and the pages' forms.
const (
	ActRetry     = "retry"
	ActReconcile = "reconcile"
	ActResolve   = "resolve"
	ActCancel    = "cancel"
	ActAssign    = "assign"
	ActNote      = "note"   // a note to the team; it changes nothing else
	ActSnooze    = "snooze" // out of the queues' default view and the digests until a time
	ActWake      = "wake"   // a snooze ended by hand
	ActUndo      = "undo"   // the person's own assign or snooze of a moment ago, undone
)

// UndoFor is how long after an assign or a snooze the person who did it can
// undo it (the confirming message offers it for a few seconds of that).
const UndoFor = 30 * time.Second

// undoable are the acts an undo can take back: they reach no destination and
// change no state of the ledger.
var undoable = []string{ActAssign, ActSnooze}

// MaxSnooze is how far ahead an action can be snoozed.
const MaxSnooze = 90 * 24 * time.Hour

// MaxNote is the longest note a person may add to an action, in characters.
const MaxNote = 2000

// An Act is one manual act on an action: the one place that says from which states
// it may be done, who may do it, whether it can be applied to many actions at once,
// and what it does. The JSON API, the pages' buttons and bulk acts all read it.
type Act struct {
	Name      string
	States    []string // the states it applies to; nil means any state
	AdminOnly bool
	Bulk      bool // offered for several actions at once
	// Reaches: the act asks the workers to go to the destination (retry,
	// reconcile); no undo can call it back.
	Reaches bool
	// Undoable: the act can be undone (ActUndo) until the action changes.
	Undoable bool
	// Final: the act closes the action for good (resolve, cancel).
	Final bool
	// check refuses bad input before anything is read.
	check func(p ActParams) error
	// apply performs the act on a, which is in one of States, inside the act's
	// transaction. It reports db.IsNotFound when a's state changed meanwhile.
	apply func(r *Review, ctx context.Context, q *db.Queries, actor ledger.Actor, x Act, a db.Action, p ActParams) (db.Action, error)
	// detail is what the audit line keeps beside the note, read before the act.
	detail func(a db.Action, p ActParams) map[string]any
	// prepare reads, inside the act's transaction and before detail, what the
	// detail keeps besides a and the request (what an undo restores).
	prepare func(r *Review, ctx context.Context, q *db.Queries, a db.Action, p *ActParams) error
}

// reviewStates are the states a person may close an action from: open, and not held
// by a worker.
var reviewStates = []string{ledger.StatePending, ledger.StateRetrying, ledger.StateHeld, ledger.StateUncertain, ledger.StateFailed}

var acts = []Act{
	{Name: ActRetry, States: []string{ledger.StateFailed, ledger.StateUncertain}, Bulk: true, Reaches: true,
		apply: (*Review).retry,
		detail: func(a db.Action, p ActParams) map[string]any {
			return map[string]any{"operation_key": a.OperationKey, "checked_destination": p.CheckedDestination}
		}},
	{Name: ActReconcile, States: []string{ledger.StateFailed, ledger.StateUncertain}, Bulk: true, Reaches: true,
		apply: func(r *Review, ctx context.Context, q *db.Queries, actor ledger.Actor, x Act, a db.Action, _ ActParams) (db.Action, error) {
			return q.ActionManualReconcile(ctx, db.ActionManualReconcileParams{
				Client: a.Client, ID: a.ID, Reason: requestReason("reconcile requested by "+actor.Name, a.Reason),
				States: x.States})
		}},
	{Name: ActResolve, States: reviewStates, Final: true,
		check: func(p ActParams) error {
			if strings.TrimSpace(p.Note) == "" {
				return ledger.Errorf(ledger.EINVALID, "Resolving needs a note saying how it was settled.")
			}
			return nil
		},
		apply: func(r *Review, ctx context.Context, q *db.Queries, actor ledger.Actor, x Act, a db.Action, p ActParams) (db.Action, error) {
			b, err := q.ActionClose(ctx, db.ActionCloseParams{Client: a.Client, ID: a.ID, State: ledger.StateResolved,
				Reason: "resolved by " + actor.Name + ": " + p.Note, ExternalRef: p.ExternalRef,
				States: x.States})
			if err != nil {
				return b, err
			}
			// A resolved predecessor lets its waiting successors run.
			_, err = q.ActionReleaseSuccessors(ctx, db.ActionReleaseSuccessorsParams{Client: a.Client, AfterID: &a.ID})
			return b, err
		},
		detail: func(_ db.Action, p ActParams) map[string]any { return map[string]any{"external_ref": p.ExternalRef} }},
	{Name: ActCancel, States: reviewStates, Final: true,
		apply: func(r *Review, ctx context.Context, q *db.Queries, actor ledger.Actor, x Act, a db.Action, p ActParams) (db.Action, error) {
			reason := "cancelled by " + actor.Name
			if p.Note != "" {
				reason += ": " + p.Note
			}
			b, err := q.ActionClose(ctx, db.ActionCloseParams{Client: a.Client, ID: a.ID, State: ledger.StateCancelled,
				Reason: reason, States: x.States})
			if err != nil {
				return b, err
			}
			return b, ledger.CancelSuccessors(ctx, q, a.Client, a.ID, actor.Label())
		}},
	{Name: ActAssign, AdminOnly: true, Bulk: true, Undoable: true,
		check: func(p ActParams) error {
			if strings.TrimSpace(p.Owner) == "" {
				return ledger.Errorf(ledger.EINVALID, "Assigning needs an owner.")
			}
			return nil
		},
		apply: func(r *Review, ctx context.Context, q *db.Queries, _ ledger.Actor, _ Act, a db.Action, p ActParams) (db.Action, error) {
			if err := checkAssignee(ctx, q, strings.TrimSpace(p.Owner), a.Client); err != nil {
				return a, err
			}
			return q.ActionAssign(ctx, db.ActionAssignParams{Client: a.Client, ID: a.ID, Owner: strings.TrimSpace(p.Owner)})
		},
		detail: func(a db.Action, p ActParams) map[string]any {
			return map[string]any{"owner": p.Owner, "previous_owner": a.Owner}
		}},
	// A note is an entry of the audit trail and nothing else: whoever may act on
	// the action may add one, in any state; the workers never read it.
	{Name: ActNote,
		check: func(p ActParams) error {
			switch n := len([]rune(strings.TrimSpace(p.Note))); {
			case n == 0:
				return ledger.Errorf(ledger.EINVALID, "A note needs some text.")
			case n > MaxNote:
				return ledger.Errorf(ledger.EINVALID, "A note is at most %d characters; this one has %d.", MaxNote, n)
			}
			return nil
		},
		apply: func(_ *Review, _ context.Context, _ *db.Queries, _ ledger.Actor, _ Act, a db.Action, _ ActParams) (db.Action, error) {
			return a, nil
		}},
	// A snooze is for an action that waits for someone outside: it leaves the
	// queues' default view and the digests until its time, then is reported
	// again. It never changes the action's state or what the workers do, nor the
	// counts of its queue.
	{Name: ActSnooze, States: []string{ledger.StateHeld, ledger.StateUncertain, ledger.StateFailed}, Undoable: true,
		apply: func(r *Review, ctx context.Context, q *db.Queries, actor ledger.Actor, _ Act, a db.Action, p ActParams) (db.Action, error) {
			now := r.now()
			switch {
			case !p.Until.After(now):
				return a, ledger.Errorf(ledger.EINVALID, "A snooze ends later than now.")
			case p.Until.After(now.Add(MaxSnooze)):
				return a, ledger.Errorf(ledger.EINVALID, "A snooze ends within %d days.", int(MaxSnooze.Hours()/24))
			}
			if err := q.SnoozeSet(ctx, db.SnoozeSetParams{Client: a.Client, ActionID: a.ID, Until: p.Until,
				SnoozedBy: actor.Name, Now: now}); err != nil {
				return a, fmt.Errorf("snooze: %w", err)
			}
			return a, q.NotificationForget(ctx, db.NotificationForgetParams{Client: a.Client, ActionID: a.ID, State: a.State})
		},
		prepare: func(r *Review, ctx context.Context, q *db.Queries, a db.Action, p *ActParams) error {
			rows, err := q.SnoozeList(ctx, db.SnoozeListParams{Client: a.Client, ActionIds: []int64{a.ID}, Now: r.now()})
			if err != nil {
				return fmt.Errorf("read the snooze: %w", err)
			}
			if len(rows) == 1 {
				p.previous = &Snooze{Until: rows[0].Until, By: rows[0].SnoozedBy}
			}
			return nil
		},
		detail: func(_ db.Action, p ActParams) map[string]any {
			d := map[string]any{"until": p.Until.UTC().Format(time.RFC3339)}
			if p.previous != nil {
				d["previous_until"], d["previous_by"] = p.previous.Until.UTC().Format(time.RFC3339), p.previous.By
			}
			return d
		}},
	{Name: ActUndo, apply: (*Review).undo},
	{Name: ActWake,
		apply: func(_ *Review, ctx context.Context, q *db.Queries, _ ledger.Actor, _ Act, a db.Action, _ ActParams) (db.Action, error) {
			n, err := q.SnoozeClear(ctx, db.SnoozeClearParams{Client: a.Client, ActionID: a.ID})
			if err == nil && n == 0 {
				return a, ledger.Errorf(ledger.ECONFLICT, "It is not snoozed.")
			}
			return a, err
		}},
}

// LookupAct returns the act called name.
func LookupAct(name string) (Act, bool) {
	i := slices.IndexFunc(acts, func(a Act) bool { return a.Name == name })
	if i < 0 {
		return Act{}, false
	}
	return acts[i], true
}

// Allows reports whether actor may do the act on an action in state.
func (x Act) Allows(actor ledger.Actor, state string) bool {
	if !actor.MayAct() || x.AdminOnly && actor.Role != settings.RoleAdmin {
		return false
	}
	return x.States == nil || slices.Contains(x.States, state)
}

// Allowed returns the names of the acts actor may do on a now, for the page's buttons.
func Allowed(actor ledger.Actor, a ledger.Action) map[string]bool {
	out := map[string]bool{}
	for _, x := range acts {
		out[x.Name] = x.Allows(actor, a.State)
	}
	return out
}

// Do performs the act called name on action id. Refusals are *Error values:
// ENOTFOUND for an unknown act or action, EFORBIDDEN for an act the actor may not do,
// EINVALID for bad input, ECONFLICT (with who last did it, if anyone) when the action
// is not in a state that allows it or the retry guard refuses.
func (r *Review) Do(ctx context.Context, actor ledger.Actor, name string, id int64, p ActParams) (ledger.Action, error) {
	x, err := admit(actor, name, p)
	if err != nil {
		return ledger.Action{}, err
	}
	var out db.Action
	err = change(ctx, r.pool, r.wakeWork, func(q *db.Queries) error {
		a, err := r.actionRow(ctx, q, actor.Scope(), id)
		if db.IsNotFound(err) {
			return ledger.Errorf(ledger.ENOTFOUND, "Action %d does not exist.", id)
		}
		if err != nil {
			return fmt.Errorf("read action: %w", err)
		}
		if err := ledger.CheckActor(actor, a.Client, "Action", id); err != nil {
			return err
		}
		out, err = r.apply(ctx, q, actor, x, a, p)
		return err
	})
	if err != nil {
		return ledger.Action{}, err
	}
	return ledger.ActionOf(out), nil
}

// admit is the act called name, if actor may ask for it with p: what is refused
// before anything is read.
func admit(actor ledger.Actor, name string, p ActParams) (Act, error) {
	x, ok := LookupAct(name)
	if !ok {
		return Act{}, ledger.Errorf(ledger.ENOTFOUND, "No such act: %q.", name)
	}
	if x.AdminOnly && actor.Role != settings.RoleAdmin {
		return Act{}, ledger.Errorf(ledger.EFORBIDDEN, "Only admins can %s actions.", x.Name)
	}
	if x.check != nil {
		if err := x.check(p); err != nil {
			return Act{}, err
		}
	}
	return x, ledger.CheckText("note, reference or owner", p.Note, p.ExternalRef, p.Owner)
}

// apply performs x on a in the act's transaction, with its audit line, and closes
// the correction a failed action waited for once the act moved it on.
func (r *Review) apply(ctx context.Context, q *db.Queries, actor ledger.Actor, x Act, a db.Action, p ActParams) (db.Action, error) {
	if x.States != nil && !slices.Contains(x.States, a.State) {
		return a, r.refusal(ctx, q, a, x.Name)
	}
	if x.prepare != nil {
		if err := x.prepare(r, ctx, q, a, &p); err != nil {
			return a, err
		}
	}
	detail := map[string]any{}
	if x.detail != nil {
		detail = x.detail(a, p)
	}
	out, err := x.apply(r, ctx, q, actor, x, a, p)
	if db.IsNotFound(err) {
		return a, r.refusal(ctx, q, a, x.Name)
	}
	if err != nil {
		return a, err
	}
	if err := ledger.Audit(ctx, q, a.Client, a.ID, actor.Label(), x.Name, p.Note, detail); err != nil {
		return a, err
	}
	if a.State == ledger.StateFailed && out.State != ledger.StateFailed {
		if _, err := q.CorrectionSupersede(ctx, db.CorrectionSupersedeParams{Client: a.Client, ActionID: a.ID,
			DecidedBy: actor.Name, DecisionNote: "superseded: " + x.Name + " by " + actor.Name}); err != nil {
			return a, fmt.Errorf("close waiting correction: %w", err)
		}
	}
	return out, nil
}

// retry asks the worker to perform a failed or uncertain action again with its
// original operation key and a fresh budget from its rule. Where the first call may
// have reached the destination and the destination has a lookup whose absence
// proves something (strong, or eventual with settle), the action goes back to
// uncertain, so the worker looks it up before any call and calls again only on a
// proved absence. retryPath refuses the retry that could act twice.
func (r *Review) retry(ctx context.Context, q *db.Queries, actor ledger.Actor, x Act, a db.Action, p ActParams) (db.Action, error) {
	next, err := r.retryPath(a.Destination, a.FirstAttemptAt, p)
	if err != nil {
		return a, err
	}
	reason := "retry requested by " + actor.Name
	if next == ledger.StateUncertain {
		reason += "; the operation is looked up at the destination before any call"
	}
	reason = requestReason(reason, a.Reason)
	rule, _ := r.cfg.Action(a.Name)
	return q.ActionManualRetry(ctx, db.ActionManualRetryParams{
		Client: a.Client, ID: a.ID, Reason: reason, NextState: next,
		BudgetAttempts: int32(rule.Retry.Attempts), WithinSeconds: rule.Retry.Within.Seconds(),
		States: x.States,
	})
}

// retryPath says where a manual retry of an action first called at firstAttempt
// goes: pending (a call with the same key) when nothing was called yet, the
// destination still remembers the key, or the person checked the destination and
// says what they found; uncertain (a lookup first) when the destination's lookup can
// prove an absence. Otherwise a retry could act twice, and it is refused (ECONFLICT).
func (r *Review) retryPath(destination string, firstAttempt *time.Time, p ActParams) (string, error) {
	dest, ok := r.clients[destination]
	if !ok || firstAttempt == nil {
		return ledger.RuleOf[ledger.ObsRetryByPerson].Next, nil
	}
	caps := dest.Capabilities()
	checked := p.CheckedDestination && strings.TrimSpace(p.Note) != ""
	if obs, ok := ledger.ManualRetry(caps, *firstAttempt, checked, r.now()); ok {
		return ledger.RuleOf[obs].Next, nil
	}
	age := r.now().Sub(*firstAttempt)
	memory := "no memory of idempotency keys"
	if caps.KeyMemory > 0 {
		memory = fmt.Sprintf("a key memory of %s, which has passed (first attempt %s ago)", caps.KeyMemory, age.Round(time.Second))
	}
	lookup := "no lookup"
	if caps.Lookup {
		lookup = "only an eventual lookup, whose finding nothing proves nothing"
	}
	return "", ledger.Errorf(ledger.ECONFLICT, "Destination %s has %s and %s, so a retry could act twice. "+
		"Check the destination first, then retry, confirming that you checked it, with a note saying what you found.",
		destination, memory, lookup)
}

// requestReason is the reason of an action a person asked a worker to look at
// again: the request, with the reason it had kept beside it, so the person still
// sees why it needed them until the worker's outcome replaces both.
func requestReason(request, before string) string {
	if _, was, ok := strings.Cut(before, reasonBefore); ok {
		before = was // an earlier request's own: keep the original reason only
	}
	if before == "" {
		return request
	}
	return request + reasonBefore + before
}

// reasonBefore separates a request from the reason it keeps beside it.
const reasonBefore = "; the reason before: "

// Refusal says why the act called name on a would be refused now, in the words
// the act itself would use, or "" when its guard lets it through: the
// confirmation steps say it before the person confirms.
func (r *Review) Refusal(actor ledger.Actor, name string, a ledger.Action) string {
	x, ok := LookupAct(name)
	switch {
	case !ok:
		return fmt.Sprintf("No such act: %q.", name)
	case !actor.MayAct():
		return "Viewers can read but not change anything."
	case x.AdminOnly && actor.Role != settings.RoleAdmin:
		return fmt.Sprintf("Only admins can %s actions.", x.Name)
	case a.State == ledger.StateProcessing && x.States != nil:
		return "A worker is performing this action right now; wait for its outcome."
	case x.States != nil && !slices.Contains(x.States, a.State):
		return fmt.Sprintf("Cannot %s an action that is %s.", x.Name, a.State)
	case x.Name == ActRetry:
		if _, err := r.retryPath(a.Destination, a.FirstAttemptAt, ActParams{}); err != nil {
			return ledger.ErrorMessage(err)
		}
	}
	return ""
}

// ActionsByID returns the actions with the given ids that exist, in that order.
func (r *Review) ActionsByID(ctx context.Context, ids []int64) ([]ledger.Action, error) {
	q := db.New(r.pool)
	out := make([]ledger.Action, 0, len(ids))
	for _, id := range ids {
		a, err := r.actionRow(ctx, q, r.scope, id)
		if db.IsNotFound(err) || err == nil && !r.scope.Sees(a.Client) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read action: %w", err)
		}
		out = append(out, ledger.ActionOf(a))
	}
	return out, nil
}

// FollowOns are the actions that wait for a and that cancelling a cancels too.
func (r *Review) FollowOns(ctx context.Context, a ledger.Action) ([]ledger.Action, error) {
	rows, err := db.New(r.pool).ActionWaitingSuccessors(ctx, db.ActionWaitingSuccessorsParams{Client: a.Client, AfterID: &a.ID})
	if err != nil {
		return nil, fmt.Errorf("list follow-on actions: %w", err)
	}
	return ledger.ActionsOf(rows), nil
}

// refusal says why act cannot be done now, and who last did it: a retry that lost
// a race finds the action already claimed by a worker, and the person should still
// learn who retried it.
func (r *Review) refusal(ctx context.Context, q *db.Queries, a db.Action, act string) error {
	msg := fmt.Sprintf("Cannot %s an action that is %s.", act, a.State)
	if a.State == ledger.StateProcessing {
		msg = "A worker is performing this action right now; wait for its outcome."
	}
	if last, err := q.AuditLatest(ctx, db.AuditLatestParams{Client: a.Client, ActionID: a.ID, Act: act}); err == nil {
		msg += fmt.Sprintf(" %s already did it at %s.", last.Actor, last.At.UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	return ledger.Errorf(ledger.ECONFLICT, "%s", msg)
}

// Reconnect re-checks a destination's credentials and, if they are accepted, marks
// it connected and releases its held actions. Admins only.
func (r *Review) Reconnect(ctx context.Context, actor ledger.Actor, name string) (int, error) {
	if actor.Role != settings.RoleAdmin {
		return 0, ledger.Errorf(ledger.EFORBIDDEN, "Only admins can reconnect destinations.")
	}
	dest, ok := r.clients[name]
	if !ok {
		return 0, ledger.Errorf(ledger.ENOTFOUND, "No destination is named %q.", name)
	}
	if err := dest.Check(ctx); err != nil {
		return 0, &ledger.Error{Code: ledger.ECONFLICT, Message: "The destination still refuses: " + err.Error(), Err: err}
	}
	return r.release(ctx, actor, name)
}

// release marks the destination connected and releases its held actions, each
// with its audit entry.
func (r *Review) release(ctx context.Context, actor ledger.Actor, name string) (int, error) {
	var released []db.ActionReleaseHeldRow
	err := change(ctx, r.pool, r.wakeWork, func(q *db.Queries) error {
		if err := q.DestinationSetStatus(ctx, db.DestinationSetStatusParams{Name: name, Status: "connected",
			Reason: "reconnected by " + actor.Name}); err != nil {
			return fmt.Errorf("mark destination connected: %w", err)
		}
		var err error
		released, err = q.ActionReleaseHeld(ctx, name)
		if err != nil {
			return fmt.Errorf("release held actions: %w", err)
		}
		for _, a := range released {
			if err := ledger.Audit(ctx, q, a.Client, a.ID, actor.Label(), "reconnect", "destination "+name+" reconnected", nil); err != nil {
				return err
			}
		}
		return nil
	})
	return len(released), err
}
