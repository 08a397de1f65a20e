package ledger

import (
	"encoding/json"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/settings"
)

// The ledger's own types, as it hands them to the web layer and the commands. The
// sqlc rows stay behind the ledger: this file is the one place they are converted,
// as river turns its driver rows into rivertype.JobRow.

// Action is one business operation and where it stands.
type Action struct {
	ID             int64
	Client         string
	Environment    string
	Source         string
	Name           string
	BusinessKey    string // the key parts, readable
	KeyParts       json.RawMessage
	OperationKey   string // the opaque token the destination sees
	AttemptKey     string // what the destination sees instead, after a correction that needed a new identity; "" if none
	Destination    string
	Params         json.RawMessage
	State          string
	Reason         string
	Owner          string
	AfterID        *int64
	Resource       string
	OccurredAt     *time.Time
	Attempts       int32
	MaxAttempts    int32
	GiveUpAt       time.Time
	NextAttemptAt  time.Time
	FirstAttemptAt *time.Time
	LastAttemptAt  *time.Time
	LeaseOwner     *string
	LeaseExpiresAt *time.Time
	ExternalRef    string
	Result         json.RawMessage
	CreatedAt      time.Time
	UpdatedAt      time.Time
	StateSince     time.Time // when it entered its state: what its age counts from
	ImportedFrom   string    // the file it was imported from (oncehook import); "" if oncehook made it
}

// ActionOf is a as the ledger hands it out; ActionsOf, AttemptsOf and the other
// ...Of functions below convert their rows the same way, in this one place.
func ActionOf(a db.Action) Action {
	return Action{ID: a.ID, Client: a.Client, Environment: a.Environment, Source: a.Source, Name: a.Name,
		BusinessKey: a.BusinessKey, KeyParts: a.KeyParts, OperationKey: a.OperationKey, AttemptKey: a.AttemptKey,
		Destination: a.Destination, Params: a.Params, State: a.State, Reason: a.Reason, Owner: a.Owner,
		AfterID: a.AfterID, Resource: a.Resource, OccurredAt: a.OccurredAt, Attempts: a.Attempts,
		MaxAttempts: a.MaxAttempts, GiveUpAt: a.GiveUpAt, NextAttemptAt: a.NextAttemptAt,
		FirstAttemptAt: a.FirstAttemptAt, LastAttemptAt: a.LastAttemptAt, LeaseOwner: a.LeaseOwner,
		LeaseExpiresAt: a.LeaseExpiresAt, ExternalRef: a.ExternalRef, Result: a.Result,
		CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt, StateSince: a.StateSince, ImportedFrom: a.ImportedFrom}
}

func ActionsOf(rows []db.Action) []Action {
	out := make([]Action, len(rows))
	for i, a := range rows {
		out[i] = ActionOf(a)
	}
	return out
}

// Attempt is one call to a destination, or one reconcile lookup.
type Attempt struct {
	ID           int64
	Kind         string // "call" or "lookup"
	OperationKey string
	Worker       string
	Status       string // started or finished
	Observed     string
	HTTPStatus   *int32
	Error        string
	Evidence     string
	StartedAt    time.Time
	FinishedAt   *time.Time
}

func AttemptsOf(rows []db.Attempt) []Attempt {
	out := make([]Attempt, len(rows))
	for i, a := range rows {
		out[i] = Attempt{ID: a.ID, Kind: a.Kind, OperationKey: a.OperationKey, Worker: a.Worker,
			Status: a.Status, Observed: a.Observed, HTTPStatus: a.HttpStatus, Error: a.Error,
			Evidence: a.Evidence, StartedAt: a.StartedAt, FinishedAt: a.FinishedAt}
	}
	return out
}

// AuditEntry is one act on an action: who, what, why.
type AuditEntry struct {
	ID     int64
	Actor  string
	Act    string
	Note   string
	Detail json.RawMessage
	At     time.Time
}

func AuditOf(rows []db.Audit) []AuditEntry {
	out := make([]AuditEntry, len(rows))
	for i, a := range rows {
		out[i] = AuditEntry{ID: a.ID, Actor: a.Actor, Act: a.Act, Note: a.Note, Detail: a.Detail, At: a.At}
	}
	return out
}

func EventAuditOf(rows []db.EventAudit) []AuditEntry {
	out := make([]AuditEntry, len(rows))
	for i, a := range rows {
		out[i] = AuditEntry{ID: a.ID, Actor: a.Actor, Act: a.Act, Note: a.Note, Detail: a.Detail, At: a.At}
	}
	return out
}

// LinkedEvent is an event that asked for an action, with the params it asked for.
type LinkedEvent struct {
	EventID       int64
	Params        json.RawMessage
	Conflict      bool // its params differ from the action's
	LinkedAt      time.Time
	Source        string
	SourceEventID string
	Type          string
	Status        string
	Deliveries    int32
	EventConflict bool // the event itself had a conflicting repeat
	ReceivedAt    time.Time
}

func LinkedEventsOf(rows []db.ActionEventListRow) []LinkedEvent {
	out := make([]LinkedEvent, len(rows))
	for i, r := range rows {
		out[i] = LinkedEvent(r)
	}
	return out
}

// Event is one delivery identity in the inbox. Lists leave Body and Payload empty.
type Event struct {
	ID             int64
	Client         string
	Environment    string
	Source         string
	SourceEventID  string
	Type           string
	Status         string
	Reason         string
	Body           []byte
	Payload        []byte
	Headers        json.RawMessage
	OccurredAt     *time.Time
	ReceivedAt     time.Time
	LastReceivedAt time.Time
	Deliveries     int32
	Conflict       bool
	RoutedAt       *time.Time
	Via            string // ViaWebhook or ViaBackfill
}

func EventOf(e db.Event) Event {
	return Event{ID: e.ID, Client: e.Client, Environment: e.Environment, Source: e.Source,
		SourceEventID: e.SourceEventID, Type: e.Type, Status: e.Status, Reason: e.Reason, Body: e.Body,
		Payload: e.Payload, Headers: e.Headers, OccurredAt: e.OccurredAt, ReceivedAt: e.ReceivedAt,
		LastReceivedAt: e.LastReceivedAt, Deliveries: e.Deliveries, Conflict: e.Conflict, RoutedAt: e.RoutedAt,
		Via: e.Via}
}

func EventListOf(rows []db.EventListRow) []Event {
	out := make([]Event, len(rows))
	for i, e := range rows {
		out[i] = Event{ID: e.ID, Client: e.Client, Environment: e.Environment, Source: e.Source,
			SourceEventID: e.SourceEventID, Type: e.Type, Status: e.Status, Reason: e.Reason,
			Deliveries: e.Deliveries, Conflict: e.Conflict, OccurredAt: e.OccurredAt,
			ReceivedAt: e.ReceivedAt, LastReceivedAt: e.LastReceivedAt, Via: e.Via}
	}
	return out
}

// ConflictingBody is a repeat of a known delivery whose body differed, kept as evidence.
type ConflictingBody struct {
	ID         int64
	Body       []byte
	Headers    json.RawMessage
	ReceivedAt time.Time
}

func ConflictsOf(rows []db.EventConflict) []ConflictingBody {
	out := make([]ConflictingBody, len(rows))
	for i, c := range rows {
		out[i] = ConflictingBody{ID: c.ID, Body: c.Body, Headers: c.Headers, ReceivedAt: c.ReceivedAt}
	}
	return out
}

// User is a dashboard account. It never carries the password hash.
type User struct {
	ID        int64
	Email     string
	Role      string
	Clients   []string // the clients an operator or a viewer sees; an admin sees all
	Disabled  bool
	CreatedAt time.Time
	// OIDCIssuer and OIDCSubject name a person who signs in through an identity
	// provider; both are empty for a local account.
	OIDCIssuer  string
	OIDCSubject string
	SignedInAt  *time.Time
}

func UserOf(u db.User) User {
	return User{ID: u.ID, Email: u.Email, Role: u.Role, Clients: u.Clients, Disabled: u.Disabled,
		CreatedAt: u.CreatedAt, OIDCIssuer: Deref(u.OidcIssuer), OIDCSubject: Deref(u.OidcSubject),
		SignedInAt: u.SignedInAt}
}

// Deref is a nullable text column's value, the empty string for null.
func Deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Actor is the user as the reviews see them: their role and clients.
func (u User) Actor() Actor {
	return Actor{Name: u.Email, Role: u.Role, Clients: u.Clients, Subject: u.OIDCSubject}
}

// AccessRevoked reports whether u is an identity provider's user whom no rule
// gave access at their last sign-in: their sessions end like a disabled user's.
// The rules give every operator and viewer at least one client, so no clients
// means none matched.
func (u User) AccessRevoked() bool {
	return u.OIDCSubject != "" && u.Role != settings.RoleAdmin && len(u.Clients) == 0
}

// breakerOf is a destination's breaker as its row holds it.
func breakerOf(r db.DestinationBreakersRow) Breaker {
	return Breaker{Destination: r.Name, State: r.BreakerState, Since: r.BreakerSince, Reason: r.BreakerReason,
		OutageAt: r.BreakerOutageAt, ProbeAt: r.BreakerProbeAt,
		OpenFor:    time.Duration(r.BreakerOpenFor * float64(time.Second)),
		ProbeOwner: r.BreakerProbeOwner, ProbeUntil: r.BreakerProbeUntil,
		LastProbeAt: r.BreakerLastProbeAt, LastProbe: r.BreakerLastProbe}
}
