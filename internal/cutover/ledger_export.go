package cutover

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/settings"
)

// LedgerFormat names a file of a client's ledger (oncehook export); a file of
// another format or version is refused.
const (
	LedgerFormat  = "oncehook-ledger"
	LedgerVersion = 1
)

// The kinds of line of a ledger file, in the order they come.
const (
	kindHeader = "header"
	kindAction = "action"
	kindEvent  = "event"
	kindLink   = "link"
	kindAudit  = "audit"
	kindSnooze = "snooze"
)

// ledgerLine is one line of a ledger file: its kind and the one record it holds.
type ledgerLine struct {
	Kind   string        `json:"kind"`
	Header *ledgerHeader `json:"header,omitempty"`
	Action *movedAction  `json:"action,omitempty"`
	Event  *movedEvent   `json:"event,omitempty"`
	Link   *movedLink    `json:"link,omitempty"`
	Audit  *movedAudit   `json:"audit,omitempty"`
	Snooze *movedSnooze  `json:"snooze,omitempty"`
}

type ledgerHeader struct {
	Format     string    `json:"format"`
	Version    int       `json:"version"`
	Client     string    `json:"client"`
	ExportedAt time.Time `json:"exported_at"`
	Bodies     bool      `json:"bodies"`
}

// movedAction is an action as the file carries it; ID and AfterID are the
// exporting instance's ids, which the importing one maps to its own.
type movedAction struct {
	ID             int64           `json:"id"`
	Environment    string          `json:"environment"`
	Source         string          `json:"source"`
	Name           string          `json:"name"`
	BusinessKey    string          `json:"business_key"`
	KeyParts       json.RawMessage `json:"key_parts"`
	OperationKey   string          `json:"operation_key"`
	AttemptKey     string          `json:"attempt_key,omitempty"`
	Destination    string          `json:"destination"`
	Params         json.RawMessage `json:"params"`
	ParamsSha256   []byte          `json:"params_sha256"`
	State          string          `json:"state"`
	Reason         string          `json:"reason"`
	Owner          string          `json:"owner"`
	AfterID        *int64          `json:"after_id,omitempty"`
	Resource       string          `json:"resource,omitempty"`
	OccurredAt     *time.Time      `json:"occurred_at,omitempty"`
	Attempts       int32           `json:"attempts"`
	MaxAttempts    int32           `json:"max_attempts"`
	GiveUpAt       time.Time       `json:"give_up_at"`
	NextAttemptAt  time.Time       `json:"next_attempt_at"`
	FirstAttemptAt *time.Time      `json:"first_attempt_at,omitempty"`
	LastAttemptAt  *time.Time      `json:"last_attempt_at,omitempty"`
	ExternalRef    string          `json:"external_ref"`
	Result         json.RawMessage `json:"result,omitempty"`
	CreatedAt      time.Time       `json:"created_at"`
	UpdatedAt      time.Time       `json:"updated_at"`
	StateSince     time.Time       `json:"state_since"`
	ImportedFrom   string          `json:"imported_from,omitempty"`
}

type movedEvent struct {
	ID             int64           `json:"id"`
	Environment    string          `json:"environment"`
	Source         string          `json:"source"`
	SourceEventID  string          `json:"source_event_id"`
	Type           string          `json:"type"`
	Status         string          `json:"status"`
	Reason         string          `json:"reason,omitempty"`
	Body           []byte          `json:"body,omitempty"`
	Payload        []byte          `json:"payload,omitempty"`
	BodySha256     []byte          `json:"body_sha256"`
	Headers        json.RawMessage `json:"headers"`
	OccurredAt     *time.Time      `json:"occurred_at,omitempty"`
	ReceivedAt     time.Time       `json:"received_at"`
	LastReceivedAt time.Time       `json:"last_received_at"`
	Deliveries     int32           `json:"deliveries"`
	Conflict       bool            `json:"conflict,omitempty"`
	RoutedAt       *time.Time      `json:"routed_at,omitempty"`
	Via            string          `json:"via"`
}

type movedLink struct {
	ActionID     int64           `json:"action_id"`
	EventID      int64           `json:"event_id"`
	Params       json.RawMessage `json:"params"`
	ParamsSha256 []byte          `json:"params_sha256"`
	Conflict     bool            `json:"conflict,omitempty"`
	LinkedAt     time.Time       `json:"linked_at"`
}

type movedAudit struct {
	ActionID int64           `json:"action_id"`
	Actor    string          `json:"actor"`
	Act      string          `json:"act"`
	Note     string          `json:"note,omitempty"`
	Detail   json.RawMessage `json:"detail"`
	At       time.Time       `json:"at"`
}

type movedSnooze struct {
	ActionID  int64     `json:"action_id"`
	Until     time.Time `json:"until"`
	SnoozedBy string    `json:"snoozed_by"`
	SnoozedAt time.Time `json:"snoozed_at"`
}

// ExportReport counts what an export wrote.
type ExportReport struct {
	Actions, Events, Links, Audit, Snoozes int
}

// exportPage is how many rows the export reads at a time.
const exportPage = 1000

// Export writes client's ledger to w as JSON lines (see ledgerLine): a header,
// then its actions (states, keys, external refs, params, owners), its delivery
// identities (with their bodies when bodies), the links between them, its audit
// trail (notes and assignments included) and its snoozes, each read a page at a
// time.
func Export(ctx context.Context, q *db.Queries, cfg *settings.Config, client string, bodies bool, w io.Writer) (ExportReport, error) {
	var rep ExportReport
	if !slices.Contains(cfg.Clients(), client) {
		return rep, fmt.Errorf("no source of the config belongs to client %q", client)
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(ledgerLine{Kind: kindHeader, Header: &ledgerHeader{Format: LedgerFormat, Version: LedgerVersion,
		Client: client, ExportedAt: time.Now().UTC(), Bodies: bodies}}); err != nil {
		return rep, err
	}
	if err := exportRecords(ctx, q, enc, client, bodies, &rep); err != nil {
		return rep, err
	}
	if err := exportTrail(ctx, q, enc, client, &rep); err != nil {
		return rep, err
	}
	return rep, bw.Flush()
}

// exportRecords writes the client's actions and delivery identities.
func exportRecords(ctx context.Context, q *db.Queries, enc *json.Encoder, client string, bodies bool, rep *ExportReport) error {
	var err error
	if rep.Actions, err = paged(func(last *db.Action) ([]db.Action, error) {
		return q.ExportActions(ctx, db.ExportActionsParams{Client: client, After: keyOf(last, func(a db.Action) int64 { return a.ID }),
			MaxRows: exportPage})
	}, func(a db.Action) error {
		return enc.Encode(ledgerLine{Kind: kindAction, Action: movedActionOf(a)})
	}); err != nil {
		return fmt.Errorf("write the actions of %s: %w", client, err)
	}
	if rep.Events, err = paged(func(last *db.ExportEventsRow) ([]db.ExportEventsRow, error) {
		return q.ExportEvents(ctx, db.ExportEventsParams{Client: client, After: keyOf(last, func(e db.ExportEventsRow) int64 { return e.ID }),
			MaxRows: exportPage, WithBodies: bodies})
	}, func(e db.ExportEventsRow) error {
		m := movedEvent(e)
		return enc.Encode(ledgerLine{Kind: kindEvent, Event: &m})
	}); err != nil {
		return fmt.Errorf("write the events of %s: %w", client, err)
	}
	return nil
}

// exportTrail writes what follows the actions and events: the links between
// them, the audit trail and the snoozes.
func exportTrail(ctx context.Context, q *db.Queries, enc *json.Encoder, client string, rep *ExportReport) error {
	var err error
	if rep.Links, err = paged(func(last *db.ExportActionEventsRow) ([]db.ExportActionEventsRow, error) {
		p := db.ExportActionEventsParams{Client: client, MaxRows: exportPage}
		if last != nil {
			p.AfterAction, p.AfterEvent = last.ActionID, last.EventID
		}
		return q.ExportActionEvents(ctx, p)
	}, func(l db.ExportActionEventsRow) error {
		m := movedLink(l)
		return enc.Encode(ledgerLine{Kind: kindLink, Link: &m})
	}); err != nil {
		return fmt.Errorf("write the links of %s: %w", client, err)
	}
	if rep.Audit, err = paged(func(last *db.ExportAuditRow) ([]db.ExportAuditRow, error) {
		return q.ExportAudit(ctx, db.ExportAuditParams{Client: client, After: keyOf(last, func(a db.ExportAuditRow) int64 { return a.ID }),
			MaxRows: exportPage})
	}, func(a db.ExportAuditRow) error {
		return enc.Encode(ledgerLine{Kind: kindAudit, Audit: &movedAudit{ActionID: a.ActionID, Actor: a.Actor,
			Act: a.Act, Note: a.Note, Detail: a.Detail, At: a.At}})
	}); err != nil {
		return fmt.Errorf("write the audit of %s: %w", client, err)
	}
	if rep.Snoozes, err = paged(func(last *db.ExportSnoozesRow) ([]db.ExportSnoozesRow, error) {
		return q.ExportSnoozes(ctx, db.ExportSnoozesParams{Client: client,
			After: keyOf(last, func(z db.ExportSnoozesRow) int64 { return z.ActionID }), MaxRows: exportPage})
	}, func(z db.ExportSnoozesRow) error {
		m := movedSnooze(z)
		return enc.Encode(ledgerLine{Kind: kindSnooze, Snooze: &m})
	}); err != nil {
		return fmt.Errorf("write the snoozes of %s: %w", client, err)
	}
	return nil
}

// paged reads rows a page of exportPage at a time, each page after the last row
// of the one before (nil for the first), and writes each; it returns how many.
func paged[T any](read func(last *T) ([]T, error), write func(T) error) (int, error) {
	var last *T
	n := 0
	for {
		rows, err := read(last)
		if err != nil {
			return n, err
		}
		for _, r := range rows {
			if err := write(r); err != nil {
				return n, err
			}
		}
		n += len(rows)
		if len(rows) < exportPage {
			return n, nil
		}
		last = &rows[len(rows)-1]
	}
}

// keyOf is the key of the last row read, or 0 before the first page.
func keyOf[T any](last *T, key func(T) int64) int64 {
	if last == nil {
		return 0
	}
	return key(*last)
}

// movedActionOf is a as the file carries it.
func movedActionOf(a db.Action) *movedAction {
	return &movedAction{ID: a.ID, Environment: a.Environment, Source: a.Source, Name: a.Name,
		BusinessKey: a.BusinessKey, KeyParts: a.KeyParts, OperationKey: a.OperationKey, AttemptKey: a.AttemptKey,
		Destination: a.Destination, Params: a.Params, ParamsSha256: a.ParamsSha256, State: a.State, Reason: a.Reason,
		Owner: a.Owner, AfterID: a.AfterID, Resource: a.Resource, OccurredAt: a.OccurredAt, Attempts: a.Attempts,
		MaxAttempts: a.MaxAttempts, GiveUpAt: a.GiveUpAt, NextAttemptAt: a.NextAttemptAt,
		FirstAttemptAt: a.FirstAttemptAt, LastAttemptAt: a.LastAttemptAt, ExternalRef: a.ExternalRef,
		Result: a.Result, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt, StateSince: a.StateSince,
		ImportedFrom: a.ImportedFrom}
}
