package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/views"
)

// eventPage serves /events/{id}. The payload is the sender's text: it is only
// ever shown as text, which templ escapes, never as markup.
func (s *Server) eventPage(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	d, err := s.item(c).GetEvent(c.Request().Context(), id)
	if err != nil {
		return err
	}
	e := d.Event
	m := views.EventPage{ID: e.ID, URL: eventURL(e.Client, e.ID), Source: e.Source, SourceEventID: e.SourceEventID, Type: e.Type, Status: e.Status,
		Reason: e.Reason, Deliveries: e.Deliveries, Conflict: e.Conflict, Received: stamp(e.ReceivedAt),
		LastReceived: stamp(e.LastReceivedAt), Pruned: e.Body == nil, Erased: erased(d.Audit),
		Via: e.Via, CanReplay: e.Body != nil && e.Status != ledger.EventReceived && actorOf(c).MayAct(),
		ListURL: eventsURL(views.EventFilter{Source: e.Source}, "")}
	if m.Actions, err = s.actionRows(c, d.Actions); err != nil {
		return err
	}
	if e.OccurredAt != nil {
		m.Occurred = stamp(*e.OccurredAt)
	}
	m.Payload = prettyJSON(e.Body)
	if len(e.Payload) > 0 && !bytes.Equal(e.Payload, e.Body) {
		m.Payload += "\n\n// as JSON:\n" + prettyJSON(e.Payload)
	}
	var headers map[string]any
	_ = json.Unmarshal(e.Headers, &headers) // stored by us as an object; anything else shows none
	for k, v := range headers {
		m.Headers = append(m.Headers, views.Header{Name: k, Value: fmt.Sprint(v)})
	}
	slices.SortFunc(m.Headers, func(a, b views.Header) int { return strings.Compare(a.Name, b.Name) })
	for _, au := range d.Audit {
		m.Audit = append(m.Audit, views.AuditLine{At: stamp(au.At), Actor: au.Actor, Act: au.Act, Note: au.Note,
			Detail: detailWords(au.Detail)})
	}
	for _, cf := range d.Conflicts {
		changes, same := diffBodies(e.Body, cf.Body)
		m.Conflicts = append(m.Conflicts, views.ConflictBody{Received: stamp(cf.ReceivedAt), Body: prettyJSON(cf.Body),
			Changes: changes, Same: same})
	}
	return s.render(c, http.StatusOK, views.Event(s.layout(c, fmt.Sprintf("Event %d", e.ID), ""), m))
}

// eventReplay serves the Replay button of /events/{id}.
func (s *Server) eventReplay(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if _, err := s.item(c).ReplayEvent(c.Request().Context(), actorOf(c), id, c.FormValue("note")); err != nil {
		if ledger.ErrorCode(err) != ledger.ECONFLICT {
			return err
		}
		s.sessions.Put(c.Request().Context(), sessFlashError, ledger.ErrorMessage(err))
	} else {
		s.flash(c, "Replay requested: the router routes it again with today's rules shortly.")
	}
	return c.Redirect(http.StatusSeeOther, eventURL(c.QueryParam("client"), id))
}

// prettyJSON indents JSON for reading; anything else is shown as the text it is.
func prettyJSON(b []byte) string {
	// Indentation grows with depth on every line: a deeply nested body would become
	// a page quadratically larger than itself. Past a sane depth, show it as sent.
	var out bytes.Buffer
	if jsonDepth(b) <= maxIndentDepth && json.Indent(&out, b, "", "  ") == nil {
		return out.String()
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// maxIndentDepth is the deepest payload shown indented; real webhooks nest a few
// levels, never dozens.
const maxIndentDepth = 32

// jsonDepth is the deepest nesting of objects and arrays in b, outside strings.
func jsonDepth(b []byte) int {
	depth, deepest, inString, escaped := 0, 0, false, false
	for _, c := range b {
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

func compactJSON(b []byte) string {
	var out bytes.Buffer
	if json.Compact(&out, b) == nil {
		return out.String()
	}
	return string(b)
}

// diffParams sets two parameter objects side by side, one row per name in
// either, marking the names whose values differ.
func diffParams(original, other []byte) []views.DiffRow {
	var a, b map[string]json.RawMessage
	_ = json.Unmarshal(original, &a) // params are objects we rendered ourselves
	_ = json.Unmarshal(other, &b)
	names := keysOfBoth(a, b)
	rows := make([]views.DiffRow, 0, len(names))
	for _, n := range names {
		x, y := valueText(a, n), valueText(b, n)
		rows = append(rows, views.DiffRow{Name: n, Original: x, Other: y, Differs: x != y})
	}
	return rows
}

func valueText(m map[string]json.RawMessage, name string) string {
	v, ok := m[name]
	if !ok {
		return "(absent)"
	}
	return compactJSON(v)
}
