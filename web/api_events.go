package web

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
)

// eventFilter reads the events list's filters from the query: source, status, type,
// via, from and to (RFC 3339, or a date), q (the provider's event id), limit, cursor.
func eventFilter(c echo.Context) (review.EventFilter, error) {
	limit, err := queryInt(c, "limit")
	if err != nil {
		return review.EventFilter{}, err
	}
	f := review.EventFilter{Source: c.QueryParam("source"), Status: c.QueryParam("status"),
		Type: c.QueryParam("type"), Via: c.QueryParam("via"), Q: c.QueryParam("q"),
		Limit: limit, Cursor: c.QueryParam("cursor")}
	if f.From, err = queryTime(c, "from"); err != nil {
		return f, err
	}
	f.To, err = queryTime(c, "to")
	return f, err
}

// queryTime reads an RFC 3339 time, a datetime-local value as the pages' form sends
// it, or a date; all but RFC 3339 are read as UTC.
func queryTime(c echo.Context, name string) (time.Time, error) {
	v := c.QueryParam(name)
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, ledger.Errorf(ledger.EINVALID, "%s must be a time such as 2026-01-31T12:00:00Z or a date such as 2026-01-31.", name)
}

func (s *Server) apiListEvents(c echo.Context) error {
	f, err := eventFilter(c)
	if err != nil {
		return err
	}
	page, err := s.review(c).ListEvents(c.Request().Context(), f)
	if err != nil {
		return err
	}
	out := struct {
		Events     []eventJSON `json:"events"`
		NextCursor string      `json:"next_cursor"`
	}{Events: []eventJSON{}, NextCursor: page.NextCursor}
	for _, e := range page.Events {
		out.Events = append(out.Events, toEventJSON(e))
	}
	return c.JSON(http.StatusOK, out)
}

func (s *Server) apiGetEvent(c echo.Context) error {
	n, err := pathID(c)
	if err != nil {
		return err
	}
	d, err := s.item(c).GetEvent(c.Request().Context(), n)
	if err != nil {
		return err
	}
	e := d.Event
	out := eventDetailJSON{
		eventJSON: toEventJSON(e),
		Reason:    e.Reason, Headers: e.Headers, Body: string(e.Body), OccurredAt: e.OccurredAt,
		LastReceivedAt: e.LastReceivedAt.UTC(), Conflicts: []conflictJSON{}, Actions: []actionJSON{}, Audit: []auditJSON{},
	}
	for _, cf := range d.Conflicts {
		out.Conflicts = append(out.Conflicts, conflictJSON{Body: string(cf.Body), ReceivedAt: cf.ReceivedAt.UTC()})
	}
	if out.Actions, err = s.actionsJSON(c, d.Actions); err != nil {
		return err
	}
	for _, a := range d.Audit {
		out.Audit = append(out.Audit, auditJSON{Actor: a.Actor, Act: a.Act, Note: a.Note, Detail: a.Detail, At: a.At.UTC()})
	}
	return c.JSON(http.StatusOK, out)
}

// replayBody is the body of a replay: why, and for "replay all that match" the count
// the person confirmed.
type replayBody struct {
	Note     string `json:"note"`
	Expected int    `json:"expected"`
}

// apiReplayEvent routes one stored event again: 202, as the router does the work.
func (s *Server) apiReplayEvent(c echo.Context) error {
	n, err := pathID(c)
	if err != nil {
		return err
	}
	body, err := readReplayBody(c)
	if err != nil {
		return err
	}
	if _, err := s.item(c).ReplayEvent(c.Request().Context(), actorOf(c), n, body.Note); err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]any{"event_id": id(n), "replayed": true})
}

// apiReplayMatching replays every event the query's filters match (admins), when
// they are no more than the body's expected count.
func (s *Server) apiReplayMatching(c echo.Context) error {
	f, err := eventFilter(c)
	if err != nil {
		return err
	}
	body, err := readReplayBody(c)
	if err != nil {
		return err
	}
	res, err := s.review(c).ReplayMatching(c.Request().Context(), actorOf(c), f, body.Expected, body.Note)
	if err != nil {
		return err
	}
	ids := make([]string, len(res.Replayed))
	for i, n := range res.Replayed {
		ids[i] = id(n)
	}
	return c.JSON(http.StatusAccepted, map[string]any{"replayed": ids, "skipped": res.Skipped})
}

func readReplayBody(c echo.Context) (replayBody, error) {
	var body replayBody
	if c.Request().ContentLength != 0 {
		if err := c.Bind(&body); err != nil {
			return body, ledger.Errorf(ledger.EINVALID, "The body must be a JSON object with note (and expected, to replay all that match).")
		}
	}
	return body, nil
}
