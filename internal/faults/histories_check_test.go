package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"

	"github.com/oncehook/oncehook/internal/ledger"
)

// histAction is an action as the JSON API shows it, with its attempts.
type histAction struct {
	ID           string `json:"id"`
	BusinessKey  string `json:"business_key"`
	OperationKey string `json:"operation_key"`
	State        string `json:"state"`
	Reason       string `json:"reason"`
	ExternalRef  string `json:"external_ref"`
	Owner        string `json:"owner"`
	Attempts     []struct {
		ID       string `json:"id"`
		Kind     string `json:"kind"`
		Status   string `json:"status"`
		Observed string `json:"observed"`
	} `json:"attempts"`
}

// Observations after which a call may be made again without a lookup: the
// destination said it did nothing (429/503, 409, refused before sending, or
// refused the credentials, the destination since reconnected).
var decided = []string{string(ledger.ObsThrottled), string(ledger.ObsInFlight), string(ledger.ObsUnauthorized)}

// check returns the history's violations of the invariants, read from the CRM's
// own records and requests, the JSON API and the inbox:
//   - every delivery is acknowledged in the end (200), and every acknowledged
//     delivery is remembered: its event is in the inbox, counted as often, and a
//     body acknowledged under an id already stored with another is a conflict;
//   - every enquiry acknowledged has exactly one action, and actions have distinct keys;
//   - at most one CRM record per operation, and none that is no action's;
//   - every confirmed action's external ref is its record;
//   - every record's action is confirmed, or failed and waiting for its owner;
//   - nothing is left pending, processing, retrying, held or uncertain, and no
//     attempt is left started;
//   - one key per action: each create the CRM read carried the operation key as
//     both its idempotency key and its reference;
//   - no repeat without a lookup or a decided attempt: the CRM read no more creates
//     for an operation than the action has call attempts, and every call after the
//     first follows a strong lookup that found nothing or a call the destination
//     answered with "not done".
func (h *history) check() []string {
	var v []string
	bad := func(format string, args ...any) { v = append(v, fmt.Sprintf(format, args...)) }
	h.mu.Lock()
	refused := slices.Clone(h.refused)
	acks := map[string][]string{}
	for id, bodies := range h.acks {
		acks[id] = slices.Clone(bodies)
	}
	h.mu.Unlock()
	for _, r := range refused {
		bad("delivery %s", r)
	}

	// The inbox remembers every acknowledged delivery.
	type stored struct {
		deliveries int
		conflict   bool
	}
	inbox := map[string]stored{}
	rows, err := h.w.pool.Query(context.Background(), `SELECT source_event_id, deliveries, conflict FROM events`)
	if err != nil {
		h.t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var s stored
		if err := rows.Scan(&id, &s.deliveries, &s.conflict); err != nil {
			h.t.Fatal(err)
		}
		inbox[id] = s
	}
	if err := rows.Err(); err != nil {
		h.t.Fatal(err)
	}
	enquiries := map[string]bool{}
	for id, bodies := range acks {
		s, ok := inbox[id]
		if !ok {
			bad("event %s was acknowledged %d times but is not in the inbox", id, len(bodies))
			continue
		}
		if s.deliveries < len(bodies) {
			bad("event %s was acknowledged %d times but %d deliveries are counted", id, len(bodies), s.deliveries)
		}
		distinct := slices.Compact(slices.Sorted(slices.Values(bodies)))
		if len(distinct) > 1 && !s.conflict {
			bad("event %s was acknowledged with %d different bodies but is not flagged as a conflict", id, len(distinct))
		}
	}
	for _, o := range h.ops {
		if _, ok := acks[o.Event.ID]; ok {
			enquiries[o.Event.Enquiry] = true // an event id is planned for one enquiry
		}
	}

	actions := h.actionsWithAttempts()
	byKey := map[string]histAction{}
	perEnquiry := map[string]int{}
	for _, a := range actions {
		if _, dup := byKey[a.OperationKey]; dup {
			bad("two actions share the operation key %s", a.OperationKey)
		}
		byKey[a.OperationKey] = a
		perEnquiry[a.BusinessKey]++
	}
	for e := range enquiries {
		if perEnquiry[e] != 1 {
			bad("enquiry %s was acknowledged but has %d actions, want 1", e, perEnquiry[e])
		}
	}

	// The CRM's own records.
	records := map[string][]string{} // source_ref -> record ids
	for _, r := range h.w.crm.Records() {
		ref, _ := r.Fields["source_ref"].(string)
		records[ref] = append(records[ref], r.ID)
	}
	for ref, ids := range records {
		a, ok := byKey[ref]
		switch {
		case !ok:
			bad("CRM records %v carry %q, which is no action's key", ids, ref)
			continue
		case len(ids) > 1:
			bad("action %s (%s) has %d CRM records %v, want at most 1", a.ID, a.BusinessKey, len(ids), ids)
		}
		if a.State != ledger.StateConfirmed && !(a.State == ledger.StateFailed && a.Owner != "" && a.Reason != "") {
			bad("action %s (%s) has CRM record %v but is %s (owner %q): neither confirmed nor waiting for a person",
				a.ID, a.BusinessKey, ids, a.State, a.Owner)
		}
	}
	creates := map[string]int{}
	for _, c := range h.w.crm.Creates() {
		if c.IdempotencyKey != c.Ref {
			bad("a create carried idempotency key %q and reference %q: one key per action", c.IdempotencyKey, c.Ref)
		}
		if _, ok := byKey[c.Ref]; !ok {
			bad("a create carried reference %q, which is no action's key", c.Ref)
		}
		creates[c.Ref]++
	}

	for _, a := range actions {
		switch a.State {
		case ledger.StateConfirmed:
			if ids := records[a.OperationKey]; len(ids) != 1 || ids[0] != a.ExternalRef {
				bad("action %s (%s) is confirmed with external ref %q but the CRM holds %v for it",
					a.ID, a.BusinessKey, a.ExternalRef, ids)
			}
		case ledger.StateFailed, ledger.StateCancelled, ledger.StateResolved:
		default:
			bad("action %s (%s) is left %s: %s", a.ID, a.BusinessKey, a.State, a.Reason)
		}
		calls := 0
		for i, t := range a.Attempts {
			if t.Status == "started" {
				bad("action %s (%s) is %s with attempt %s (%s) still started", a.ID, a.BusinessKey, a.State, t.ID, t.Kind)
			}
			if t.Kind != "call" {
				continue
			}
			calls++
			if calls == 1 {
				continue
			}
			prev := a.Attempts[i-1]
			ok := prev.Status == "finished" && (prev.Kind == "lookup" && prev.Observed == string(ledger.ObsAbsentStrong) ||
				prev.Kind == "call" && slices.Contains(decided, prev.Observed))
			if !ok {
				bad("action %s (%s): call %s repeats after %s %s (%s %q) without a lookup that found nothing",
					a.ID, a.BusinessKey, t.ID, prev.Kind, prev.ID, prev.Status, prev.Observed)
			}
		}
		if n := creates[a.OperationKey]; n > calls {
			bad("action %s (%s): the CRM read %d creates for it but only %d calls were started: a repeat nobody decided",
				a.ID, a.BusinessKey, n, calls)
		}
	}
	sort.Strings(v)
	return v
}

// actionsWithAttempts lists every action through the API, each with its attempts.
func (h *history) actionsWithAttempts() []histAction {
	var all []histAction
	cursor := ""
	for {
		path := "/api/v1/actions?limit=200"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		var page struct {
			Actions []struct {
				ID string `json:"id"`
			} `json:"actions"`
			NextCursor string `json:"next_cursor"`
		}
		h.apiJSON(path, &page)
		for _, a := range page.Actions {
			var d histAction
			h.apiJSON("/api/v1/actions/"+a.ID, &d)
			all = append(all, d)
		}
		if page.NextCursor == "" || len(page.Actions) == 0 {
			return all
		}
		cursor = page.NextCursor
	}
}

func (h *history) apiJSON(path string, v any) {
	h.t.Helper()
	r := h.api(http.MethodGet, path, "")
	if r.err != nil || r.status != http.StatusOK {
		h.t.Fatalf("GET %s: %d %v %s", path, r.status, r.err, r.body)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		h.t.Fatalf("GET %s: %v", path, err)
	}
}

func readReply(res *http.Response) reply {
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return reply{status: res.StatusCode, body: b, err: err}
}
