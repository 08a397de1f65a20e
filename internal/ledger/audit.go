package ledger

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oncehook/oncehook/db"
)

// Audit writes one line of an action's audit trail: who did what, when and why.
func Audit(ctx context.Context, q *db.Queries, client string, actionID int64, actor, act, note string, detail map[string]any) error {
	if detail == nil {
		detail = map[string]any{}
	}
	b, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("encode audit detail: %w", err)
	}
	day, err := q.ActionRowsDay(ctx, db.ActionRowsDayParams{Client: client, ID: actionID})
	if err != nil {
		return fmt.Errorf("write audit: read the day of action %d's rows: %w", actionID, err)
	}
	if err := q.AuditInsert(ctx, db.AuditInsertParams{
		Client: client, ActionID: actionID, Actor: actor, Act: act, Note: note, Detail: b, PartDay: day,
	}); err != nil {
		return fmt.Errorf("write audit: %w", err)
	}
	return nil
}

// CancelSuccessors cancels the actions waiting for a cancelled one, with an audit
// line each: they would otherwise wait in the outstanding queue for ever.
func CancelSuccessors(ctx context.Context, q *db.Queries, client string, id int64, actor string) error {
	reason := fmt.Sprintf("its predecessor (action %d) was cancelled", id)
	ids, err := q.ActionCancelSuccessors(ctx, db.ActionCancelSuccessorsParams{Client: client, AfterID: &id, Reason: reason})
	if err != nil {
		return fmt.Errorf("cancel successors: %w", err)
	}
	for _, s := range ids {
		if err := Audit(ctx, q, client, s, actor, "cancel", reason, map[string]any{"predecessor": id}); err != nil {
			return err
		}
	}
	return nil
}
