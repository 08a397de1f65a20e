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

// Snooze is a snooze that has not run out (ActSnooze).
type Snooze struct {
	Until time.Time
	By    string
}

// LatestNotes is the newest note of each of as that has one, by action id.
func (r *Review) LatestNotes(ctx context.Context, as []ledger.Action) (map[int64]Note, error) {
	out := map[int64]Note{}
	err := r.eachClientsIDs(as, func(q *db.Queries, client string, ids []int64) error {
		rows, err := q.AuditLatestNotes(ctx, db.AuditLatestNotesParams{Client: client, ActionIds: ids})
		if err != nil {
			return fmt.Errorf("read the latest notes: %w", err)
		}
		for _, n := range rows {
			out[n.ActionID] = Note{By: n.Actor, Text: n.Note, At: n.At}
		}
		return nil
	})
	return out, err
}

// Snoozes are the snoozes of as that have not run out, by action id.
func (r *Review) Snoozes(ctx context.Context, as []ledger.Action) (map[int64]Snooze, error) {
	out := map[int64]Snooze{}
	now := r.now()
	err := r.eachClientsIDs(as, func(q *db.Queries, client string, ids []int64) error {
		rows, err := q.SnoozeList(ctx, db.SnoozeListParams{Client: client, ActionIds: ids, Now: now})
		if err != nil {
			return fmt.Errorf("read the snoozes: %w", err)
		}
		for _, z := range rows {
			out[z.ActionID] = Snooze{Until: z.Until, By: z.SnoozedBy}
		}
		return nil
	})
	return out, err
}

// eachClientsIDs calls read once for each client among as (those the reader
// sees), with its actions' ids: one read of that client's shard on Citus.
func (r *Review) eachClientsIDs(as []ledger.Action, read func(q *db.Queries, client string, ids []int64) error) error {
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
	q := db.New(r.pool)
	for _, c := range clients {
		if err := read(q, c, ids[c]); err != nil {
			return err
		}
	}
	return nil
}
