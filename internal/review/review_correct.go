package review

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// Correction is a person's edit of the params of a request the destination
// rejected, and what became of it.
type Correction struct {
	ID             int64
	ActionID       int64
	Original       json.RawMessage // the params the destination rejected
	Params         json.RawMessage // the corrected params
	ProviderReason string
	Note           string
	ProposedBy     string
	ProposedAt     time.Time
	State          string // proposed, approved or refused
	DecidedBy      string
	DecidedAt      *time.Time
	DecisionNote   string
	AttemptKey     string // the new attempt identity it was sent under; "" for the operation key
	Approve        string // its destination's rule: settings.ApproveAnotherPerson or settings.ApproveSelf
}

func (c *Correction) approverWords() string {
	if c.Approve == settings.ApproveSelf {
		return "a person with the right to approve (the proposer too)"
	}
	return "another person with the right to approve"
}

func correctionOf(c db.Correction, approve string) Correction {
	return Correction{ID: c.ID, ActionID: c.ActionID, Original: c.Original, Params: c.Params,
		ProviderReason: c.ProviderReason, Note: c.Note, ProposedBy: c.ProposedBy, ProposedAt: c.ProposedAt,
		State: c.State, DecidedBy: c.DecidedBy, DecidedAt: c.DecidedAt, DecisionNote: c.DecisionNote,
		AttemptKey: c.AttemptKey, Approve: approve}
}

// Correctable reports whether a can be corrected: it is failed, and nothing was
// performed: the destination rejected it (a 4xx), or the event could not fill a
// param and nothing was sent.
func Correctable(a ledger.Action) bool {
	return a.State == ledger.StateFailed && (strings.HasPrefix(a.Reason, string(ledger.ObsRejected)) ||
		strings.HasPrefix(a.Reason, string(ledger.ObsUnfillable)))
}

// NamedField is the param the provider's reason names, if any: the first
// top-level param whose name appears in the reason as a word.
func NamedField(reason string, params json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(params, &m) != nil {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	best, at := "", -1
	for _, k := range keys {
		loc := regexp.MustCompile(`\b` + regexp.QuoteMeta(k) + `\b`).FindStringIndex(reason)
		if loc != nil && (at < 0 || loc[0] < at) {
			best, at = k, loc[0]
		}
	}
	return best
}

// approveRule is the corrections.approve of a's destination.
func (r *Review) approveRule(destination string) string {
	if d, ok := r.cfg.Destination(destination); ok && d.Corrections.Approve == settings.ApproveSelf {
		return settings.ApproveSelf
	}
	return settings.ApproveAnotherPerson
}

// Correct proposes corrected params for the rejected action id; nothing is sent
// until a person with the right to approve approves it. EINVALID for params that
// are not a JSON object or change nothing, ECONFLICT when the action is not a
// rejected one or a correction already waits.
func (r *Review) Correct(ctx context.Context, actor ledger.Actor, id int64, params json.RawMessage, note string) (Correction, error) {
	if err := ledger.CheckText("note", note); err != nil {
		return Correction{}, err
	}
	var obj map[string]any
	if err := json.Unmarshal(params, &obj); err != nil || obj == nil {
		return Correction{}, ledger.Errorf(ledger.EINVALID, "The corrected parameters must be a JSON object.")
	}
	var out db.Correction
	err := change(ctx, r.pool, r.wakeWork, func(q *db.Queries) error {
		a, err := r.actionForAct(ctx, q, actor, id)
		if err != nil {
			return err
		}
		if !Correctable(ledger.ActionOf(a)) {
			return ledger.Errorf(ledger.ECONFLICT, "Only a request the destination rejected can be corrected; this one is %s (%s).",
				a.State, a.Reason)
		}
		if sameJSON(a.Params, params) {
			return ledger.Errorf(ledger.EINVALID, "The correction changes nothing: edit at least one parameter.")
		}
		out, err = q.CorrectionInsert(ctx, db.CorrectionInsertParams{Client: a.Client, ActionID: a.ID,
			Original: a.Params, Params: params, ProviderReason: a.Reason, Note: note, ProposedBy: actor.Name})
		if db.IsNotFound(err) {
			return ledger.Errorf(ledger.ECONFLICT, "A correction of this action already waits for approval.")
		}
		if err != nil {
			return fmt.Errorf("insert correction: %w", err)
		}
		if err := ledger.Audit(ctx, q, a.Client, a.ID, actor.Label(), "correct", note, map[string]any{
			"correction": out.ID, "original": json.RawMessage(a.Params), "corrected": params,
			"provider_reason": a.Reason}); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return Correction{}, err
	}
	return correctionOf(out, ""), nil
}

// DecideCorrection approves or refuses the correction waiting on action id. Only an
// admin or the action's or its destination's owner may; under the destination's
// default rule (another_person) the proposer may refuse but not approve it
// (EFORBIDDEN). An approved correction makes the action what the decision table
// says, with the corrected params and, where the destination kept the rejected
// key's answer, a new attempt identity.
func (r *Review) DecideCorrection(ctx context.Context, actor ledger.Actor, id int64, approve bool, note string) (ledger.Action, error) {
	if err := ledger.CheckText("note", note); err != nil {
		return ledger.Action{}, err
	}
	var out db.Action
	err := change(ctx, r.pool, r.wakeWork, func(q *db.Queries) error {
		a, err := r.actionForAct(ctx, q, actor, id)
		if err != nil {
			return err
		}
		c, err := q.CorrectionOpen(ctx, db.CorrectionOpenParams{Client: a.Client, ActionID: a.ID})
		if db.IsNotFound(err) {
			return ledger.Errorf(ledger.ECONFLICT, "No correction of action %d waits for a decision.", id)
		}
		if err != nil {
			return fmt.Errorf("read correction: %w", err)
		}
		if err := r.MayDecide(actor, ledger.ActionOf(a), c.ProposedBy, approve); err != nil {
			return err
		}
		out, err = r.applyDecision(ctx, q, actor, a, c, approve, note)
		return err
	})
	if err != nil {
		return ledger.Action{}, err
	}
	return ledger.ActionOf(out), nil
}

// MayDecide is the correction guard: whether actor may approve (or refuse) a
// correction of a that proposer made. EFORBIDDEN says who may; ECONFLICT that a
// is no longer failed.
func (r *Review) MayDecide(actor ledger.Actor, a ledger.Action, proposer string, approve bool) error {
	dest, _ := r.cfg.Destination(a.Destination)
	if !actor.MayAct() {
		return ledger.Errorf(ledger.EFORBIDDEN, "Viewers can read but not change anything.")
	}
	if actor.Role != settings.RoleAdmin && !strings.EqualFold(actor.Name, a.Owner) && !strings.EqualFold(actor.Name, dest.Owner) {
		return ledger.Errorf(ledger.EFORBIDDEN, "Only an admin or the owner of the action or of %s can decide on a correction.", a.Destination)
	}
	if approve && r.approveRule(a.Destination) == settings.ApproveAnotherPerson && strings.EqualFold(actor.Name, proposer) {
		return ledger.Errorf(ledger.EFORBIDDEN, "Corrections to %s need another person's approval, and you proposed this one; "+
			"ask someone else with the right to approve, or refuse it to withdraw it.", a.Destination)
	}
	if a.State != ledger.StateFailed {
		return ledger.Errorf(ledger.ECONFLICT, "The action is %s now; a correction applies to a failed one only.", a.State)
	}
	return nil
}

// applyDecision writes a decision on correction c of a, in the caller's transaction.
func (r *Review) applyDecision(ctx context.Context, q *db.Queries, actor ledger.Actor, a db.Action, c db.Correction,
	approve bool, note string) (db.Action, error) {
	state, act := "refused", "refuse-correction"
	key := ""
	out := a
	if approve {
		state, act = "approved", "approve-correction"
		if dest, ok := r.clients[a.Destination]; ok && ledger.CorrectionNeedsNewKey(dest.Capabilities(), a.FirstAttemptAt, r.now()) {
			key = correctionKey(a.OperationKey, c)
		}
		d := ledger.DecideCorrection(ledger.RetryPlan{Owner: a.Owner},
			fmt.Sprintf("proposed by %s, approved by %s", c.ProposedBy, actor.Name), r.now())
		rule, _ := r.cfg.Action(a.Name)
		var err error
		out, err = q.ActionApplyCorrection(ctx, db.ActionApplyCorrectionParams{Client: a.Client, ID: a.ID,
			Params: c.Params, AttemptKey: key, NextState: d.State, Reason: d.Reason,
			BudgetAttempts: int32(rule.Retry.Attempts), WithinSeconds: rule.Retry.Within.Seconds()})
		if db.IsNotFound(err) {
			return a, ledger.Errorf(ledger.ECONFLICT, "The action changed meanwhile; look again.")
		}
		if err != nil {
			return a, fmt.Errorf("apply correction: %w", err)
		}
	}
	if _, err := q.CorrectionDecide(ctx, db.CorrectionDecideParams{Client: a.Client, ID: c.ID, State: state,
		DecidedBy: actor.Name, DecisionNote: note, AttemptKey: key}); err != nil {
		return a, fmt.Errorf("record decision: %w", err)
	}
	detail := map[string]any{"correction": c.ID, "original": json.RawMessage(c.Original),
		"corrected": json.RawMessage(c.Params), "proposed_by": c.ProposedBy}
	if key != "" {
		detail["attempt_key"] = key
		detail["operation_key"] = a.OperationKey
	}
	if err := ledger.Audit(ctx, q, a.Client, a.ID, actor.Label(), act, note, detail); err != nil {
		return a, err
	}
	return out, nil
}

// CorrectionNeedsNewKey reports whether a corrected request of a would now be
// sent under a new attempt identity.
func (r *Review) CorrectionNeedsNewKey(a ledger.Action) bool {
	dest, ok := r.clients[a.Destination]
	return ok && ledger.CorrectionNeedsNewKey(dest.Capabilities(), a.FirstAttemptAt, r.now())
}

// Approvers says in words who may approve a correction of a.
func (r *Review) Approvers(a ledger.Action) string {
	who := "an admin or the owner of the action"
	if d, ok := r.cfg.Destination(a.Destination); ok && d.Owner != "" {
		who += " or " + d.Owner
	}
	if r.approveRule(a.Destination) == settings.ApproveSelf {
		return "a person with the right to approve (" + who + ", the proposer included)"
	}
	return "another person with the right to approve (" + who + ")"
}

// correctionKey is the new attempt identity of correction c of the operation
// opKey: derived from both, so it is the same however often it is computed, and
// differs from the key whose rejection the destination keeps.
func correctionKey(opKey string, c db.Correction) string {
	b, _ := json.Marshal([]any{"oncehook/v1/correction", opKey, c.ID, json.RawMessage(c.Params)})
	sum := sha256.Sum256(b)
	return "oh_" + hex.EncodeToString(sum[:16])
}

// actionForAct reads action id for actor's manual act: ENOTFOUND when it does not
// exist or is another client's, EFORBIDDEN for a viewer.
func (r *Review) actionForAct(ctx context.Context, q *db.Queries, actor ledger.Actor, id int64) (db.Action, error) {
	a, err := r.actionRow(ctx, q, actor.Scope(), id)
	if db.IsNotFound(err) {
		return a, ledger.NotFound("Action", id)
	}
	if err != nil {
		return a, fmt.Errorf("read action: %w", err)
	}
	return a, ledger.CheckActor(actor, a.Client, "Action", id)
}

// sameJSON reports whether two JSON documents hold the same values.
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}

// Corrections lists the corrections of a, oldest first.
func (r *Review) Corrections(ctx context.Context, a ledger.Action) ([]Correction, error) {
	rows, err := db.New(r.pool).CorrectionList(ctx, db.CorrectionListParams{Client: a.Client, ActionID: a.ID})
	if err != nil {
		return nil, fmt.Errorf("list corrections: %w", err)
	}
	out := make([]Correction, 0, len(rows))
	for _, c := range rows {
		out = append(out, correctionOf(c, r.approveRule(a.Destination)))
	}
	return out, nil
}

// openCorrections are the corrections waiting for a decision among the failed as.
func (r *Review) openCorrections(ctx context.Context, as []ledger.Action) (map[int64]*Correction, error) {
	var ids []int64
	clients := []string{}
	dest := map[int64]string{}
	for _, a := range as {
		if a.State == ledger.StateFailed {
			ids = append(ids, a.ID)
			dest[a.ID] = a.Destination
			if !slices.Contains(clients, a.Client) {
				clients = append(clients, a.Client)
			}
		}
	}
	out := map[int64]*Correction{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := db.New(r.pool).CorrectionOpenList(ctx, db.CorrectionOpenListParams{Clients: clients, ActionIds: ids})
	if err != nil {
		return nil, fmt.Errorf("list open corrections: %w", err)
	}
	for _, c := range rows {
		cc := correctionOf(c, r.approveRule(dest[c.ActionID]))
		out[c.ActionID] = &cc
	}
	return out, nil
}
