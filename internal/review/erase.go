package review

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// Erasure on request (docs/operations.md, "Erasing a person's data"): an admin
// names one event, or a business key, and says why. What people sent and what
// the destinations said goes: the events' bodies, payloads and headers and the
// repeats kept beside them, the actions' params and replies, the params each
// event asked for, the calls' errors and excerpts, a correction's params; a
// business key's parts become their hashes. What keeps the promise stays: the
// delivery identity (source and provider's event id, the body's hash), so a
// redelivery is a duplicate, and the operation key (already a hash), so a later
// event asking for the same operation is linked to the action, never performed
// again. An audit line on each event and action says who erased it, when and
// why, never what.

// EraseRequest names what to erase and why: one event by its id, or every action
// with a business key (of one client, or of every client) with the events that
// asked for them.
type EraseRequest struct {
	EventID     int64
	BusinessKey string
	Client      string // with BusinessKey: this client's actions only; "" for every client
	Reason      string
}

// Erased is what an erasure changed.
type Erased struct {
	Events  []ErasedItem
	Actions []ErasedItem
}

// ErasedItem is one event or action erased.
type ErasedItem struct {
	Client string
	ID     int64
}

// ActErase is the audit trails' name of an erasure.
const ActErase = "erase"

// Erase erases what req names (admins only), in one transaction: all of it or,
// when any action named is not final, nothing, with the reason.
func (r *Review) Erase(ctx context.Context, actor ledger.Actor, req EraseRequest) (Erased, error) {
	if err := checkErase(actor, req); err != nil {
		return Erased{}, err
	}
	targets, err := r.eraseTargets(ctx, req)
	if err != nil {
		return Erased{}, err
	}
	var out Erased
	err = db.WithTx(ctx, r.pool, func(q *db.Queries) error {
		for _, t := range targets {
			if err := eraseClient(ctx, q, t, actor.Label(), req.Reason, &out); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return Erased{}, err
	}
	return out, nil
}

func checkErase(actor ledger.Actor, req EraseRequest) error {
	if actor.Role != settings.RoleAdmin {
		return ledger.Errorf(ledger.EFORBIDDEN, "Only admins erase: an erasure cannot be undone.")
	}
	switch {
	case (req.EventID != 0) == (req.BusinessKey != ""):
		return ledger.Errorf(ledger.EINVALID, "Name one event or one business key to erase.")
	case req.EventID != 0 && req.Client != "":
		return ledger.Errorf(ledger.EINVALID, "An event's id names it alone: a client goes with a business key.")
	case strings.TrimSpace(req.Reason) == "":
		return ledger.Errorf(ledger.EINVALID, "Say why: an erasure needs a reason (the request it answers), kept in the audit trail.")
	}
	return nil
}

// eraseTarget is what an erasure changes of one client: the actions, and the
// event named (byEvent) or else the events that asked for the actions.
type eraseTarget struct {
	client  string
	actions []int64
	event   int64 // the event named; 0 for a business key's
}

// eraseTargets finds what req names, outside the transaction (on Citus a read
// of every client's actions cannot lock them); each client's rows are locked and
// checked again in it.
func (r *Review) eraseTargets(ctx context.Context, req EraseRequest) ([]eraseTarget, error) {
	q := db.New(r.pool)
	if req.EventID != 0 {
		ev, err := r.eventRow(ctx, q, r.scope, req.EventID)
		if db.IsNotFound(err) {
			return nil, ledger.NotFound("Event", req.EventID)
		}
		if err != nil {
			return nil, fmt.Errorf("read event %d: %w", req.EventID, err)
		}
		ids, err := q.ActionEventsOfEvent(ctx, db.ActionEventsOfEventParams{Client: ev.Client, EventID: ev.ID})
		if err != nil {
			return nil, fmt.Errorf("read the actions of event %d: %w", ev.ID, err)
		}
		return []eraseTarget{{client: ev.Client, actions: ids, event: ev.ID}}, nil
	}
	rows, err := q.ActionsOfBusinessKey(ctx, db.ActionsOfBusinessKeyParams{BusinessKey: req.BusinessKey, Client: req.Client})
	if err != nil {
		return nil, fmt.Errorf("find the actions of business key %q: %w", req.BusinessKey, err)
	}
	if len(rows) == 0 {
		in := ""
		if req.Client != "" {
			in = " of client " + req.Client
		}
		return nil, ledger.Errorf(ledger.ENOTFOUND, "No action%s has the business key %q (an erased one keeps only its hash).",
			in, req.BusinessKey)
	}
	var out []eraseTarget
	for _, a := range rows {
		if len(out) == 0 || out[len(out)-1].client != a.Client {
			out = append(out, eraseTarget{client: a.Client})
		}
		last := &out[len(out)-1]
		last.actions = append(last.actions, a.ID)
	}
	return out, nil
}

// eraseClient erases one client's part of an erasure. The events are locked
// before the actions, in the router's order.
func eraseClient(ctx context.Context, q *db.Queries, t eraseTarget, actor, reason string, out *Erased) error {
	eventIDs := []int64{t.event}
	if t.event == 0 {
		var err error
		if eventIDs, err = q.ActionEventsOfActions(ctx, db.ActionEventsOfActionsParams{Client: t.client, ActionIds: t.actions}); err != nil {
			return fmt.Errorf("read the events of the actions to erase: %w", err)
		}
	}
	events, err := lockEventsToErase(ctx, q, t, eventIDs)
	if err != nil {
		return err
	}
	actions, err := lockActionsToErase(ctx, q, t.client, t.actions)
	if err != nil {
		return err
	}
	if err := eraseEvents(ctx, q, t.client, events, actions); err != nil {
		return err
	}
	for _, a := range actions {
		if err := eraseAction(ctx, q, t.client, a, events); err != nil {
			return err
		}
	}
	return auditErasure(ctx, q, t.client, events, actions, actor, reason, out)
}

// lockEventsToErase locks the events and keeps those not erased yet; an event
// the router has not routed yet is refused (its body is what routing reads), and
// so is an event named that was erased already.
func lockEventsToErase(ctx context.Context, q *db.Queries, t eraseTarget, ids []int64) ([]db.EventEraseLockRow, error) {
	rows, err := q.EventEraseLock(ctx, db.EventEraseLockParams{Client: t.client, Ids: ids})
	if err != nil {
		return nil, fmt.Errorf("lock the events to erase: %w", err)
	}
	erased, err := q.EventsErased(ctx, db.EventsErasedParams{Client: t.client, Ids: ids})
	if err != nil {
		return nil, fmt.Errorf("read which events were erased already: %w", err)
	}
	var out []db.EventEraseLockRow
	for _, e := range rows {
		switch {
		case slices.Contains(erased, e.ID) && e.ID == t.event:
			return nil, ledger.Errorf(ledger.ECONFLICT, "Event %d was erased already.", e.ID)
		case slices.Contains(erased, e.ID):
			continue
		case e.Status == ledger.EventReceived:
			return nil, ledger.Errorf(ledger.ECONFLICT, "Event %d is not erased: it waits for the router, which reads its body. "+
				"Erase it once it is routed.", e.ID)
		}
		out = append(out, e)
	}
	return out, nil
}

// lockActionsToErase locks the actions and keeps those not erased yet (through
// another of their events); one that is not final is refused, with its state.
func lockActionsToErase(ctx context.Context, q *db.Queries, client string, ids []int64) ([]db.ActionEraseLockRow, error) {
	rows, err := q.ActionEraseLock(ctx, db.ActionEraseLockParams{Client: client, Ids: ids})
	if err != nil {
		return nil, fmt.Errorf("lock the actions to erase: %w", err)
	}
	erased, err := q.ActionsErased(ctx, db.ActionsErasedParams{Client: client, Ids: ids})
	if err != nil {
		return nil, fmt.Errorf("read which actions were erased already: %w", err)
	}
	var out []db.ActionEraseLockRow
	for _, a := range rows {
		if slices.Contains(erased, a.ID) {
			continue
		}
		// Final only: nothing still to be done (a call, a lookup, a person's
		// correction) may need what erasure removes.
		if !slices.Contains(ledger.ClosedStates, a.State) {
			return nil, ledger.Errorf(ledger.ECONFLICT, "Nothing was erased: action %d (%s) is %s, not final, and what it "+
				"still has to do needs its params. Erase it once it is confirmed, resolved or cancelled.", a.ID, a.Name, a.State)
		}
		out = append(out, a)
	}
	return out, nil
}

// eraseEvents removes the events' bytes, the repeats kept beside them and the
// params they and the actions were asked for with.
func eraseEvents(ctx context.Context, q *db.Queries, client string, events []db.EventEraseLockRow, actions []db.ActionEraseLockRow) error {
	ids, days := make([]int64, 0, len(events)), make([]time.Time, 0, len(events))
	for _, e := range events {
		ids = append(ids, e.ID)
		if e.BodyDay != nil {
			days = append(days, *e.BodyDay)
		}
	}
	actionIDs := make([]int64, len(actions))
	for i, a := range actions {
		actionIDs[i] = a.ID
	}
	steps := []struct {
		what string
		run  func() error
	}{
		{"bodies", func() error {
			return q.EventBodyErase(ctx, db.EventBodyEraseParams{Client: client, Ids: ids, Days: days})
		}},
		{"events", func() error { return q.EventErase(ctx, db.EventEraseParams{Client: client, Ids: ids}) }},
		{"repeats", func() error { return q.EventConflictErase(ctx, db.EventConflictEraseParams{Client: client, Ids: ids}) }},
		{"links' params", func() error {
			return q.ActionEventErase(ctx, db.ActionEventEraseParams{Client: client, EventIds: ids, ActionIds: actionIDs})
		}},
		{"calls' words", func() error {
			return q.AttemptErase(ctx, db.AttemptEraseParams{Client: client, ActionIds: actionIDs})
		}},
		{"corrections", func() error {
			return q.CorrectionErase(ctx, db.CorrectionEraseParams{Client: client, ActionIds: actionIDs})
		}},
	}
	for _, s := range steps {
		if err := s.run(); err != nil {
			return fmt.Errorf("erase the %s: %w", s.what, err)
		}
	}
	return nil
}

// eraseAction puts the hashes of an action's key parts in place of the parts,
// where the action, its audit lines and its events' router notes hold them.
func eraseAction(ctx context.Context, q *db.Queries, client string, a db.ActionEraseLockRow, events []db.EventEraseLockRow) error {
	parts, key := hashedKey(a.KeyParts, a.BusinessKey)
	if err := q.ActionErase(ctx, db.ActionEraseParams{Client: client, ID: a.ID, BusinessKey: key, KeyParts: parts,
		OldBusinessKey: a.BusinessKey}); err != nil {
		return fmt.Errorf("erase action %d: %w", a.ID, err)
	}
	if err := q.AuditErase(ctx, db.AuditEraseParams{Client: client, ActionID: a.ID, OldBusinessKey: a.BusinessKey,
		BusinessKey: key}); err != nil {
		return fmt.Errorf("erase action %d's audit details: %w", a.ID, err)
	}
	ids := make([]int64, len(events))
	for i, e := range events {
		ids[i] = e.ID
	}
	if err := q.EventReasonErase(ctx, db.EventReasonEraseParams{Client: client, Ids: ids, OldBusinessKey: a.BusinessKey,
		BusinessKey: key}); err != nil {
		return fmt.Errorf("erase the business key from the events' notes: %w", err)
	}
	return nil
}

// hashedKey is the key parts (a JSON array) with each part replaced by its
// SHA-256, and the readable business key made of them as the router makes it
// (ledger.OperationIdentity.BusinessKey). Parts that are not an array of
// strings (none the router writes) are hashed as one.
func hashedKey(keyParts json.RawMessage, businessKey string) (json.RawMessage, string) {
	var parts []string
	if err := json.Unmarshal(keyParts, &parts); err != nil || len(parts) == 0 {
		parts = []string{businessKey}
	}
	hashed := make([]string, len(parts))
	for i, p := range parts {
		sum := sha256.Sum256([]byte(p))
		hashed[i] = "sha256:" + hex.EncodeToString(sum[:])
	}
	b, _ := json.Marshal(hashed) // strings always encode
	return b, ledger.OperationIdentity{KeyParts: hashed}.BusinessKey()
}

// auditErasure writes who erased each event and action, when and why.
func auditErasure(ctx context.Context, q *db.Queries, client string, events []db.EventEraseLockRow,
	actions []db.ActionEraseLockRow, actor, reason string, out *Erased) error {
	for _, a := range actions {
		if err := ledger.Audit(ctx, q, client, a.ID, actor, ActErase, reason, nil); err != nil {
			return err
		}
		out.Actions = append(out.Actions, ErasedItem{Client: client, ID: a.ID})
	}
	if len(events) == 0 {
		return nil
	}
	p := db.EventAuditInsertParams{Actor: actor, Act: ActErase, Note: reason}
	for _, e := range events {
		p.Clients, p.EventIds = append(p.Clients, client), append(p.EventIds, e.ID)
		p.Details = append(p.Details, json.RawMessage(`{}`))
		out.Events = append(out.Events, ErasedItem{Client: client, ID: e.ID})
	}
	if err := q.EventAuditInsert(ctx, p); err != nil {
		return fmt.Errorf("write the events' audit: %w", err)
	}
	return nil
}
