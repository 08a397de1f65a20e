package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/views"
)

// eventsPageSize is a screenful of events.
const eventsPageSize = 50

// eventsViewFilter is the events list's filter as the form sent it.
func eventsViewFilter(c echo.Context) views.EventFilter {
	return views.EventFilter{Source: c.FormValue("source"), Status: c.FormValue("status"), Type: c.FormValue("type"),
		Via: c.FormValue("via"), From: c.FormValue("from"), To: c.FormValue("to"), Q: strings.TrimSpace(c.FormValue("q"))}
}

// eventsFilter reads the page's filter into the ledger's; the form's times are UTC.
func eventsFilter(f views.EventFilter) (review.EventFilter, error) {
	out := review.EventFilter{Source: f.Source, Status: f.Status, Type: f.Type, Via: f.Via, Q: f.Q}
	var err error
	if out.From, err = formTime("from", f.From); err != nil {
		return out, err
	}
	out.To, err = formTime("to", f.To)
	return out, err
}

func formTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339, "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, ledger.Errorf(ledger.EINVALID, "The %s time %q is not a date and time.", name, v)
}

// eventsURL is the events list with its filter and an optional cursor.
func eventsURL(f views.EventFilter, cursor string) string {
	return eventsPathURL("/events", f, cursor)
}

func eventsPathURL(path string, f views.EventFilter, cursor string) string {
	v := url.Values{}
	for k, val := range map[string]string{"source": f.Source, "status": f.Status, "type": f.Type, "via": f.Via,
		"from": f.From, "to": f.To, "q": f.Q, "cursor": cursor} {
		if val != "" {
			v.Set(k, val)
		}
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// eventsPage serves /events.
func (s *Server) eventsPage(c echo.Context) error {
	vf := eventsViewFilter(c)
	f, err := eventsFilter(vf)
	if err != nil {
		return err
	}
	cursor := c.QueryParam("cursor")
	f.Cursor, f.Limit = cursor, eventsPageSize
	page, err := s.review(c).ListEvents(c.Request().Context(), f)
	if err != nil {
		return err
	}
	m := views.EventsPage{Filter: vf}
	for _, src := range s.review(c).Catalog().Sources {
		m.Sources = append(m.Sources, views.Option{Value: src, Label: src})
	}
	for _, st := range review.EventStatuses {
		m.Statuses = append(m.Statuses, views.Option{Value: st, Label: st})
	}
	for _, v := range review.EventVias {
		m.Vias = append(m.Vias, views.Option{Value: v, Label: v})
	}
	for _, e := range page.Events {
		m.Rows = append(m.Rows, views.EventRow{ID: e.ID, URL: eventURL(e.Client, e.ID), Source: e.Source,
			SourceEventID: e.SourceEventID, Type: e.Type, Status: e.Status, Via: e.Via, Deliveries: e.Deliveries,
			Received: stamp(e.ReceivedAt), Reason: e.Reason})
	}
	if page.NextCursor != "" {
		m.NextURL = eventsURL(vf, page.NextCursor)
	}
	if cursor != "" {
		m.FirstURL = eventsURL(vf, "")
	}
	if actorOf(c).Role == settings.RoleAdmin {
		m.ReplayURL = eventsPathURL("/events/replay", vf, "")
	}
	return s.render(c, http.StatusOK, views.Events(s.layout(c, "Events", "events"), m))
}

// replayAllPage is the confirmation step of "replay all that match" (admins): it
// shows how many events the filter matches now.
func (s *Server) replayAllPage(c echo.Context) error {
	vf := eventsViewFilter(c)
	return s.renderReplayAll(c, http.StatusOK, vf, "")
}

func (s *Server) renderReplayAll(c echo.Context, status int, vf views.EventFilter, errMsg string) error {
	f, err := eventsFilter(vf)
	if err != nil {
		return err
	}
	n, err := s.review(c).CountEvents(c.Request().Context(), f)
	if err != nil {
		return err
	}
	m := views.ReplayAllPage{Filter: vf, Count: n, TooMany: n > review.MaxReplayMatching, Back: eventsURL(vf, ""), Error: errMsg}
	return s.render(c, status, views.ReplayAll(s.layout(c, "Replay all that match", "events"), m))
}

// replayAll replays every event that matches, when they are no more than the
// count the admin confirmed; otherwise the confirmation is shown again.
func (s *Server) replayAll(c echo.Context) error {
	vf := eventsViewFilter(c)
	f, err := eventsFilter(vf)
	if err != nil {
		return err
	}
	expected, err := strconv.Atoi(c.FormValue("expected"))
	if err != nil || expected < 0 {
		return ledger.Errorf(ledger.EINVALID, "The confirmed count is missing.")
	}
	res, err := s.review(c).ReplayMatching(c.Request().Context(), actorOf(c), f, expected, c.FormValue("note"))
	if err != nil {
		if code := ledger.ErrorCode(err); code == ledger.ECONFLICT || code == ledger.EINVALID {
			return s.renderReplayAll(c, http.StatusConflict, vf, ledger.ErrorMessage(err))
		}
		return err
	}
	msg := fmt.Sprintf("%d %s replayed: the router routes %s again with today's rules shortly.", len(res.Replayed),
		map[bool]string{true: "event", false: "events"}[len(res.Replayed) == 1], map[bool]string{true: "it", false: "them"}[len(res.Replayed) == 1])
	if res.Skipped > 0 {
		msg += " " + strconv.Itoa(res.Skipped) + " skipped (still waiting, or body dropped by retention)."
	}
	s.flash(c, msg)
	return c.Redirect(http.StatusSeeOther, eventsURL(vf, ""))
}
