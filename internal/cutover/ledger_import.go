package cutover

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/partitions"
	"github.com/oncehook/oncehook/internal/settings"
)

// LedgerReport counts what an import of a ledger did, or would do in a dry run:
// the actions and delivery identities it added, and those this instance held
// already the same way.
type LedgerReport struct {
	Client                  string
	Actions, ActionsAlready int
	Events, EventsAlready   int
	Links, Audit, Snoozes   int
}

// LedgerParams is what an import of a ledger needs besides the file.
type LedgerParams struct {
	Pool   db.Beginner
	Config *settings.Config
	File   string // the file's name, for the errors
	Client string // if set, the client the file must hold
	DryRun bool
}

// movedWhileHeld is the reason of an action a worker held when its ledger was
// exported: the call may have gone out, so it is reconciled before any repeat.
const movedWhileHeld = "moved from another oncehook while a worker held it: reconcile before any repeat"

// ImportLedger loads a client's ledger written by Export into this instance, in
// one transaction: each action and delivery identity under a new id (the links,
// audit and snoozes follow them), so that a redelivery or a replay here of an
// event performed there performs nothing. An action whose operation is here
// already is left as it is when it stands the same (its state and record), and
// is a conflict otherwise; an action of a rule or source this config lacks is
// one too (copy the client's part of the config first). Any conflict loads
// nothing: a *Problems error lists them by line. The same file twice changes
// nothing the second time.
func ImportLedger(ctx context.Context, p LedgerParams, r io.Reader) (LedgerReport, error) {
	var rep LedgerReport
	problems := &Problems{File: p.File}
	err := db.WithTx(ctx, p.Pool, func(q *db.Queries) error {
		l := &ledgerLoad{q: q, cfg: p.Config, problems: problems, rep: &rep,
			actions: map[int64]int64{}, events: map[int64]int64{}, fresh: map[int64]bool{},
			refused: map[int64]bool{}, day: partitions.Day(time.Now())}
		// Today's partition of the events' bytes is there unless the servers
		// were down for longer than the lead; then it is made here.
		if _, err := partitions.Make(ctx, q, l.day, l.day); err != nil {
			return err
		}
		if err := l.read(ctx, r, p.Client); err != nil {
			return err
		}
		if problems.Count > 0 {
			return problems
		}
		if p.DryRun {
			return errDryRun
		}
		return nil
	})
	if errors.Is(err, errDryRun) {
		err = nil
	}
	return rep, err
}

// ledgerLoad is one import of a ledger under way: the new ids of the file's
// actions and events, and which actions it added (their audit and snoozes come
// with them; an action held already keeps its own).
type ledgerLoad struct {
	q        *db.Queries
	cfg      *settings.Config
	problems *Problems
	rep      *LedgerReport
	client   string
	actions  map[int64]int64 // the file's action id: this instance's
	events   map[int64]int64
	fresh    map[int64]bool // the file's action ids this import added
	refused  map[int64]bool // the file's action ids refused on their own line
	day      time.Time      // the partition day the events' bytes are written in
}

// read loads the file line by line.
func (l *ledgerLoad) read(ctx context.Context, r io.Reader, want string) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 64<<20) // a line holds one event's body at most
	line := 0
	for sc.Scan() {
		line++
		var rec ledgerLine
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			l.problems.add(line, "not a line of a ledger file: %v", err)
			continue
		}
		if line == 1 {
			if err := l.header(rec, want); err != nil {
				return fmt.Errorf("%s: %w", l.problems.File, err)
			}
			continue
		}
		if err := l.load(ctx, line, rec); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", l.problems.File, err)
	}
	if line == 0 {
		return fmt.Errorf("%s is empty", l.problems.File)
	}
	return nil
}

// header checks the file's first line: a ledger of a client this config has.
func (l *ledgerLoad) header(rec ledgerLine, want string) error {
	h := rec.Header
	switch {
	case rec.Kind != kindHeader || h == nil || h.Format != LedgerFormat:
		return errors.New("not a ledger written by oncehook export: its first line is no header")
	case h.Version != LedgerVersion:
		return fmt.Errorf("a ledger of version %d; this oncehook reads version %d", h.Version, LedgerVersion)
	case want != "" && h.Client != want:
		return fmt.Errorf("the ledger of client %q, not %q", h.Client, want)
	case !slices.Contains(l.cfg.Clients(), h.Client):
		return fmt.Errorf("the ledger of client %q, which no source of the config belongs to: copy the client's part of the config first", h.Client)
	}
	l.client, l.rep.Client = h.Client, h.Client
	return nil
}

// load adds one record.
func (l *ledgerLoad) load(ctx context.Context, line int, rec ledgerLine) error {
	switch {
	case rec.Kind == kindAction && rec.Action != nil:
		return l.action(ctx, line, *rec.Action)
	case rec.Kind == kindEvent && rec.Event != nil:
		return l.event(ctx, *rec.Event)
	case rec.Kind == kindLink && rec.Link != nil:
		return l.link(ctx, line, *rec.Link)
	case rec.Kind == kindAudit && rec.Audit != nil:
		return l.audit(ctx, line, *rec.Audit)
	case rec.Kind == kindSnooze && rec.Snooze != nil:
		return l.snooze(ctx, line, *rec.Snooze)
	}
	l.problems.add(line, "a line of kind %q without its record", rec.Kind)
	return nil
}

func (l *ledgerLoad) action(ctx context.Context, line int, a movedAction) error {
	rule, ok := l.cfg.Action(a.Name)
	if src, found := l.cfg.Source(a.Source); !ok || !found || src.Client != l.client || rule.Source != a.Source {
		l.refuse(line, a.ID, "action %d (%s %s): no rule %q of source %s of client %s in the config: copy the client's part of the config first",
			a.ID, a.Name, a.BusinessKey, a.Name, a.Source, l.client)
		return nil
	}
	if a.State == ledger.StateProcessing {
		a.State, a.Reason = ledger.RuleOf[ledger.ObsLeaseStarted].Next, movedWhileHeld
	}
	p := db.LedgerImportActionParams{Client: l.client, Environment: a.Environment, Source: a.Source, Name: a.Name,
		BusinessKey: a.BusinessKey, KeyParts: a.KeyParts, OperationKey: a.OperationKey, AttemptKey: a.AttemptKey,
		Destination: a.Destination, Params: a.Params, ParamsSha256: a.ParamsSha256, State: a.State, Reason: a.Reason,
		Owner: a.Owner, Resource: a.Resource, OccurredAt: a.OccurredAt, Attempts: a.Attempts,
		MaxAttempts: a.MaxAttempts, GiveUpAt: a.GiveUpAt, NextAttemptAt: a.NextAttemptAt,
		FirstAttemptAt: a.FirstAttemptAt, LastAttemptAt: a.LastAttemptAt, ExternalRef: a.ExternalRef,
		Result: a.Result, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt, StateSince: a.StateSince,
		ImportedFrom: a.ImportedFrom, RowsDay: l.day}
	if a.AfterID != nil {
		pred, ok := l.actions[*a.AfterID]
		if !ok {
			l.refuse(line, a.ID, "action %d (%s %s) comes after action %d, which the file does not hold before it",
				a.ID, a.Name, a.BusinessKey, *a.AfterID)
			return nil
		}
		p.AfterID = &pred
	}
	id, err := l.q.LedgerImportAction(ctx, p)
	switch {
	case err == nil:
		l.actions[a.ID], l.fresh[a.ID] = id, true
		l.rep.Actions++
		return nil
	case !db.IsNotFound(err):
		return fmt.Errorf("add action %d of line %d: %w", a.ID, line, err)
	}
	here, err := l.q.LedgerActionByOperationKey(ctx, db.LedgerActionByOperationKeyParams{Client: l.client, OperationKey: a.OperationKey})
	if err != nil {
		return fmt.Errorf("read the action of operation %s: %w", a.OperationKey, err)
	}
	if here.State != a.State || here.ExternalRef != a.ExternalRef {
		l.refuse(line, a.ID, "action %d (%s %s) is here already as action %d, %s with record %q; the file says %s with record %q",
			a.ID, a.Name, a.BusinessKey, here.ID, here.State, here.ExternalRef, a.State, a.ExternalRef)
		return nil
	}
	l.actions[a.ID] = here.ID
	l.rep.ActionsAlready++
	return nil
}

func (l *ledgerLoad) event(ctx context.Context, e movedEvent) error {
	id, err := l.q.LedgerImportEvent(ctx, db.LedgerImportEventParams{Client: l.client, Environment: e.Environment,
		Source: e.Source, SourceEventID: e.SourceEventID, Type: e.Type, Status: e.Status, Reason: e.Reason,
		BodyDay: l.day, BodySha256: e.BodySha256, OccurredAt: e.OccurredAt,
		ReceivedAt: e.ReceivedAt, LastReceivedAt: e.LastReceivedAt, Deliveries: e.Deliveries, Conflict: e.Conflict,
		RoutedAt: e.RoutedAt, Via: e.Via})
	switch {
	case err == nil:
		if err := l.q.LedgerImportEventBody(ctx, db.LedgerImportEventBodyParams{Client: l.client, EventID: id,
			Day: l.day, Body: e.Body, Payload: e.Payload, Headers: e.Headers}); err != nil {
			return fmt.Errorf("add the body of event %s: %w", e.SourceEventID, err)
		}
		l.events[e.ID] = id
		l.rep.Events++
		return nil
	case !db.IsNotFound(err):
		return fmt.Errorf("add event %s: %w", e.SourceEventID, err)
	}
	here, err := l.q.LedgerEventBySourceID(ctx, db.LedgerEventBySourceIDParams{Client: l.client, Source: e.Source,
		SourceEventID: e.SourceEventID})
	if err != nil {
		return fmt.Errorf("read event %s: %w", e.SourceEventID, err)
	}
	l.events[e.ID] = here
	l.rep.EventsAlready++
	return nil
}

func (l *ledgerLoad) link(ctx context.Context, line int, k movedLink) error {
	action, okA := l.actions[k.ActionID]
	event, okE := l.events[k.EventID]
	if !okA || !okE {
		if !l.refused[k.ActionID] { // a refused action's links were reported with it
			l.problems.add(line, "a link of action %d and event %d, which the file does not hold before it", k.ActionID, k.EventID)
		}
		return nil
	}
	if err := l.q.LedgerImportActionEvent(ctx, db.LedgerImportActionEventParams{Client: l.client, ActionID: action,
		EventID: event, Params: k.Params, ParamsSha256: k.ParamsSha256, Conflict: k.Conflict, LinkedAt: k.LinkedAt}); err != nil {
		return fmt.Errorf("link action %d and event %d: %w", k.ActionID, k.EventID, err)
	}
	l.rep.Links++
	return nil
}

// refuse reports the file's action id as a problem of line, so that its links
// are not reported again.
func (l *ledgerLoad) refuse(line int, id int64, format string, args ...any) {
	l.refused[id] = true
	l.problems.add(line, format, args...)
}

func (l *ledgerLoad) audit(ctx context.Context, line int, a movedAudit) error {
	if !l.fresh[a.ActionID] { // an action held already keeps its own trail
		return nil
	}
	if err := l.q.LedgerImportAudit(ctx, db.LedgerImportAuditParams{Client: l.client, ActionID: l.actions[a.ActionID],
		Actor: a.Actor, Act: a.Act, Note: a.Note, Detail: a.Detail, At: a.At, PartDay: l.day}); err != nil {
		return fmt.Errorf("add the audit entry of line %d: %w", line, err)
	}
	l.rep.Audit++
	return nil
}

func (l *ledgerLoad) snooze(ctx context.Context, line int, z movedSnooze) error {
	if !l.fresh[z.ActionID] {
		return nil
	}
	if err := l.q.LedgerImportSnooze(ctx, db.LedgerImportSnoozeParams{Client: l.client, ActionID: l.actions[z.ActionID],
		Until: z.Until, SnoozedBy: z.SnoozedBy, SnoozedAt: z.SnoozedAt}); err != nil {
		return fmt.Errorf("add the snooze of line %d: %w", line, err)
	}
	l.rep.Snoozes++
	return nil
}
