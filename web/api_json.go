package web

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
)

// The JSON shapes of docs/api.md. Ids are strings: clients treat them as opaque.

type actionJSON struct {
	ID            string     `json:"id"`
	Name          string     `json:"name"`
	Source        string     `json:"source"`
	Client        string     `json:"client"`
	Environment   string     `json:"environment"`
	BusinessKey   string     `json:"business_key"`
	OperationKey  string     `json:"operation_key"`
	State         string     `json:"state"`
	Reason        string     `json:"reason"`
	Attempts      int32      `json:"attempts"`
	NextAttemptAt *time.Time `json:"next_attempt_at"`
	ExternalRef   string     `json:"external_ref"`
	Owner         string     `json:"owner"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
}

// toActionJSON is a with its step: next_attempt_at is set only when a worker will
// act on it by itself.
func toActionJSON(a ledger.Action, step review.Step) actionJSON {
	var next *time.Time
	if step.NextAttempt != nil {
		t := step.NextAttempt.UTC()
		next = &t
	}
	return actionJSON{
		ID: id(a.ID), Name: a.Name, Source: a.Source, Client: a.Client, Environment: a.Environment,
		BusinessKey: a.BusinessKey, OperationKey: a.OperationKey, State: a.State, Reason: a.Reason,
		Attempts: a.Attempts, NextAttemptAt: next, ExternalRef: a.ExternalRef, Owner: a.Owner,
		CreatedAt: a.CreatedAt.UTC(), UpdatedAt: a.UpdatedAt.UTC(),
	}
}

type actionDetailJSON struct {
	actionJSON
	Destination string          `json:"destination"`
	NextStep    string          `json:"next_step"`
	Params      json.RawMessage `json:"params"`
	// BlockedBy is the predecessor it waits for; nil when none.
	BlockedBy *blockedJSON `json:"blocked_by"`
	// FollowOns wait for it: a cancel cancels them too.
	FollowOns   []blockedJSON     `json:"follow_ons"`
	Corrections []correctionJSON  `json:"corrections"`
	Events      []actionEventJSON `json:"events"`
	Attempts    []attemptJSON     `json:"attempts"`
	Notes       []noteJSON        `json:"notes"`
	Audit       []auditJSON       `json:"audit"`
}

type actionEventJSON struct {
	ID            string          `json:"id"`
	Source        string          `json:"source"`
	SourceEventID string          `json:"source_event_id"`
	Type          string          `json:"type"`
	Status        string          `json:"status"`
	Deliveries    int32           `json:"deliveries"`
	Conflict      bool            `json:"conflict"`
	Params        json.RawMessage `json:"params"`
	ReceivedAt    time.Time       `json:"received_at"`
}

type attemptJSON struct {
	ID           string     `json:"id"`
	Kind         string     `json:"kind"`
	OperationKey string     `json:"operation_key"`
	Status       string     `json:"status"`
	Observed     string     `json:"observed"`
	HTTPStatus   *int32     `json:"http_status"`
	Error        string     `json:"error"`
	Evidence     string     `json:"evidence"`
	Worker       string     `json:"worker"`
	StartedAt    time.Time  `json:"started_at"`
	FinishedAt   *time.Time `json:"finished_at"`
}

// noteJSON is a note a person added (POST .../note), also in the audit.
type noteJSON struct {
	By   string    `json:"by"`
	Text string    `json:"text"`
	At   time.Time `json:"at"`
}

type auditJSON struct {
	Actor  string          `json:"actor"`
	Act    string          `json:"act"`
	Note   string          `json:"note"`
	Detail json.RawMessage `json:"detail"`
	At     time.Time       `json:"at"`
}

type blockedJSON struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	State string `json:"state"`
}

type correctionJSON struct {
	ID             string          `json:"id"`
	State          string          `json:"state"`
	Original       json.RawMessage `json:"original"`
	Params         json.RawMessage `json:"params"`
	ProviderReason string          `json:"provider_reason"`
	Note           string          `json:"note"`
	ProposedBy     string          `json:"proposed_by"`
	ProposedAt     time.Time       `json:"proposed_at"`
	DecidedBy      string          `json:"decided_by"`
	DecidedAt      *time.Time      `json:"decided_at"`
	DecisionNote   string          `json:"decision_note"`
	AttemptKey     string          `json:"attempt_key"`
	Approve        string          `json:"approve"`
}

func toCorrectionJSON(c review.Correction) correctionJSON {
	return correctionJSON{ID: id(c.ID), State: c.State, Original: c.Original, Params: c.Params,
		ProviderReason: c.ProviderReason, Note: c.Note, ProposedBy: c.ProposedBy, ProposedAt: c.ProposedAt.UTC(),
		DecidedBy: c.DecidedBy, DecidedAt: c.DecidedAt, DecisionNote: c.DecisionNote, AttemptKey: c.AttemptKey,
		Approve: c.Approve}
}

func toActionDetailJSON(d review.ActionDetail, step review.Step, corrections []review.Correction,
	followOns []ledger.Action) actionDetailJSON {
	out := actionDetailJSON{
		actionJSON: toActionJSON(d.Action, step), Destination: d.Action.Destination, NextStep: step.Text,
		Params: d.Action.Params,
		Events: []actionEventJSON{}, Attempts: []attemptJSON{}, Audit: []auditJSON{}, Notes: []noteJSON{},
		Corrections: []correctionJSON{}, FollowOns: []blockedJSON{},
	}
	for _, f := range followOns {
		out.FollowOns = append(out.FollowOns, blockedJSON{ID: id(f.ID), Name: f.Name, State: f.State})
	}
	if p := step.BlockedBy; p != nil {
		out.BlockedBy = &blockedJSON{ID: id(p.ID), Name: p.Name, State: p.State}
	}
	for _, c := range corrections {
		out.Corrections = append(out.Corrections, toCorrectionJSON(c))
	}
	for _, e := range d.Events {
		out.Events = append(out.Events, actionEventJSON{
			ID: id(e.EventID), Source: e.Source, SourceEventID: e.SourceEventID, Type: e.Type,
			Status: e.Status, Deliveries: e.Deliveries, Conflict: e.Conflict || e.EventConflict,
			Params: e.Params, ReceivedAt: e.ReceivedAt.UTC(),
		})
	}
	for _, t := range d.Attempts {
		out.Attempts = append(out.Attempts, attemptJSON{
			ID: id(t.ID), Kind: t.Kind, OperationKey: t.OperationKey, Status: t.Status, Observed: t.Observed,
			HTTPStatus: t.HTTPStatus, Error: t.Error, Evidence: t.Evidence, Worker: t.Worker,
			StartedAt: t.StartedAt.UTC(), FinishedAt: t.FinishedAt,
		})
	}
	for _, a := range d.Audit {
		out.Audit = append(out.Audit, auditJSON{Actor: a.Actor, Act: a.Act, Note: a.Note, Detail: a.Detail, At: a.At.UTC()})
	}
	for _, n := range review.NotesOf(d.Audit) {
		out.Notes = append(out.Notes, noteJSON{By: n.By, Text: n.Text, At: n.At.UTC()})
	}
	return out
}

type eventJSON struct {
	ID            string    `json:"id"`
	Source        string    `json:"source"`
	SourceEventID string    `json:"source_event_id"`
	Type          string    `json:"type"`
	Status        string    `json:"status"`
	Deliveries    int32     `json:"deliveries"`
	Conflict      bool      `json:"conflict"`
	ReceivedAt    time.Time `json:"received_at"`
	Via           string    `json:"via"`
}

func toEventJSON(e ledger.Event) eventJSON {
	return eventJSON{ID: id(e.ID), Source: e.Source, SourceEventID: e.SourceEventID, Type: e.Type,
		Status: e.Status, Deliveries: e.Deliveries, Conflict: e.Conflict, ReceivedAt: e.ReceivedAt.UTC(), Via: e.Via}
}

type eventDetailJSON struct {
	eventJSON
	Reason         string          `json:"reason"`
	Headers        json.RawMessage `json:"headers"`
	Body           string          `json:"body"`
	OccurredAt     *time.Time      `json:"occurred_at"`
	LastReceivedAt time.Time       `json:"last_received_at"`
	Conflicts      []conflictJSON  `json:"conflicting_bodies"`
	Actions        []actionJSON    `json:"actions"`
	Audit          []auditJSON     `json:"audit"`
}

type conflictJSON struct {
	Body       string    `json:"body"`
	ReceivedAt time.Time `json:"received_at"`
}

func id(n int64) string { return strconv.FormatInt(n, 10) }
