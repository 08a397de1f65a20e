package review

import (
	"context"
	"fmt"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
)

// Note is a note a person added to an action (ActNote): an entry of its audit
// trail, read on its own for the queues' rows and the API.
type Note struct {
	By   string
	Text string
	At   time.Time
}

// NotesOf are the notes among an action's audit trail, oldest first.
func NotesOf(audit []ledger.AuditEntry) []Note {
	var out []Note
	for _, a := range audit {
		if a.Act == ActNote {
			out = append(out, Note{By: a.Actor, Text: a.Note, At: a.At})
		}
	}
	return out
}

// LatestNotes is the newest note of each of as that has one, by action id: one
// read for each client among them, on that client's shard.
func (r *Review) LatestNotes(ctx context.Context, as []ledger.Action) (map[int64]Note, error) {
	ids := map[string][]int64{}
	var clients []string
	for _, a := range as {
		if !r.scope.Sees(a.Client) {
			continue
		}
		if ids[a.Client] == nil {
			clients = append(clients, a.Client)
		}
		ids[a.Client] = append(ids[a.Client], a.ID)
	}
	out := map[int64]Note{}
	q := db.New(r.pool)
	for _, c := range clients {
		rows, err := q.AuditLatestNotes(ctx, db.AuditLatestNotesParams{Client: c, ActionIds: ids[c]})
		if err != nil {
			return nil, fmt.Errorf("read the latest notes: %w", err)
		}
		for _, n := range rows {
			out[n.ActionID] = Note{By: n.Actor, Text: n.Note, At: n.At}
		}
	}
	return out, nil
}
