package oncehook

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oncehook/oncehook/db"
)

// audit writes one line of an action's audit trail: who did what, when and why.
func audit(ctx context.Context, q *db.Queries, client string, actionID int64, actor, act, note string, detail map[string]any) error {
	if detail == nil {
		detail = map[string]any{}
	}
	b, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("encode audit detail: %w", err)
	}
	if err := q.AuditInsert(ctx, db.AuditInsertParams{
		Client: client, ActionID: actionID, Actor: actor, Act: act, Note: note, Detail: b,
	}); err != nil {
		return fmt.Errorf("write audit: %w", err)
	}
	return nil
}
