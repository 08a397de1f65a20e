package review

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/oncehook/oncehook/internal/ledger"
)

// Reasons are stored as the decision table wrote them: the observation, then the
// destination's or the worker's own words. People read them as a sentence first,
// the stored text kept for whoever wants the detail.

// plainObservations says each observation as a sentence about destination %[1]s.
var plainObservations = map[ledger.Observation]string{
	ledger.ObsSuccess:          "%[1]s confirmed it.",
	ledger.ObsAlreadyConfirmed: "The same operation was already confirmed at %[1]s.",
	ledger.ObsRejected:         "%[1]s refused the request as it was sent: it needs correcting before it can succeed.",
	ledger.ObsUnauthorized:     "%[1]s refused oncehook's credentials: it is disconnected until someone reconnects it.",
	ledger.ObsInFlight:         "%[1]s is still working on the same request; it is tried again shortly.",
	ledger.ObsThrottled:        "%[1]s asked oncehook to slow down or was not reachable; it is tried again later.",
	ledger.ObsUnsure:           "Nobody knows yet whether %[1]s acted: the call got no clear answer after it was sent.",
	ledger.ObsFound:            "%[1]s has the record: it was looked up and found.",
	ledger.ObsAbsentStrong:     "%[1]s does not have the record, so it is sent again.",
	ledger.ObsKeyRemembered:    "%[1]s still remembers the key, so sending it again cannot act twice.",
	ledger.ObsUnknowable:       "Nobody can tell from here whether %[1]s acted: check it there by hand.",
	ledger.ObsLookupFailed:     "Looking the operation up at %[1]s failed; it is looked up again later.",
	ledger.ObsBudgetSpent:      "oncehook gave up trying %[1]s: the attempts or the time allowed ran out.",
	ledger.ObsLeaseNoAttempt:   "A worker stopped before calling %[1]s; another one takes it.",
	ledger.ObsLeaseStarted:     "A worker stopped during its call to %[1]s, so nobody knows yet whether it acted.",
	ledger.ObsLeaseReconcile:   "A worker stopped while looking the operation up at %[1]s.",
	ledger.ObsConflict:         "A later event asked for the same operation with different values: a person decides which is right.",
	ledger.ObsUnfillable:       "The event cannot fill a value of the request to %[1]s, so nothing was sent: correct the request first.",
	ledger.ObsExists:           "%[1]s says the record already exists; it is looked up to confirm.",
	ledger.ObsExistsNoLookup:   "%[1]s says the record already exists, and it cannot be looked up: check it there by hand.",
	ledger.ObsAbsentUnsettled:  "%[1]s does not show the record yet; it is looked up again once its lookups have caught up.",
	ledger.ObsAbsentSettled:    "%[1]s does not have the record, so it is sent again.",
	ledger.ObsRetryByPerson:    "A person asked to send it again with the same key.",
	ledger.ObsRetryLookupFirst: "A person asked to send it again; it is looked up at %[1]s first.",
}

// The ways a reason starts besides an observation.
const (
	causeGaveUp         = "gave up after"
	causeOutcomeUnknown = "outcome unknown"
	causeReconcileAsked = "reconcile requested by"
	causeCancelled      = "its predecessor was cancelled"
)

// causePrefixes are what a stored reason can start with, for grouping by cause.
func causePrefixes() []string {
	out := []string{causeGaveUp, causeOutcomeUnknown, causeReconcileAsked, causeCancelled}
	for o := range plainObservations {
		out = append(out, string(o))
	}
	return out
}

// causeOf is the prefix of causePrefixes reason starts with (the longest), or "".
func causeOf(reason string) string {
	best := ""
	for _, p := range causePrefixes() {
		if strings.HasPrefix(reason, p) && len(p) > len(best) {
			best = p
		}
	}
	return best
}

// PlainReason is a's reason as a sentence a process owner reads, and the stored
// reason it comes from (the detail, for a disclosure); the sentence is "" when
// the reason is empty, and the stored reason itself when no sentence fits it.
func PlainReason(a ledger.Action) (sentence, detail string) {
	reason := a.Reason
	if reason == "" {
		return "", ""
	}
	cause := causeOf(reason)
	words := providerWords(reason, cause)
	switch cause {
	case "":
		return reason, ""
	case causeGaveUp:
		inner := reason[strings.Index(reason, "): ")+3:]
		if i := strings.LastIndex(inner, "; owner "); i >= 0 {
			inner = inner[:i]
		}
		s, _ := PlainReason(ledger.Action{Reason: inner, Destination: a.Destination})
		return fmt.Sprintf("oncehook gave up after %d attempts. Last time: %s", a.Attempts, lowerFirst(s)), reason
	case causeOutcomeUnknown:
		return sentenceWith(fmt.Sprintf("Nobody can tell from here whether %s acted: check it there by hand.", a.Destination), ""), reason
	case causeReconcileAsked, causeCancelled:
		return upperFirst(reason) + ".", ""
	}
	s := fmt.Sprintf(plainObservations[ledger.Observation(cause)], a.Destination)
	if ledger.Observation(cause) == ledger.ObsRejected || ledger.Observation(cause) == ledger.ObsExistsNoLookup ||
		ledger.Observation(cause) == ledger.ObsUnfillable {
		return sentenceWith(s, words), reason
	}
	return s, reason
}

// providerWords is what follows the cause in reason: the destination's own words,
// without a Go error's wrapping (`Post "http://...": `).
func providerWords(reason, cause string) string {
	w := strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(reason, cause), ":"))
	if strings.HasPrefix(w, "HTTP ") {
		if _, rest, ok := strings.Cut(w, ": "); ok {
			w = rest
		}
	}
	// A JSON reply says its message under one of the usual names.
	var reply map[string]any
	if json.Unmarshal([]byte(w), &reply) == nil {
		for _, k := range []string{"message", "error", "detail", "title", "reason"} {
			if m, ok := reply[k].(string); ok && m != "" {
				return ledger.Truncate(m, 200)
			}
			if m, ok := reply[k].(map[string]any); ok {
				if s, ok := m["message"].(string); ok && s != "" {
					return ledger.Truncate(s, 200)
				}
			}
		}
	}
	return ledger.Truncate(w, 200)
}

// sentenceWith is s with the destination's words after it, quoted.
func sentenceWith(s, words string) string {
	if words == "" || strings.Contains(words, "://") {
		return s
	}
	return s + " It said: \u201c" + words + "\u201d"
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func lowerFirst(s string) string {
	if s == "" || strings.HasPrefix(s, "oncehook") {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
