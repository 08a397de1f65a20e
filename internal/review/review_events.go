package review

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
)

// EventStatuses are the statuses an event can have, in the order the pages offer them.
var EventStatuses = []string{ledger.EventReceived, ledger.EventRouted, ledger.EventIgnored, ledger.EventStale, ledger.EventConflict}

// EventVias are the ways an event can reach the inbox.
var EventVias = []string{ledger.ViaWebhook, ledger.ViaBackfill}

// EventFilter selects events. Empty fields match all; From and To bound received_at
// (From included, To not).
type EventFilter struct {
	Source, Status, Type, Via string
	From, To                  time.Time
	Q                         string // the provider's event id, exactly
	Limit                     int
	Cursor                    string
}

// EventPage is one page of events, newest first.
type EventPage struct {
	Events     []ledger.Event
	NextCursor string
}

// check refuses a filter no event could match, with a reason a person can read.
func (f EventFilter) check() error {
	if err := ledger.CheckText("filter", f.Source, f.Status, f.Type, f.Via, f.Q); err != nil {
		return err
	}
	if f.Status != "" && !slices.Contains(EventStatuses, f.Status) {
		return ledger.Errorf(ledger.EINVALID, "The status %q is not one of received, routed, ignored, stale, conflict.", f.Status)
	}
	if f.Via != "" && !slices.Contains(EventVias, f.Via) {
		return ledger.Errorf(ledger.EINVALID, "The via %q is not one of webhook, backfill.", f.Via)
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return ledger.Errorf(ledger.EINVALID, "The time range ends before it starts.")
	}
	return nil
}

func (r *Review) eventListParams(f EventFilter, before *int64, limit int) db.EventListParams {
	p := db.EventListParams{Source: f.Source, Status: f.Status, Type: f.Type, Via: f.Via, Q: f.Q,
		BeforeID: before, MaxRows: int32(limit), SearchClients: []string{}, SearchSources: []string{},
		AllClients: r.scope.All, ScopeClients: r.scope.Clients}
	if !f.From.IsZero() {
		p.ReceivedFrom = &f.From
	}
	if !f.To.IsZero() {
		p.ReceivedTo = &f.To
	}
	// A search probes the inbox's unique key once per configured source.
	for _, s := range r.cfg.Sources {
		if !r.scope.Sees(s.Client) {
			continue
		}
		p.SearchClients = append(p.SearchClients, s.Client)
		p.SearchSources = append(p.SearchSources, s.Name)
	}
	return p
}

// ListEvents returns one page of events, by keyset pagination on the id. A filter
// that names an unknown status or via, or a range that ends before it starts, is
// refused with EINVALID.
func (r *Review) ListEvents(ctx context.Context, f EventFilter) (EventPage, error) {
	limit := f.Limit
	if limit <= 0 || limit > 500 {
		limit = 50
	}
	before, err := parseCursor(f.Cursor, SortNewest)
	if err != nil {
		return EventPage{}, err
	}
	if err := f.check(); err != nil {
		return EventPage{}, err
	}
	rows, err := db.New(r.pool).EventList(ctx, r.eventListParams(f, before.id, limit))
	if err != nil {
		return EventPage{}, fmt.Errorf("list events: %w", err)
	}
	page := EventPage{Events: ledger.EventListOf(rows)}
	if len(rows) == limit {
		page.NextCursor = strconv.FormatInt(rows[len(rows)-1].ID, 10)
	}
	return page, nil
}

// EventDetail is an event with its conflicting bodies, the actions it asked for and
// the acts on it (replays).
type EventDetail struct {
	Event     ledger.Event
	Conflicts []ledger.ConflictingBody
	Actions   []ledger.Action
	Audit     []ledger.AuditEntry
}

// GetEvent returns one event with what hangs off it; ENOTFOUND when there is none.
func (r *Review) GetEvent(ctx context.Context, id int64) (EventDetail, error) {
	q := db.New(r.pool)
	ev, err := r.eventRow(ctx, q, r.scope, id)
	if db.IsNotFound(err) || err == nil && !r.scope.Sees(ev.Client) {
		return EventDetail{}, ledger.NotFound("Event", id)
	}
	if err != nil {
		return EventDetail{}, fmt.Errorf("read event: %w", err)
	}
	d := EventDetail{Event: ledger.EventOf(ev)}
	conflicts, err := q.EventConflictList(ctx, db.EventConflictListParams{Client: ev.Client, EventID: ev.ID})
	if err != nil {
		return d, fmt.Errorf("read conflicting bodies: %w", err)
	}
	actions, err := q.ActionListByEvent(ctx, db.ActionListByEventParams{Client: ev.Client, EventID: ev.ID})
	if err != nil {
		return d, fmt.Errorf("read event's actions: %w", err)
	}
	audit, err := q.EventAuditList(ctx, db.EventAuditListParams{Client: ev.Client, EventID: ev.ID})
	if err != nil {
		return d, fmt.Errorf("read event's audit: %w", err)
	}
	d.Conflicts, d.Actions, d.Audit = ledger.ConflictsOf(conflicts), ledger.ActionsOf(actions), ledger.EventAuditOf(audit)
	return d, nil
}
