package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/oncehook/oncehook/db"
)

// Action states (exact strings, used in the API and the pages).
const (
	StatePending    = "pending"
	StateProcessing = "processing"
	StateRetrying   = "retrying"
	StateHeld       = "held"
	StateUncertain  = "uncertain"
	StateFailed     = "failed"
	StateConfirmed  = "confirmed"
	StateResolved   = "resolved"
	StateCancelled  = "cancelled"
)

// QueueOf returns the queue a state belongs to, or "" for closed states.
func QueueOf(state string) string {
	for q, states := range QueueStates {
		for _, s := range states {
			if s == state {
				return q
			}
		}
	}
	return ""
}

// OperationIdentity is "have we already performed this work?": scope, action name
// and the business key parts taken from the payload.
type OperationIdentity struct {
	Client      string
	Environment string
	Name        string
	KeyParts    []string
}

// OperationKey derives the opaque token the destination sees. It is a hash of the
// identity, so it carries no personal data and every retry of the same operation,
// automatic or manual, sends the same key; another operation gets another key.
func (id OperationIdentity) OperationKey() string {
	// JSON gives an unambiguous encoding: ["a/b"] and ["a","b"] differ.
	b, _ := json.Marshal([]any{"oncehook/v1", id.Client, id.Environment, id.Name, id.KeyParts})
	sum := sha256.Sum256(b)
	return "oh_" + hex.EncodeToString(sum[:16])
}

// BusinessKey is the readable form of the key parts, for people and search.
func (id OperationIdentity) BusinessKey() string {
	return strings.Join(id.KeyParts, " / ")
}

// SentKey is the key the destination sees for a: its operation key, or the new
// attempt identity an approved correction needed (see correctionNeedsNewKey).
func SentKey(a db.Action) string { return SentKeyOf(a.AttemptKey, a.OperationKey) }

// SentKeyOf is the key the destination sees for an action with these keys: the
// attempt key when it has one, else the operation key.
func SentKeyOf(attemptKey, operationKey string) string {
	if attemptKey != "" {
		return attemptKey
	}
	return operationKey
}

// WaitingForPredecessor is the next_attempt_at of a successor whose predecessor is
// not confirmed yet (see ActionInsert); Postgres' infinity does not fit a time.Time.
var WaitingForPredecessor = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// Scheduled reports whether t is a real next attempt time rather than "waiting".
func Scheduled(t time.Time) bool { return t.Before(WaitingForPredecessor) }

// NextAttempt is when a worker next takes the action up (a call or a lookup): ok is
// false when none is scheduled, because the action is not due work or waits for its
// predecessor.
func (a Action) NextAttempt() (t time.Time, ok bool) {
	if !slices.Contains(DueStates, a.State) || !Scheduled(a.NextAttemptAt) {
		return time.Time{}, false
	}
	return a.NextAttemptAt, true
}
