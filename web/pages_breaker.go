package web

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/views"
)

// untilLayout is how the page's datetime-local field writes a time (UTC).
const untilLayout = "2006-01-02T15:04"

// breakerConfirm is the step before an admin opens or closes a breaker by hand
// ("/destinations/{name}/breaker?state=open|closed"): what will happen, the
// actions of each client that wait, where the outage is told, and the reason.
func (s *Server) breakerConfirm(c echo.Context) error {
	name, state := c.Param("name"), c.QueryParam("state")
	if _, ok := s.cfg.Destination(name); !ok {
		return ledger.Errorf(ledger.ENOTFOUND, "No destination is named %q.", name)
	}
	if state != ledger.BreakerOpen && state != ledger.BreakerClosed {
		return ledger.Errorf(ledger.EINVALID, "A breaker is opened or closed by hand, not %q.", state)
	}
	waiting, err := s.review(c).WaitingFor(c.Request().Context(), name)
	if err != nil {
		return err
	}
	m := views.BreakerConfirmPage{Name: name, State: state, Told: toldOn(s.cfg.AlertChannelsOf(name), state)}
	for _, w := range waiting {
		m.Waiting = append(m.Waiting, views.WaitingView{Client: w.Client, Actions: w.Actions})
	}
	title := "Open the breaker of " + name
	if state == ledger.BreakerClosed {
		title = "Close the breaker of " + name
	}
	return s.render(c, http.StatusOK, views.BreakerConfirm(s.layout(c, title, "destinations"), m))
}

// toldOn says where the change of a breaker is told.
func toldOn(channels []string, state string) string {
	what := "Its outage is told"
	if state == ledger.BreakerClosed {
		what = "Its recovery is told, once the quiet time has passed,"
	}
	if len(channels) == 0 {
		return "No alert channel is set for it: nobody is told."
	}
	return fmt.Sprintf("%s on %s (unless it continues an outage told already).", what, strings.Join(channels, ", "))
}

// breakerChange opens or closes a breaker by hand, from the confirmation step,
// then goes back to the destinations page saying what it did.
func (s *Server) breakerChange(c echo.Context) error {
	name := c.Param("name")
	if c.FormValue("confirmed") != "1" {
		return c.Redirect(http.StatusSeeOther, "/destinations/"+name+"/breaker?state="+c.FormValue("state"))
	}
	ch := review.BreakerChange{State: c.FormValue("state"), Reason: c.FormValue("reason")}
	if u := strings.TrimSpace(c.FormValue("until")); u != "" {
		t, err := time.ParseInLocation(untilLayout, u, time.UTC)
		if err != nil {
			return ledger.Errorf(ledger.EINVALID, "%q is not a time like 2026-12-07T16:00 (UTC).", u)
		}
		ch.Until = &t
	}
	res, err := s.review(c).SetBreaker(c.Request().Context(), actorOf(c), name, ch)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("The breaker of %s is closed; %d parked actions were released.", name, res.Released)
	if res.State == ledger.BreakerOpen {
		msg = fmt.Sprintf("The breaker of %s is open by hand; no probe goes until it is closed.", name)
		if res.Until != nil {
			msg = fmt.Sprintf("The breaker of %s is open by hand until %s UTC, when a probe goes first.", name,
				res.Until.UTC().Format("2006-01-02 15:04"))
		}
	}
	s.flash(c, msg)
	return c.Redirect(http.StatusSeeOther, "/destinations#dest-"+name)
}
