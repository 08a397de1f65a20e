package web

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/views"
)

// correctionModel fills the action page's correction parts: the form that
// corrects a rejected request, or the correction waiting for a decision.
func (s *Server) correctionModel(c echo.Context, a ledger.Action, m *views.ActionPage) error {
	if a.State != ledger.StateFailed {
		return nil
	}
	cs, err := s.review(c).Corrections(c.Request().Context(), a)
	if err != nil {
		return err
	}
	actor := actorOf(c)
	if i := slices.IndexFunc(cs, func(x review.Correction) bool { return x.State == "proposed" }); i >= 0 {
		x := cs[i]
		oc := &views.OpenCorrection{ProposedBy: x.ProposedBy, ProposedAt: stamp(x.ProposedAt), Note: x.Note,
			Rows: diffParams(x.Original, x.Params), NewIdentity: s.review(c).CorrectionNeedsNewKey(a),
			CanRefuse: s.review(c).MayDecide(actor, a, x.ProposedBy, false) == nil}
		if err := s.review(c).MayDecide(actor, a, x.ProposedBy, true); err != nil {
			oc.WhyNot = ledger.ErrorMessage(err)
		} else {
			oc.CanApprove = true
		}
		m.Correction = oc
		return nil
	}
	if !review.Correctable(a) || !actor.MayAct() {
		return nil
	}
	m.CanCorrect = true
	m.Correct = views.CorrectForm{ProviderReason: a.Reason, NamedField: review.NamedField(a.Reason, a.Params),
		Approve: s.review(c).Approvers(a)}
	var params map[string]json.RawMessage
	_ = json.Unmarshal(a.Params, &params) // params are objects we rendered ourselves
	names := make([]string, 0, len(params))
	for k := range params {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		f := views.CorrectField{Name: k, Named: k == m.Correct.NamedField}
		var str string
		if json.Unmarshal(params[k], &str) == nil {
			f.Value = str
		} else {
			f.Value, f.JSON = compactJSON(params[k]), true
		}
		m.Correct.Fields = append(m.Correct.Fields, f)
	}
	return nil
}

// correctedParams reads the correction form: each "p.NAME" field, as a string, or
// as JSON where "json.NAME" says so.
func correctedParams(c echo.Context) (json.RawMessage, error) {
	form, err := c.FormParams()
	if err != nil {
		return nil, ledger.Errorf(ledger.EINVALID, "The form could not be read.")
	}
	out := map[string]json.RawMessage{}
	for k, vs := range form {
		name, ok := strings.CutPrefix(k, "p.")
		if !ok || len(vs) == 0 {
			continue
		}
		if form.Get("json."+name) == "1" {
			if !json.Valid([]byte(vs[0])) {
				return nil, ledger.Errorf(ledger.EINVALID, "%s must be JSON (a number, true, false, null, a list or an object).", name)
			}
			out[name] = json.RawMessage(vs[0])
			continue
		}
		b, _ := json.Marshal(vs[0])
		out[name] = b
	}
	return json.Marshal(out)
}

// correctAct serves POST /actions/{id}/correct: a correction proposed from the form.
func (s *Server) correctAct(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	params, err := correctedParams(c)
	if err != nil {
		return err
	}
	if _, err := s.item(c).Correct(c.Request().Context(), actorOf(c), id, params, c.FormValue("note")); err != nil {
		return err
	}
	s.flash(c, "Correction proposed. Nothing is sent until it is approved.")
	return c.Redirect(http.StatusSeeOther, actionURL(c.QueryParam("client"), id))
}

// correctionDecide serves POST /actions/{id}/correction: approve or refuse.
func (s *Server) correctionDecide(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	approve := c.FormValue("decision") == "approve"
	if !approve && c.FormValue("decision") != "refuse" {
		return ledger.Errorf(ledger.EINVALID, "Approve or refuse the correction.")
	}
	if _, err := s.item(c).DecideCorrection(c.Request().Context(), actorOf(c), id, approve, c.FormValue("note")); err != nil {
		return err
	}
	msg := "Correction refused; the action stays failed."
	if approve {
		msg = "Correction approved: it is performed with the corrected parameters."
	}
	s.flash(c, msg)
	return c.Redirect(http.StatusSeeOther, actionURL(c.QueryParam("client"), id))
}
