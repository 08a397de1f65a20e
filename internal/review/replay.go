package review

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// ActReplay is the act of routing a stored event again, as its audit lines name it.
const ActReplay = "replay"

// MaxReplayMatching bounds one "replay all that match": a person confirms a count,
// and a filter that matches the whole inbox is a mistake better refused.
const MaxReplayMatching = 10000

// ReplayResult says what a replay did: the events put back in the router's queue,
// and those left as they were with the reason.
type ReplayResult struct {
	Replayed []int64
	Skipped  int // waiting to be routed already, or their body was pruned
}

// ReplayEvent routes event id again with today's rules: it goes back to the router's
// queue, and the router links it to the actions that exist for its operations (never
// repeating one) and creates those a rule added since. The replay is in the event's
// audit trail with actor and note. Errors: ENOTFOUND for no such event; ECONFLICT
// when it still waits to be routed or its body was dropped by retention.
func (r *Review) ReplayEvent(ctx context.Context, actor ledger.Actor, id int64, note string) (ReplayResult, error) {
	ev, err := r.eventRow(ctx, db.New(r.pool), actor.Scope(), id)
	if db.IsNotFound(err) {
		return ReplayResult{}, ledger.NotFound("Event", id)
	}
	if err != nil {
		return ReplayResult{}, fmt.Errorf("read event: %w", err)
	}
	if err := ledger.CheckActor(actor, ev.Client, "Event", id); err != nil {
		return ReplayResult{}, err
	}
	res, err := r.replay(ctx, actor, []db.Event{ev}, note)
	if err != nil {
		return res, err
	}
	if len(res.Replayed) == 0 {
		return res, replayRefusal(ev)
	}
	return res, nil
}

// replayRefusal says why ev was not replayed, as the page and the API show it.
func replayRefusal(ev db.Event) error {
	if ev.Body == nil {
		return ledger.Errorf(ledger.ECONFLICT, "Event %d cannot be replayed: its body was dropped by retention (retention.drop_bodies_after, or the sources' remember window), so there is nothing to route.", ev.ID)
	}
	return ledger.Errorf(ledger.ECONFLICT, "Event %d is waiting to be routed already; it will be routed with today's rules.", ev.ID)
}

// CountEvents counts the events f matches, up to MaxReplayMatching+1, for the
// confirmation of ReplayMatching.
func (r *Review) CountEvents(ctx context.Context, f EventFilter) (int, error) {
	f.Limit, f.Cursor = 0, ""
	n := 0
	for {
		page, err := r.listForReplay(ctx, f)
		if err != nil {
			return 0, err
		}
		n += len(page.Events)
		if page.NextCursor == "" || n > MaxReplayMatching {
			return n, nil
		}
		f.Cursor = page.NextCursor
	}
}

func (r *Review) listForReplay(ctx context.Context, f EventFilter) (EventPage, error) {
	f.Limit = 500
	return r.ListEvents(ctx, f)
}

// ReplayMatching replays every event f matches (admins only), a page at a time,
// each page in one transaction with its audit lines. want is the count the person
// confirmed: when the filter now matches more than that, or more than 10000 events,
// nothing is replayed (ECONFLICT, EINVALID). Events waiting to be routed and events
// whose body was pruned are counted as skipped.
func (r *Review) ReplayMatching(ctx context.Context, actor ledger.Actor, f EventFilter, want int, note string) (ReplayResult, error) {
	if actor.Role != settings.RoleAdmin {
		return ReplayResult{}, ledger.Errorf(ledger.EFORBIDDEN, "Only admins may replay all events that match.")
	}
	// The events listed are those actor sees, whatever r's own scope.
	r = r.For(actor)
	n, err := r.CountEvents(ctx, f)
	if err != nil {
		return ReplayResult{}, err
	}
	switch {
	case n > MaxReplayMatching:
		return ReplayResult{}, ledger.Errorf(ledger.EINVALID, "More than %d events match; narrow the filter first.", MaxReplayMatching)
	case n > want:
		return ReplayResult{}, ledger.Errorf(ledger.ECONFLICT, "%d events match now, more than the %d confirmed; look again before replaying.", n, want)
	}
	var total ReplayResult
	f.Cursor = ""
	for {
		page, err := r.listForReplay(ctx, f)
		if err != nil {
			return total, err
		}
		evs := make([]db.Event, len(page.Events))
		for i, e := range page.Events {
			evs[i] = db.Event{Client: e.Client, ID: e.ID}
		}
		res, err := r.replay(ctx, actor, evs, note)
		if err != nil {
			return total, err
		}
		total.Replayed = append(total.Replayed, res.Replayed...)
		total.Skipped += res.Skipped
		if page.NextCursor == "" {
			return total, nil
		}
		f.Cursor = page.NextCursor
	}
}

// replay puts evs back in the router's queue, writes an audit line for each one that
// went, and wakes the routers, in one transaction.
func (r *Review) replay(ctx context.Context, actor ledger.Actor, evs []db.Event, note string) (ReplayResult, error) {
	if len(evs) == 0 {
		return ReplayResult{}, nil
	}
	if err := ledger.CheckText("note", note); err != nil {
		return ReplayResult{}, err
	}
	note = strings.TrimSpace(note)
	p := db.EventReplayParams{Clients: make([]string, len(evs)), Ids: make([]int64, len(evs))}
	for i, ev := range evs {
		p.Clients[i], p.Ids[i] = ev.Client, ev.ID
	}
	var res ReplayResult
	err := change(ctx, r.pool, r.wakeRoute, func(q *db.Queries) error {
		rows, err := r.store.ReplayEvents(ctx, q, p)
		if err != nil {
			return fmt.Errorf("replay events: %w", err)
		}
		if len(rows) == 0 {
			return nil
		}
		a := db.EventAuditInsertParams{Actor: actor.Label(), Act: ActReplay, Note: note}
		for _, row := range rows {
			detail, err := json.Marshal(map[string]any{"previous_status": row.PreviousStatus, "previous_reason": row.PreviousReason})
			if err != nil {
				return fmt.Errorf("encode audit detail: %w", err)
			}
			a.Clients, a.EventIds, a.Details = append(a.Clients, row.Client), append(a.EventIds, row.ID), append(a.Details, detail)
			res.Replayed = append(res.Replayed, row.ID)
		}
		if err := q.EventAuditInsert(ctx, a); err != nil {
			return fmt.Errorf("write event audit: %w", err)
		}
		return nil
	})
	if err != nil {
		return ReplayResult{}, err
	}
	res.Skipped = len(evs) - len(res.Replayed)
	return res, nil
}
