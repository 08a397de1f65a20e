package web

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/views"
)

// sessBulk keeps the report of the person's last bulk act, for the page the act
// redirects to.
const sessBulk = "bulk_report"

// bulkReport is what a bulk act did, kept in the session as JSON between the POST
// and the page that shows it.
type bulkReport struct {
	Act     string              `json:"act"`
	Back    string              `json:"back"`
	Results []review.BulkResult `json:"results"`
}

// bulkURL is a queue's bulk confirmation step for act on the filter f or, when
// ids are given, on those ticked actions. Only Assign carries an owner.
func bulkURL(path string, f views.Filter, act, owner string, ids []int64) string {
	v := filterValues(f)
	v.Set("act", act)
	if owner != "" && act == review.ActAssign {
		v.Set("assign_owner", owner)
	}
	for _, id := range ids {
		v.Add("id", strconv.FormatInt(id, 10))
	}
	return withQuery(path+"/bulk", v)
}

// formIDs are the action ids a form or query string carries.
func formIDs(c echo.Context) ([]int64, error) {
	var raw []string
	if c.Request().Method == http.MethodGet {
		raw = c.QueryParams()["id"]
	} else {
		form, err := c.FormParams()
		if err != nil {
			return nil, ledger.Errorf(ledger.EINVALID, "The form could not be read.")
		}
		raw = form["id"]
	}
	var ids []int64
	for _, v := range raw {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return nil, ledger.Errorf(ledger.EINVALID, "%q is not an action id.", v)
		}
		ids = append(ids, n)
	}
	if len(ids) > review.MaxBulk {
		return nil, ledger.Errorf(ledger.EINVALID, "At most %d actions at once; narrow the filter.", review.MaxBulk)
	}
	return ids, nil
}

// queueBulk applies one act to the actions posted by id from the confirmation
// step, then redirects to the report, so Back never offers to send the form
// again. Ticked rows and "all that match" are never acted on straight from the
// queue: they redirect to the confirmation step, which lists each action with its
// state and what the guard will refuse, and posts exactly those ids.
func (s *Server) queueBulk(c echo.Context) error {
	path, _, f, err := queueScope(c)
	if err != nil {
		return err
	}
	act := c.FormValue("act")
	if err := mayBulk(c, act); err != nil {
		return err
	}
	ids, err := formIDs(c)
	if err != nil {
		return err
	}
	if c.FormValue("all") == "1" {
		return c.Redirect(http.StatusSeeOther, bulkURL(path, f, act, c.FormValue("assign_owner"), nil))
	}
	if c.FormValue("confirmed") != "1" {
		if len(ids) == 0 {
			return ledger.Errorf(ledger.EINVALID, "Select at least one action.")
		}
		return c.Redirect(http.StatusSeeOther, bulkURL(path, f, act, c.FormValue("assign_owner"), ids))
	}
	results, err := s.review(c).Bulk(c.Request().Context(), actorOf(c), act, ids, review.ActParams{Owner: c.FormValue("assign_owner")})
	if err != nil {
		return err
	}
	back := queueURL(path, f, "")
	raw, err := json.Marshal(bulkReport{Act: act, Back: back, Results: results})
	if err != nil {
		return err
	}
	s.sessions.Put(c.Request().Context(), sessBulk, string(raw))
	return c.Redirect(http.StatusSeeOther, path+"/bulk/done")
}

// bulkConfirm is the confirmation step of a bulk act, on the ticked ids or on all
// that match the filter: each action with its state and, for those the act's
// guard will refuse, why; and one button that acts on those.
func (s *Server) bulkConfirm(c echo.Context) error {
	path, states, f, err := queueScope(c)
	if err != nil {
		return err
	}
	act := c.QueryParam("act")
	if err := mayBulk(c, act); err != nil {
		return err
	}
	ids, err := formIDs(c)
	if err != nil {
		return err
	}
	var chosen []ledger.Action
	if len(ids) > 0 {
		chosen, err = s.review(c).ActionsByID(c.Request().Context(), ids)
	} else {
		var af review.ActionFilter
		if af, err = actionFilter(states, f); err == nil {
			chosen, err = s.review(c).MatchingActions(c.Request().Context(), af)
		}
	}
	if err != nil {
		return err
	}
	m := views.BulkConfirm{Act: act, Ticked: len(ids) > 0, Path: path, Filter: f, Owner: c.QueryParam("assign_owner"),
		Back: queueURL(path, f, ""), FilterText: filterText(f), TooMany: len(chosen) > review.MaxBulk,
		Max: review.MaxBulk}
	if !m.TooMany {
		for _, a := range chosen {
			why := s.review(c).Refusal(actorOf(c), act, a)
			if why == "" {
				m.WillDo++
			}
			m.Rows = append(m.Rows, views.BulkRow{ID: a.ID, URL: actionURL(a.Client, a.ID), Name: a.Name, BusinessKey: a.BusinessKey,
				State: a.State, Message: why})
		}
	}
	return s.render(c, http.StatusOK, views.BulkConfirmPage(s.layout(c, "Confirm: "+act, ""), m))
}

// mayBulk refuses a bulk act that does not exist, is not offered in bulk, or that
// the person may not do at all: an operator asking to assign gets one 403, not a
// confirmation page and then a report of every action refused.
func mayBulk(c echo.Context, act string) error {
	x, ok := review.LookupAct(act)
	if !ok || !x.Bulk {
		return ledger.Errorf(ledger.EINVALID, "Several actions at once can be retried, reconciled or assigned, not %q.", act)
	}
	if err := mayAct(c); err != nil {
		return err
	}
	if x.AdminOnly && actorOf(c).Role != settings.RoleAdmin {
		return ledger.Errorf(ledger.EFORBIDDEN, "Only admins can %s actions.", act)
	}
	return nil
}

// bulkDone shows the report of the person's last bulk act.
func (s *Server) bulkDone(c echo.Context) error {
	path, _, _, err := queueScope(c)
	if err != nil {
		return err
	}
	var r bulkReport
	if raw := s.sessions.GetString(c.Request().Context(), sessBulk); raw != "" {
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			return err
		}
	}
	if r.Act == "" {
		return ledger.Errorf(ledger.ENOTFOUND, "There is no recent bulk act to report.")
	}
	m := views.BulkPage{Act: r.Act, Back: r.Back}
	if m.Back == "" {
		m.Back = path
	}
	for _, res := range r.Results {
		row := views.BulkRow{ID: res.ID, Name: res.Name, BusinessKey: res.BusinessKey, Message: res.Message}
		if res.Name != "" { // named only when it exists for the person: no link to an id they made up
			row.URL = actionURL(res.Client, res.ID)
		}
		if res.Done {
			m.Done = append(m.Done, row)
		} else {
			m.Refused = append(m.Refused, row)
		}
	}
	return s.render(c, http.StatusOK, views.Bulk(s.layout(c, "Bulk "+r.Act, ""), m))
}

// filterText says in words what a filter selects, for the confirmation step.
// filterNames are the filter's fields as people name them.
var filterNames = map[string]string{"state": "state", "source": "source", "action": "action",
	"destination": "destination", "client": "client", "owner": "owner", "q": "search", "reason": "reason containing",
	"since": "created from", "until": "created before", "http_status": "HTTP status"}

func filterText(f views.Filter) string {
	var parts []string
	for _, p := range f.Pairs() {
		if p[1] != "" && p[0] != "sort" { // the order selects nothing
			parts = append(parts, filterNames[p[0]]+" \u201c"+p[1]+"\u201d")
		}
	}
	if len(parts) == 0 {
		return "no filter: every action here"
	}
	return strings.Join(parts, ", ")
}

// mayAct refuses a viewer the confirmation steps of acts, as the ledger refuses
// the acts themselves.
func mayAct(c echo.Context) error {
	if !actorOf(c).MayAct() {
		return ledger.Errorf(ledger.EFORBIDDEN, "Viewers can read but not change anything.")
	}
	return nil
}
