package review

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
)

// undo takes back actor's own assign or snooze of a, if it is a's newest audit
// entry and at most UndoFor old: the owner, or the snooze, it replaced comes
// back. Anything else (an act that reached a destination or closed the action,
// someone else's, or one already followed by another) is refused in words.
func (r *Review) undo(ctx context.Context, q *db.Queries, actor ledger.Actor, _ Act, a db.Action, _ ActParams) (db.Action, error) {
	last, err := q.AuditLast(ctx, db.AuditLastParams{Client: a.Client, ActionID: a.ID})
	if db.IsNotFound(err) {
		return a, ledger.Errorf(ledger.ECONFLICT, "There is nothing to undo.")
	}
	if err != nil {
		return a, fmt.Errorf("read the last act: %w", err)
	}
	switch {
	case !slices.Contains(undoable, last.Act):
		return a, ledger.Errorf(ledger.ECONFLICT, "The last act on it (%s by %s) cannot be undone: only an assign or a snooze can.", last.Act, last.Actor)
	case last.Actor != actor.Label():
		return a, ledger.Errorf(ledger.ECONFLICT, "The last act on it is %s's %s: only they can undo it.", last.Actor, last.Act)
	case r.now().Sub(last.At) > UndoFor:
		return a, ledger.Errorf(ledger.ECONFLICT, "The %s was %s ago: an undo is offered for %s only; do it again by hand instead.",
			last.Act, r.now().Sub(last.At).Round(time.Second), UndoFor)
	}
	var d struct {
		PreviousOwner *string `json:"previous_owner"`
		PreviousUntil string  `json:"previous_until"`
		PreviousBy    string  `json:"previous_by"`
	}
	if err := json.Unmarshal(last.Detail, &d); err != nil {
		return a, fmt.Errorf("read what the %s replaced: %w", last.Act, err)
	}
	if last.Act == ActAssign {
		owner := ""
		if d.PreviousOwner != nil {
			owner = *d.PreviousOwner
		}
		return q.ActionAssign(ctx, db.ActionAssignParams{Client: a.Client, ID: a.ID, Owner: owner})
	}
	if until, err := time.Parse(time.RFC3339, d.PreviousUntil); err == nil && until.After(r.now()) {
		return a, q.SnoozeSet(ctx, db.SnoozeSetParams{Client: a.Client, ActionID: a.ID, Until: until, SnoozedBy: d.PreviousBy, Now: r.now()})
	}
	_, err = q.SnoozeClear(ctx, db.SnoozeClearParams{Client: a.Client, ActionID: a.ID})
	return a, err
}
