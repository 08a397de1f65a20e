package web

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
)

// The JSON shapes of DESIGN.md section 4. Ids are strings: clients treat them as opaque.

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

func toActionJSON(a ledger.Action) actionJSON {
	var next *time.Time
	if t, ok := a.NextAttempt(); ok {
		t = t.UTC()
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
	Destination string            `json:"destination"`
	NextStep    string            `json:"next_step"`
	Params      json.RawMessage   `json:"params"`
	Events      []actionEventJSON `json:"events"`
	Attempts    []attemptJSON     `json:"attempts"`
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

type auditJSON struct {
	Actor  string          `json:"actor"`
	Act    string          `json:"act"`
	Note   string          `json:"note"`
	Detail json.RawMessage `json:"detail"`
	At     time.Time       `json:"at"`
}

func toActionDetailJSON(d ledger.ActionDetail) actionDetailJSON {
	out := actionDetailJSON{
		actionJSON: toActionJSON(d.Action), Destination: d.Action.Destination,
		NextStep: ledger.NextStep(d.Action.State), Params: d.Action.Params,
		Events: []actionEventJSON{}, Attempts: []attemptJSON{}, Audit: []auditJSON{},
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
