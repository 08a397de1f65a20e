package web

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/cutover"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/views"
)

// actionPage serves /actions/{id}.
func (s *Server) actionPage(c echo.Context) error {
	d, err := s.pathAction(c)
	if err != nil {
		return err
	}
	a := d.Action
	m, err := s.actionActs(c, a)
	if err != nil {
		return err
	}
	if err := s.actionHelp(c, a, &m); err != nil {
		return err
	}
	m.Events, m.Diffs = actionEvents(a, d.Events)
	m.Attempts = actionAttempts(d.Attempts)
	m.Audit = auditLines(d.Audit)
	m.Imported = imported(a, d.Audit)
	m.Erased = erased(d.Audit)
	title := fmt.Sprintf("%s %s", a.Name, a.BusinessKey)
	return s.render(c, http.StatusOK, views.Action(live(c, s.layout(c, title, "")), m))
}

// actionActs is a's page with what the person may do to it: the acts the table
// allows them, its snooze, and the reconcile plan when a reconcile can find out
// more than the last one did.
func (s *Server) actionActs(c echo.Context, a ledger.Action) (views.ActionPage, error) {
	ctx := c.Request().Context()
	step, err := s.review(c).NextStep(ctx, a)
	if err != nil {
		return views.ActionPage{}, err
	}
	allowed := review.Allowed(actorOf(c), a)
	m := views.ActionPage{
		Action:       s.actionInfo(a, step),
		CanRetry:     allowed[review.ActRetry],
		CanReconcile: allowed[review.ActReconcile],
		CanResolve:   allowed[review.ActResolve],
		CanCancel:    allowed[review.ActCancel],
		CanAssign:    allowed[review.ActAssign],
		CanNote:      allowed[review.ActNote],
		CanSnooze:    allowed[review.ActSnooze],
		Queue:        ledger.QueueOf(a.State),
	}
	snoozes, err := s.review(c).Snoozes(ctx, []ledger.Action{a})
	if err != nil {
		return m, err
	}
	if z, ok := snoozes[a.ID]; ok {
		m.SnoozedUntil, m.SnoozedBy = stamp(z.Until), z.By
	}
	if m.CanReconcile {
		var useful bool
		m.ReconcilePlan, useful = s.review(c).ReconcilePlan(a)
		m.CanReconcile = useful
	}
	return m, nil
}

// actionHelp adds to m what helps the person act on a: its disconnected
// destination, whether its owner has an account, the next action of the queue
// they came from, the evidence a resolve may cite, whom it can be assigned to,
// what a cancel takes with it, and its correction.
func (s *Server) actionHelp(c echo.Context, a ledger.Action, m *views.ActionPage) error {
	var err error
	if m.Disconnected, err = s.disconnected(c, a); err != nil {
		return err
	}
	known, err := s.review(c).AccountHolders(c.Request().Context())
	if err != nil {
		return err
	}
	m.Action.NoAccount = a.Owner != "" && !known[strings.ToLower(a.Owner)]
	if m.NextInQueue, err = s.nextInQueue(c, a); err != nil {
		return err
	}
	for _, e := range s.review(c).Evidence(a) {
		m.Evidence = append(m.Evidence, views.Option{Label: e.Label, Value: e.Value})
	}
	if m.CanAssign {
		if m.Assignees, err = s.actionAssignees(c, a); err != nil {
			return err
		}
	}
	if err := s.cancelCascade(c, a, m); err != nil {
		return err
	}
	return s.correctionModel(c, a, m)
}

// actionAssignees are the people a can be assigned to, its current owner first
// when that is not one of them.
func (s *Server) actionAssignees(c echo.Context, a ledger.Action) ([]views.Option, error) {
	out, err := s.assignees(c, a.Client)
	if err != nil {
		return nil, err
	}
	if a.Owner != "" && !slices.ContainsFunc(out, func(o views.Option) bool { return o.Value == a.Owner }) {
		// The configured owner may be a team address, not a person who signs in.
		out = append([]views.Option{{Value: a.Owner, Label: a.Owner + " (current)"}}, out...)
	}
	return out, nil
}

// actionEvents are a's events as the page lists them and, for each event whose
// parameters conflict with a's, how they differ.
func actionEvents(a ledger.Action, events []ledger.LinkedEvent) ([]views.ActionEvent, []views.ParamDiff) {
	var out []views.ActionEvent
	var diffs []views.ParamDiff
	for _, e := range events {
		out = append(out, views.ActionEvent{ID: e.EventID, URL: eventURL(a.Client, e.EventID), Source: e.Source,
			SourceEventID: e.SourceEventID, Type: e.Type, Status: e.Status, Deliveries: e.Deliveries,
			Conflict: e.Conflict || e.EventConflict, Received: stamp(e.ReceivedAt)})
		if e.Conflict {
			diffs = append(diffs, views.ParamDiff{EventID: e.EventID, EventURL: eventURL(a.Client, e.EventID),
				Rows: diffParams(a.Params, e.Params)})
		}
	}
	return out, diffs
}

// actionAttempts are the action's attempts as the page lists them.
func actionAttempts(attempts []ledger.Attempt) []views.Attempt {
	var out []views.Attempt
	for _, t := range attempts {
		at := views.Attempt{Kind: t.Kind, OperationKey: t.OperationKey, Status: t.Status, Observed: t.Observed,
			Error: t.Error, Evidence: t.Evidence, Worker: t.Worker, Started: stamp(t.StartedAt)}
		if t.HTTPStatus != nil {
			at.HTTPStatus = fmt.Sprint(*t.HTTPStatus)
		}
		if t.FinishedAt != nil {
			at.Duration = t.FinishedAt.Sub(t.StartedAt).Round(1e6).String()
		}
		out = append(out, at)
	}
	return out
}

// imported is where an imported action came from (its import's audit entry),
// or nil for an action oncehook made.
func imported(a ledger.Action, audit []ledger.AuditEntry) *views.Imported {
	if a.ImportedFrom == "" {
		return nil
	}
	m := &views.Imported{File: a.ImportedFrom, Destination: a.Destination}
	for _, au := range audit {
		if au.Act == cutover.ActImport {
			m.By, m.At = au.Actor, stamp(au.At)
		}
	}
	return m
}

// auditLines are the action's audit trail as the page lists it.
func auditLines(audit []ledger.AuditEntry) []views.AuditLine {
	var out []views.AuditLine
	for _, au := range audit {
		out = append(out, views.AuditLine{At: stamp(au.At), Actor: au.Actor, Act: au.Act, Note: au.Note,
			Detail: detailWords(au.Detail)})
	}
	return out
}

// erased says whether an audit trail holds an erasure.
func erased(audit []ledger.AuditEntry) bool {
	return slices.ContainsFunc(audit, func(a ledger.AuditEntry) bool { return a.Act == review.ActErase })
}

// actionInfo is the action itself, with its step: the next attempt is shown only
// when a worker will act on it by itself.
func (s *Server) actionInfo(a ledger.Action, step review.Step) views.ActionInfo {
	reason, detail := review.PlainReason(a)
	info := views.ActionInfo{
		ID: a.ID, URL: actionURL(a.Client, a.ID), Name: a.Name, State: a.State, Reason: reason, ReasonDetail: detail,
		AttemptKey: a.AttemptKey, NextStep: step.Text, BusinessKey: a.BusinessKey, OperationKey: a.OperationKey,
		Source: a.Source, Client: a.Client, Environment: a.Environment, Destination: a.Destination,
		Owner: a.Owner, Attempts: a.Attempts, ExternalRef: a.ExternalRef, Params: prettyJSON(a.Params),
		Created: stamp(a.CreatedAt), Updated: stamp(a.UpdatedAt), StateSince: stamp(a.StateSince),
	}
	if step.NextAttempt != nil {
		info.NextAttempt = stamp(*step.NextAttempt)
	}
	return info
}

// retryPage is the confirmation step of Retry: it shows the operation key that
// will be sent again and, when the destination can no longer recognise it, asks
// the person to confirm they checked the destination.
func (s *Server) retryPage(c echo.Context) error {
	d, err := s.pathAction(c)
	if err != nil {
		return err
	}
	if err := mayAct(c); err != nil {
		return err
	}
	m, err := s.retryModel(c, d.Action, "", "")
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.Retry(s.layout(c, "Retry "+d.Action.Name, ""), m))
}

func (s *Server) retryModel(c echo.Context, a ledger.Action, errMsg, note string) (views.RetryPage, error) {
	m := views.RetryPage{ID: a.ID, URL: actionURL(a.Client, a.ID), Name: a.Name, BusinessKey: a.BusinessKey, State: a.State,
		Destination: a.Destination, OperationKey: a.OperationKey, NeedsCheck: s.review(c).RetryNeedsCheck(a),
		Error: errMsg, Note: note}
	var err error
	m.Disconnected, err = s.disconnected(c, a)
	return m, err
}

// reconcilePage is the confirmation step of Reconcile: what it will do and, when it
// cannot run now, why, with the reason the action has.
func (s *Server) reconcilePage(c echo.Context) error {
	d, err := s.pathAction(c)
	if err != nil {
		return err
	}
	if err := mayAct(c); err != nil {
		return err
	}
	a := d.Action
	plan, _ := s.review(c).ReconcilePlan(a)
	if why := s.review(c).Refusal(actorOf(c), review.ActReconcile, a); why != "" {
		plan = why
	}
	m := views.ReconcilePage{URL: actionURL(a.Client, a.ID), Name: a.Name, BusinessKey: a.BusinessKey, State: a.State,
		Reason: a.Reason, Plan: plan}
	dest, err := s.disconnected(c, a)
	if err != nil {
		return err
	}
	if dest != nil {
		m.Blocked = fmt.Sprintf("%s is disconnected: the lookup waits until it is reconnected (%s).", dest.Name,
			reconnectWho(*dest))
	}
	return s.render(c, http.StatusOK, views.Reconcile(s.layout(c, "Reconcile "+a.Name, ""), m))
}

// reconnectWho says who can reconnect d.
func reconnectWho(d views.Disconnected) string {
	if d.Owner != "" {
		return "an admin or " + d.Owner + " can reconnect it"
	}
	return "an admin can reconnect it"
}

// disconnected is the action's destination when it is disconnected, with who can
// reconnect it; nil when it is connected.
func (s *Server) disconnected(c echo.Context, a ledger.Action) (*views.Disconnected, error) {
	d, err := s.review(c).Destination(c.Request().Context(), a.Destination)
	if ledger.ErrorCode(err) == ledger.ENOTFOUND {
		return nil, nil // no longer configured: nothing to reconnect
	}
	if err != nil || d.Status != "disconnected" {
		return nil, err
	}
	return &views.Disconnected{Name: d.Name, Reason: d.Reason, Owner: d.Owner,
		CanReconnect: actorOf(c).Role == settings.RoleAdmin, URL: "/destinations#dest-" + d.Name}, nil
}

// snoozeChoices are the ends a snooze form offers, from now; "date" is a day
// of the person's choosing, at 09:00 UTC.
var snoozeChoices = map[string]time.Duration{"1h": time.Hour, "4h": 4 * time.Hour, "tomorrow": 24 * time.Hour,
	"week": 7 * 24 * time.Hour}

// snoozeUntil is the end of the snooze a form asks for.
func snoozeUntil(choice, date string, now time.Time) (time.Time, error) {
	if d, ok := snoozeChoices[choice]; ok {
		return now.Add(d), nil
	}
	if choice != "date" {
		return time.Time{}, ledger.Errorf(ledger.EINVALID, "Choose how long to snooze it: 1 hour, 4 hours, tomorrow, a week or a date.")
	}
	day, err := time.Parse("2006-01-02", date)
	if err != nil {
		return time.Time{}, ledger.Errorf(ledger.EINVALID, "The date %q is not a date like 2026-12-24.", date)
	}
	return day.Add(9 * time.Hour), nil
}

// actionAct serves the forms of /actions/{id}: POST .../retry|reconcile|resolve|
// cancel|assign|note|snooze|wake|undo. What the page adds around an act is in
// actPages; what the act does, and whether it reaches the destination, can be
// undone or closes the action, is review's table of acts.
func (s *Server) actionAct(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	name := c.Param("act")
	x, _ := review.LookupAct(name) // an unknown act: Do says so
	pg := actPages[name]
	p := review.ActParams{Note: c.FormValue("note"), ExternalRef: c.FormValue("external_ref"),
		Owner: c.FormValue("owner"), CheckedDestination: c.FormValue("checked_destination") == "1"}
	if pg.before != nil {
		if err := pg.before(s, c, id); err != nil {
			return err
		}
	}
	var badForm error // said only to someone who may do the act: the act's guard comes first
	if pg.form != nil {
		badForm = pg.form(s, c, &p)
	}
	a, err := s.item(c).Do(c.Request().Context(), actorOf(c), name, id, p)
	if badForm != nil && ledger.ErrorCode(err) == ledger.EINVALID {
		err = badForm
	}
	if err != nil && pg.refused != nil && ledger.ErrorCode(err) == ledger.ECONFLICT {
		return pg.refused(s, c, id, p, err)
	}
	if err != nil {
		return err
	}
	msg, err := s.actFlash(c, x, pg, a, p)
	if err != nil {
		return err
	}
	s.flash(c, msg)
	back := actionURL(c.QueryParam("client"), id)
	if q := c.FormValue("from"); x.Final && ledger.QueueStates[q] != nil {
		back = withParam(back, "from", q)
	}
	return c.Redirect(http.StatusSeeOther, back)
}

// actPage is what the action page adds around one act of review's table.
type actPage struct {
	// done is what the person is told after the act: what was done, never a
	// promise about what a worker will have done by the time the page shows; the
	// page's Next action says where it stands then.
	done func(a ledger.Action, p review.ActParams) string
	// before runs before the act, and refuses it by an error.
	before func(s *Server, c echo.Context, id int64) error
	// form reads the act's own fields into p.
	form func(s *Server, c echo.Context, p *review.ActParams) error
	// refused serves a refusal of the act (ECONFLICT) itself.
	refused func(s *Server, c echo.Context, id int64, p review.ActParams, err error) error
}

// said is an actPage's done of a fixed text.
func said(text string) func(ledger.Action, review.ActParams) string {
	return func(ledger.Action, review.ActParams) string { return text }
}

var actPages = map[string]actPage{
	review.ActRetry: {done: func(a ledger.Action, _ review.ActParams) string {
		if a.State == ledger.StateUncertain {
			return "Retry requested: the operation is looked up at the destination first, and called again with the same key only if it is not there."
		}
		return "Retry requested with the same operation key."
	}, refused: (*Server).retryRefused},
	review.ActReconcile: {done: said("Reconcile requested.")},
	review.ActResolve:   {done: said("Resolved.")},
	review.ActCancel:    {done: said("Cancelled."), before: (*Server).cancelConfirmed},
	review.ActAssign:    {done: func(a ledger.Action, _ review.ActParams) string { return "Assigned to " + a.Owner + "." }},
	review.ActNote:      {done: said("Note added.")},
	review.ActSnooze: {done: func(_ ledger.Action, p review.ActParams) string {
		return "Snoozed until " + p.Until.UTC().Format("Jan 2, 2006, 15:04 UTC") + ": out of the queues' default view and the digests until then."
	}, form: func(s *Server, c echo.Context, p *review.ActParams) (err error) {
		p.Until, err = snoozeUntil(c.FormValue("snooze"), c.FormValue("snooze_date"), s.now())
		return err
	}},
	review.ActWake: {done: said("Back in the queue: the snooze is over.")},
	review.ActUndo: {done: said("Undone.")},
}

// actFlash is what the person is told after act x on a: the page's words for it,
// then, for an act that reaches the destination, whether it can run now and that
// it cannot be undone; an act that can be undone offers Undo.
func (s *Server) actFlash(c echo.Context, x review.Act, pg actPage, a ledger.Action, p review.ActParams) (string, error) {
	msg := "Done."
	if pg.done != nil {
		msg = pg.done(a, p)
	}
	switch {
	case x.Reaches:
		step, err := s.review(c).NextStep(c.Request().Context(), a)
		if err != nil {
			return "", err
		}
		if step.HeldFor != "" || step.BlockedBy != nil {
			msg += " It cannot run now. " + step.Text
		}
		msg += " It cannot be undone: it goes to " + a.Destination + "."
	case x.Undoable:
		s.sessions.Put(c.Request().Context(), sessFlashUndo, views.ActURL(actionURL(c.QueryParam("client"), a.ID), review.ActUndo))
	case x.Final:
		msg += " It cannot be undone."
	}
	return msg, nil
}

// retryRefused takes a retry the guard refused back to the confirmation step,
// with the reason, so a person who must confirm checking the destination can do
// so there.
func (s *Server) retryRefused(c echo.Context, id int64, p review.ActParams, refusal error) error {
	d, err := s.item(c).GetAction(c.Request().Context(), id)
	if err != nil {
		return err
	}
	m, err := s.retryModel(c, d.Action, ledger.ErrorMessage(refusal), p.Note)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusConflict, views.Retry(s.layout(c, "Retry "+d.Action.Name, ""), m))
}

// nextInQueue is, after a person took a out of a queue (?from=queue), the next
// action of that queue: the one listed after a, else the first.
func (s *Server) nextInQueue(c echo.Context, a ledger.Action) (*views.QueueNext, error) {
	q := c.QueryParam("from")
	states := ledger.QueueStates[q]
	if states == nil || ledger.QueueOf(a.State) == q {
		return nil, nil
	}
	ctx := c.Request().Context()
	out := &views.QueueNext{Queue: q, QueueURL: "/queue/" + q}
	page, err := s.review(c).ListActions(ctx, review.ActionFilter{States: states, Snoozed: review.SnoozedAwake, Parked: review.ParkedOut, Cursor: strconv.FormatInt(a.ID, 10), Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(page.Actions) == 0 {
		if page, err = s.review(c).ListActions(ctx, review.ActionFilter{States: states, Snoozed: review.SnoozedAwake, Parked: review.ParkedOut, Limit: 1}); err != nil {
			return nil, err
		}
	}
	if len(page.Actions) > 0 {
		n := page.Actions[0]
		out.Next = &views.BulkRow{ID: n.ID, URL: withParam(actionURL(n.Client, n.ID), "from", q), Name: n.Name, BusinessKey: n.BusinessKey}
	}
	return out, nil
}

// cancelCascade lists, on the Cancel form, the follow-on actions cancelling a
// cancels with it.
func (s *Server) cancelCascade(c echo.Context, a ledger.Action, m *views.ActionPage) error {
	if !m.CanCancel {
		return nil
	}
	fs, err := s.review(c).FollowOns(c.Request().Context(), a)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(fs))
	for _, f := range fs {
		m.FollowOns = append(m.FollowOns, views.BulkRow{ID: f.ID, URL: actionURL(f.Client, f.ID), Name: f.Name,
			BusinessKey: f.BusinessKey, State: f.State})
		ids = append(ids, strconv.FormatInt(f.ID, 10))
	}
	m.FollowOnIDs = strings.Join(ids, ",")
	return nil
}

// cancelConfirmed refuses a Cancel the person did not confirm, or confirmed while
// shown other follow-on actions than it would cancel now.
func (s *Server) cancelConfirmed(c echo.Context, id int64) error {
	if c.FormValue("confirm") != "1" {
		return ledger.Errorf(ledger.EINVALID, "Nothing was cancelled: tick \"I understand this cannot be undone\" to cancel.")
	}
	d, err := s.item(c).GetAction(c.Request().Context(), id)
	if err != nil {
		return err
	}
	fs, err := s.review(c).FollowOns(c.Request().Context(), d.Action)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(fs))
	for _, f := range fs {
		ids = append(ids, strconv.FormatInt(f.ID, 10))
	}
	if shown := c.FormValue("follow_ons"); strings.Join(ids, ",") != shown {
		return ledger.Errorf(ledger.ECONFLICT, "Nothing was cancelled: the follow-on actions it would cancel with it "+
			"changed since the page was shown (now: %s). Look again, then confirm.", orNone(ids))
	}
	return nil
}

func orNone(ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	return "actions " + strings.Join(ids, ", ")
}
