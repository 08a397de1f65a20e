package router

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/jsonpointer"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// prepare reads what routing ev needs: the source's rules and the event's document.
// ok is false when there is nothing to do, with the reason noted in r.
func (rt *Router) prepare(ev db.Event) (rules []settings.ActionRule, doc any, r routing, ok bool) {
	r = routing{status: ledger.EventIgnored}
	rules = rt.routes[ev.Source]
	if len(rules) == 0 {
		r.note("no action rule for source %s", ev.Source)
		return nil, nil, r, false
	}
	if !slices.ContainsFunc(rules, func(rule settings.ActionRule) bool {
		return slices.Contains(rule.On, ev.Type) || slices.Contains(rule.CancelledBy, ev.Type)
	}) { // decided without reading the body
		r.note("no action rule for event type %q", ev.Type)
		return nil, nil, r, false
	}
	body := ev.Payload
	if body == nil {
		body = ev.Body
	}
	doc, err := decodeDoc(body, rt.paths[ev.Source])
	if err != nil {
		r.note("the body is not a JSON document")
		return nil, nil, r, false
	}
	return rules, doc, r, true
}

// independent says whether routing ev only inserts actions that depend on nothing
// else routed: no rule is cancelled by its type, and no rule it matches waits for a
// predecessor or checks its resource for staleness (both need the events before it
// routed first). Such events are routed in runs (routeRun). It reads no body.
func (rt *Router) independent(ev db.Event) bool {
	for _, rule := range rt.routes[ev.Source] {
		if slices.Contains(rule.CancelledBy, ev.Type) ||
			slices.Contains(rule.On, ev.Type) && (rule.After != "" || rule.Resource != "") {
			return false
		}
	}
	return true
}

// whenHolds reports whether the event's body meets the rule's when, noting in r
// when it does not.
func whenHolds(rule settings.ActionRule, doc any, r *routing) bool {
	if settings.AllHold(rule.When, doc) {
		return true
	}
	r.note("%s: the body does not meet its when", rule.Name)
	return false
}

// routeRule creates (or finds) the action one rule asks for.
func (rt *Router) routeRule(ctx context.Context, q *db.Queries, ev db.Event, doc any, rule settings.ActionRule,
	eventTime *time.Time, ids map[string]int64, r *routing) error {
	parts, ok := keyParts(doc, rule, r)
	if !ok {
		return nil
	}
	var afterID int64 // 0: none
	if rule.After != "" {
		id, ok := ids[rule.After]
		if !ok {
			r.note("%s: waits for %s, which this event did not start", rule.Name, rule.After)
			return nil
		}
		afterID = id
	}
	resource, occurred := "", ruleTime(doc, rule, eventTime)
	if rule.Resource != "" {
		resource, _ = jsonpointer.String(doc, rule.Resource)
	}
	if resource != "" && occurred != nil {
		stale, err := rt.checkStale(ctx, q, ev, resource, *occurred)
		if err != nil {
			return err
		}
		if stale && !rule.ActOnStale {
			if r.status == ledger.EventIgnored {
				r.status = ledger.EventStale
			}
			r.note("%s: older than what was already processed for %s", rule.Name, resource)
			return nil
		}
	}
	in, err := rt.intent(ev, doc, rule, parts, afterID, resource, occurred)
	if err != nil {
		return err
	}
	newIDs, err := insertActions(ctx, q, rt.store, []actionIntent{in})
	if err != nil {
		return fmt.Errorf("insert action %s: %w", rule.Name, err)
	}
	id, err := rt.linkToAction(ctx, q, ev, in, newIDs[0], r)
	if err != nil {
		return err
	}
	ids[rule.Name] = id
	return nil
}

// keyParts reads the rule's key from the event, noting in r a part that is missing.
func keyParts(doc any, rule settings.ActionRule, r *routing) ([]string, bool) {
	parts := make([]string, 0, len(rule.Key))
	for _, ptr := range rule.Key {
		v, ok := jsonpointer.String(doc, ptr)
		if !ok || v == "" {
			r.note("%s: key field %s is missing", rule.Name, ptr)
			return nil, false
		}
		parts = append(parts, v)
	}
	return parts, true
}

// actionIntent is the action one rule of one event asks for, ready to insert.
type actionIntent struct {
	rule   settings.ActionRule
	id     ledger.OperationIdentity
	source string
	params json.RawMessage
	// unfillable names the params the event cannot fill, and why: the action is
	// created, then sent to a person (refuseUnfillable).
	unfillable string
	sum        []byte
	owner      string
	afterID    int64 // the predecessor it waits for; 0 for none
	resource   string
	occurred   *time.Time
	// cutover is the decision for a new action of an event a cutover window
	// covers (look the operation up first, or a person first); nil otherwise.
	cutover *ledger.Decision
}

// ruleTime is when the event says the rule's operation happened: the rule's own
// occurred_at field when the event has it, else the event's time.
func ruleTime(doc any, rule settings.ActionRule, eventTime *time.Time) *time.Time {
	if rule.OccurredAt != "" {
		if t, ok := pointerTime(doc, rule.OccurredAt); ok {
			return &t
		}
	}
	return eventTime
}

// intent works out the action rule asks for, with the key parts read from the event.
func (rt *Router) intent(ev db.Event, doc any, rule settings.ActionRule, parts []string, afterID int64,
	resource string, occurred *time.Time) (actionIntent, error) {
	params, unfillable, err := renderParams(doc, rule.Params)
	if err != nil {
		return actionIntent{}, fmt.Errorf("render params for %s: %w", rule.Name, err)
	}
	sum := sha256.Sum256(params)
	owner := rule.Owner
	if owner == "" {
		dest, _ := rt.cfg.Destination(rule.Destination)
		owner = dest.Owner
	}
	in := actionIntent{rule: rule, source: ev.Source, params: params, unfillable: unfillable, sum: sum[:], owner: owner,
		id:      ledger.OperationIdentity{Client: ev.Client, Environment: ev.Environment, Name: rule.Name, KeyParts: parts},
		afterID: afterID, resource: resource, occurred: occurred}
	if w := rt.cfg.CutoverOf(rule); w != nil && w.Covers(ev.OccurredAt, ev.ReceivedAt) {
		dest, _ := rt.cfg.Destination(rule.Destination)
		d := ledger.CreatedInCutover(*w, dest.Lookup.URL != "", owner, time.Now())
		in.cutover = &d
	}
	return in, nil
}

// linkToAction takes the outcome of an action's insert: the new action (newID), or, when
// newID is 0, the one that already stands for the operation, flagged as a conflict
// when this event asks for it with different params, or noted as already confirmed.
// It links the event to the action and returns its id.
func (rt *Router) linkToAction(ctx context.Context, q *db.Queries, ev db.Event, in actionIntent,
	newID int64, r *routing) (int64, error) {
	conflict := false
	if newID != 0 {
		r.created++
		if in.unfillable != "" {
			if err := rt.refuseUnfillable(ctx, q, ev.Client, newID, in); err != nil {
				return 0, err
			}
		}
	} else {
		existing, err := q.ActionGetByOperationKey(ctx, db.ActionGetByOperationKeyParams{
			Client: ev.Client, OperationKey: in.id.OperationKey()})
		if err != nil {
			return 0, fmt.Errorf("find existing action: %w", err)
		}
		newID = existing.ID
		switch {
		case len(existing.ParamsSha256) > 0 && !bytes.Equal(existing.ParamsSha256, in.sum):
			// (An operation imported without its params, oncehook import, has no
			// hash: any event's params are its own.)
			conflict = true
			if err := rt.flagConflict(ctx, q, ev, existing); err != nil {
				return 0, err
			}
		case existing.State == ledger.StateConfirmed:
			// The table keeps it confirmed (TestDecide pins that): only the link is
			// written, and later steps not done yet start, their predecessor confirmed.
			r.note("%s: %s", in.rule.Name, ledger.AlreadyConfirmed(existing, time.Now()).Reason)
		}
	}
	r.linked = append(r.linked, actionLink{client: ev.Client, actionID: newID, eventID: ev.ID,
		params: in.params, sum: in.sum, conflict: conflict})
	switch {
	case conflict:
		r.status = ledger.EventConflict
		r.note("%s: asks for operation %s with different params", in.rule.Name, in.id.BusinessKey())
	case r.status != ledger.EventConflict:
		r.status = ledger.EventRouted
	}
	return newID, nil
}

// flagConflict puts an operation that a new event asked for with different params
// in front of a person, unless it is already closed.
func (rt *Router) flagConflict(ctx context.Context, q *db.Queries, ev db.Event, a db.Action) error {
	d := ledger.Conflicting(a, ev, time.Now())
	if err := q.ActionRecordRouted(ctx, db.ActionRecordRoutedParams{Client: a.Client, ID: a.ID,
		State: d.State, Reason: ledger.Truncate(d.Reason, 1000), NextAttemptAt: d.NextAttemptAt, States: ledger.ConflictableStates}); err != nil {
		return fmt.Errorf("flag conflict: %w", err)
	}
	return ledger.Audit(ctx, q, a.Client, a.ID, "router", "conflict", d.Reason, map[string]any{"event_id": ev.ID})
}

// refuseUnfillable sends the action id, just created, to a person: a param of in
// cannot be filled from the event, and a null is never sent to a destination.
func (rt *Router) refuseUnfillable(ctx context.Context, q *db.Queries, client string, id int64, in actionIntent) error {
	d := ledger.Unfillable(in.owner, in.unfillable, time.Now())
	if err := q.ActionRecordRouted(ctx, db.ActionRecordRoutedParams{Client: client, ID: id,
		State: d.State, Reason: ledger.Truncate(d.Reason, 1000), NextAttemptAt: d.NextAttemptAt, States: ledger.ConflictableStates}); err != nil {
		return fmt.Errorf("send an unfillable action to a person: %w", err)
	}
	return ledger.Audit(ctx, q, client, id, "router", "unfillable", d.Reason, nil)
}

// checkStale locks the resource row and says whether the event is older than what
// was already processed (or cancelled) for it; if not, it records the event's time.
func (rt *Router) checkStale(ctx context.Context, q *db.Queries, ev db.Event, resource string, at time.Time) (bool, error) {
	key := db.ResourceEnsureParams{Client: ev.Client, Source: ev.Source, Resource: resource}
	if err := q.ResourceEnsure(ctx, key); err != nil {
		return false, fmt.Errorf("ensure resource: %w", err)
	}
	res, err := q.ResourceGetForUpdate(ctx, db.ResourceGetForUpdateParams(key))
	if err != nil {
		return false, fmt.Errorf("lock resource: %w", err)
	}
	if res.CancelledAt != nil && !at.After(*res.CancelledAt) {
		return true, nil
	}
	if res.LastOccurredAt != nil && at.Before(*res.LastOccurredAt) {
		return true, nil
	}
	err = q.ResourceSeen(ctx, db.ResourceSeenParams{Client: ev.Client, Source: ev.Source, Resource: resource, OccurredAt: &at})
	if err != nil {
		return false, fmt.Errorf("record resource time: %w", err)
	}
	return false, nil
}

// applyCancellations cancels the not-yet-performed actions of the event's resource
// for every rule that names this event type in cancelled_by, noting in r why a rule
// cancelled nothing.
func (rt *Router) applyCancellations(ctx context.Context, q *db.Queries, ev db.Event, doc any, rules []settings.ActionRule, r *routing) (int, error) {
	byResource := map[string][]string{} // resource pointer value -> rule names
	for _, rule := range rules {
		if rule.Resource == "" || !slices.Contains(rule.CancelledBy, ev.Type) {
			continue
		}
		if !settings.AllHold(rule.CancelWhen[ev.Type], doc) {
			r.note("%s: the body does not meet the when of its cancellation by %s", rule.Name, ev.Type)
			continue
		}
		res, ok := jsonpointer.String(doc, rule.Resource)
		if !ok || res == "" {
			r.note("%s: the body names no resource at %s to cancel", rule.Name, rule.Resource)
			continue
		}
		byResource[res] = append(byResource[res], rule.Name)
	}
	total := 0
	for res, names := range byResource {
		var at *time.Time
		for _, rule := range rules {
			if rule.OccurredAt != "" && slices.Contains(names, rule.Name) {
				if t, ok := pointerTime(doc, rule.OccurredAt); ok {
					at = &t
					break
				}
			}
		}
		if at == nil {
			at = ev.OccurredAt
		}
		key := db.ResourceEnsureParams{Client: ev.Client, Source: ev.Source, Resource: res}
		if err := q.ResourceEnsure(ctx, key); err != nil {
			return 0, fmt.Errorf("ensure resource: %w", err)
		}
		if err := rt.store.CancelResource(ctx, q, db.ResourceCancelParams{Client: ev.Client, Source: ev.Source, Resource: res, OccurredAt: at}); err != nil {
			return 0, fmt.Errorf("record cancellation: %w", err)
		}
		ids, err := q.ActionCancelByResource(ctx, db.ActionCancelByResourceParams{
			Client: ev.Client, Source: ev.Source, Resource: res, Names: names, States: ledger.EventCancellableStates,
			Reason: fmt.Sprintf("cancelled by event %d (%s)", ev.ID, ev.Type),
		})
		if err != nil {
			return 0, fmt.Errorf("cancel actions: %w", err)
		}
		for _, id := range ids {
			if err := ledger.Audit(ctx, q, ev.Client, id, "router", "cancel",
				fmt.Sprintf("cancelled by event %d (%s)", ev.ID, ev.Type), map[string]any{"event_id": ev.ID}); err != nil {
				return 0, err
			}
			if err := ledger.CancelSuccessors(ctx, q, ev.Client, id, "router"); err != nil {
				return 0, err
			}
		}
		total += len(ids)
	}
	return total, nil
}

// pathsBySource is what each source's rules read of an event's document.
func pathsBySource(actions []settings.ActionRule) map[string]*docPaths {
	bySource := map[string][]settings.ActionRule{}
	for _, r := range actions {
		bySource[r.Source] = append(bySource[r.Source], r)
	}
	out := make(map[string]*docPaths, len(bySource))
	for source, rules := range bySource {
		out[source] = pathsFor(rules)
	}
	return out
}

// rulesBySource returns each source's rules with every predecessor before its
// successors, the order the router applies them in.
func rulesBySource(actions []settings.ActionRule) map[string][]settings.ActionRule {
	bySource := map[string][]settings.ActionRule{}
	for _, r := range actions {
		bySource[r.Source] = append(bySource[r.Source], r)
	}
	for source, rules := range bySource {
		bySource[source] = predecessorsFirst(rules)
	}
	return bySource
}

// predecessorsFirst orders rules so that every predecessor comes before its successors.
func predecessorsFirst(rules []settings.ActionRule) []settings.ActionRule {
	ordered := make([]settings.ActionRule, 0, len(rules))
	placed := map[string]bool{}
	for len(ordered) < len(rules) {
		progress := false
		for _, r := range rules {
			if !placed[r.Name] && (r.After == "" || placed[r.After]) {
				ordered, placed[r.Name], progress = append(ordered, r), true, true
			}
		}
		if !progress { // the loader refuses cycles; never loop forever anyway
			break
		}
	}
	return ordered
}

// renderParams renders an action's params from the event: a JSON object whose
// nested params are nested objects and lists. A {result: action} param is left out
// (or null in a list) until its call, when fillResults puts it in.
// renderParams writes the params of a rule from doc. unfillable names each param
// the event cannot fill, and why ("" when every one is filled): such a param is
// written as null and the action goes to a person before anything is sent.
func renderParams(doc any, params []settings.Param) (b json.RawMessage, unfillable string, err error) {
	var problems []string
	b, err = json.Marshal(renderObject(doc, params, "", &problems)) // map keys are sorted: the hash is stable
	if err != nil {
		return nil, "", fmt.Errorf("encode params: %w", err)
	}
	return b, strings.Join(problems, "; "), nil
}

// renderObject writes params from doc; prefix is where they sit among the rule's
// params ("deal." for a nested mapping), for naming one the event cannot fill.
func renderObject(doc any, params []settings.Param, prefix string, problems *[]string) map[string]any {
	out := make(map[string]any, len(params))
	for _, p := range params {
		if v, ok := renderParam(doc, p, prefix, problems); ok {
			out[p.Name] = v
		}
	}
	return out
}

func renderParam(doc any, p settings.Param, prefix string, problems *[]string) (any, bool) {
	switch {
	case p.Result != "":
		return nil, false
	case p.Pointer != "":
		v, _ := jsonpointer.Get(doc, p.Pointer)
		return v, true
	case p.Money != nil:
		v, problem := p.Money.Render(doc)
		if problem != "" {
			*problems = append(*problems, prefix+p.Name+": "+problem)
		}
		return v, true
	case p.IsObject:
		return renderObject(doc, p.Object, prefix+p.Name+".", problems), true
	case p.IsList:
		out := make([]any, 0, len(p.List))
		for i, q := range p.List {
			if q.Money != nil || q.IsObject || q.IsList { // named only where a value may go unfilled
				q.Name = fmt.Sprintf("%s[%d]", p.Name, i)
			}
			v, _ := renderParam(doc, q, prefix, problems)
			out = append(out, v)
		}
		return out, true
	}
	return p.Const, true
}

// pointerTime reads a time at ptr: RFC 3339 text or unix seconds.
func pointerTime(doc any, ptr string) (time.Time, bool) {
	s, ok := jsonpointer.String(doc, ptr)
	if !ok {
		return time.Time{}, false
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, true
	}
	if secs, err := strconv.ParseInt(s, 10, 64); err == nil && secs > 0 {
		return time.Unix(secs, 0), true
	}
	return time.Time{}, false
}
