package ledger

import (
	"context"
	"encoding/json"
	"time"
)

// Call is one request to perform an action at its destination.
type Call struct {
	OperationKey string          // sent as the idempotency key and reference
	Params       json.RawMessage // the rendered params, a JSON object
	ActionName   string
	BusinessKey  string
}

// Outcome is what a destination answered, already classified into the decision
// table's observations. It never carries a secret.
type Outcome struct {
	Observed    Observation
	HTTPStatus  int             // or the SMTP reply code; 0 if none
	ExternalRef string          // the destination's record id or message id
	Result      json.RawMessage // the reply document, for {result: action} params
	RetryAfter  time.Duration
	Detail      string // the destination's reason or the error, in plain words
	// NotSent: the call never left this process (the worker stopped, or the
	// destination's breaker opened, before it went out).
	NotSent bool
}

// LookupResult is what a reconcile lookup found: the record, or a statement of absence
// (strong or eventual). Unsure is set when the lookup itself failed and proves nothing.
type LookupResult struct {
	Found       bool
	ExternalRef string
	Result      json.RawMessage
	Unsure      bool // the lookup failed (timeout, 5xx): try again later
	Detail      string
	HTTPStatus  int
}

// DestinationClient performs calls for actions at one configured destination. Each
// implementation (HTTP, SMTP) is one small client.
type DestinationClient interface {
	// Perform makes the call once and classifies the reply. It never retries.
	Perform(ctx context.Context, c Call) Outcome
	// Lookup asks whether the operation with this key exists. Only meaningful when
	// Capabilities says a lookup exists.
	Lookup(ctx context.Context, operationKey string) LookupResult
	// Check re-checks the credentials, for reconnecting a held destination; nil when
	// they are accepted.
	Check(ctx context.Context) error
	// Capabilities says how outcomes can be reconciled.
	Capabilities() Capabilities
}

// HealthChecker is a destination that can say whether it is up, for a
// breaker's probe when no action of it waits: Check proves only credentials
// (a 503 is no refusal of them), while a probe must find the destination well.
type HealthChecker interface {
	CheckHealth(ctx context.Context) (Health, string)
}

// Capabilities tells the reconciler what a destination can answer.
type Capabilities struct {
	Lookup       bool          // a lookup by reference exists
	StrongLookup bool          // its "absent" can be trusted at once
	KeyMemory    time.Duration // how long the destination remembers an idempotency key; 0 if never
	Settle       time.Duration // eventual lookup: its absence is reported once this has passed since the attempt; 0 never
	SettleRetry  bool          // the opt-in: absence past Settle repeats the call without a person
}

// KeyRemembered reports whether the destination still remembers an idempotency key
// first sent at first: a retry with it then cannot act twice.
func (c Capabilities) KeyRemembered(first, now time.Time) bool {
	return c.KeyMemory > 0 && now.Sub(first) < c.KeyMemory
}

// Evidence is one thing a person can check at the destination by hand, such as
// the Message-ID of an email.
type Evidence struct {
	Label, Value string
}

// EvidenceGiver is a DestinationClient that can say what a person should look
// for at the destination when an action's outcome is unknown. Optional: the
// review service shows it where a client gives it.
type EvidenceGiver interface {
	Evidence(a Action) []Evidence
}
