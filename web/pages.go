package web

import (
	"bytes"
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/static"
	"github.com/oncehook/oncehook/views"
)

// render writes a page. It renders into a buffer first, so a failure half-way
// becomes an error page instead of half a page with a 200.
func (s *Server) render(c echo.Context, status int, page templ.Component) error {
	var buf bytes.Buffer
	if err := page.Render(c.Request().Context(), &buf); err != nil {
		return fmt.Errorf("render page: %w", err)
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// baseLayout is the frame without a session: assets and title only.
func baseLayout(title, section string) views.Layout {
	return views.Layout{
		Title: title, Section: section,
		CSS:     []string{static.URL("css/pico.min.css"), static.URL("css/app.css")},
		Scripts: []string{static.URL("js/htmx.min.js"), static.URL("js/dashboard.js")},
		Icon:    static.URL("img/favicon.svg"),
	}
}

// layout is the frame of a page for this request's person: who they are, their
// CSRF token and any message left for them by the previous request.
func (s *Server) layout(c echo.Context, title, section string) views.Layout {
	l := baseLayout(title, section)
	ctx := c.Request().Context()
	l.CSRF = s.csrfToken(c)
	l.Flash = s.sessions.PopString(ctx, sessFlash)
	l.FlashError = s.sessions.PopString(ctx, sessFlashError)
	l.FlashUndo = s.sessions.PopString(ctx, sessFlashUndo)
	l.Kept = s.keptFor(c)
	l.LiveAt = stamp(s.now())
	if u := userOf(c); u.ID != 0 {
		l.User = &views.User{ID: u.ID, Email: u.Email, Role: u.Role, Admin: u.Role == settings.RoleAdmin}
		l.NavCounts = s.navCounts(c)
	}
	return l
}

// when formats a time for people: UTC, to the second.
func when(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// stamp is t for a <time> element.
func stamp(t time.Time) views.Stamp {
	if t.IsZero() {
		return views.Stamp{}
	}
	return views.Stamp{ISO: t.UTC().Format(time.RFC3339), UTC: when(t)}
}

// ageOf is how long ago t was, for a <time> element that stays current.
func ageOf(now, t time.Time) views.Age {
	if t.IsZero() {
		return views.Age{}
	}
	return views.Age{ISO: t.UTC().Format(time.RFC3339), Text: age(now, t)}
}

// age is how long ago t was, in the largest two units that matter.
func age(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

// actionURL and eventURL are the pages of an action and an event. Each names the
// item's client, so on Citus the page reads that client's shard alone
// (Server.item); an empty client leaves it out (the page then finds the item
// among the reader's clients).
func actionURL(client string, id int64) string { return itemURL("/actions/", client, id) }
func eventURL(client string, id int64) string  { return itemURL("/events/", client, id) }

func itemURL(prefix, client string, id int64) string {
	u := prefix + strconv.FormatInt(id, 10)
	if client != "" {
		u += "?client=" + url.QueryEscape(client)
	}
	return u
}

// withParam is u with k=v added to its query.
func withParam(u, k, v string) string {
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + url.QueryEscape(k) + "=" + url.QueryEscape(v)
}

// actionRows turns actions into table rows, each with its next step as the
// ledger computes it.
func (s *Server) actionRows(c echo.Context, as []ledger.Action) ([]views.ActionRow, error) {
	steps, err := s.review(c).NextSteps(c.Request().Context(), as)
	if err != nil {
		return nil, err
	}
	notes, err := s.review(c).LatestNotes(c.Request().Context(), as)
	if err != nil {
		return nil, err
	}
	snoozes, err := s.review(c).Snoozes(c.Request().Context(), as)
	if err != nil {
		return nil, err
	}
	now := s.now()
	rows := make([]views.ActionRow, 0, len(as))
	for _, a := range as {
		reason, detail := review.PlainReason(a)
		rows = append(rows, views.ActionRow{
			ID: a.ID, URL: actionURL(a.Client, a.ID), State: a.State, Name: a.Name, BusinessKey: a.BusinessKey,
			Source: a.Source, Destination: a.Destination, Owner: a.Owner, Attempts: a.Attempts,
			Created: ageOf(now, a.CreatedAt), Age: ageOf(now, a.StateSince), Reason: reason, ReasonDetail: detail,
			NextStep: cmp.Or(steps[a.ID].Short, steps[a.ID].Text), Act: s.rowAct(c, a, steps[a.ID].Act),
			Note: ledger.Truncate(strings.Join(strings.Fields(notes[a.ID].Text), " "), noteWords), NoteBy: notes[a.ID].By,
			SnoozedUntil: stamp(snoozes[a.ID].Until), SnoozedBy: snoozes[a.ID].By,
		})
		r := &rows[len(rows)-1]
		if s.review(c).Refusal(actorOf(c), review.ActRetry, a) == "" {
			r.RetryURL = views.ActURL(r.URL, review.ActRetry)
		}
		if s.review(c).Refusal(actorOf(c), review.ActAssign, a) == "" {
			r.AssignURL = views.ActURL(r.URL, review.ActAssign)
		}
	}
	return rows, nil
}

// noteWords is how much of its newest note a row shows, in bytes.
const noteWords = 60

// rowActs are the labels of the acts a row offers, and where each one's guard
// is: the confirmation pages of Retry and Reconcile, the forms of the action's
// page for the others (what they ask for, a note or the corrected params, is
// typed there), the destinations page for Reconnect.
var rowActs = map[string]struct{ label, at string }{
	review.ActRetry:     {"Retry", "/retry"},
	review.ActReconcile: {"Reconcile", "/reconcile"},
	review.ActResolve:   {"Resolve", "#resolve-note"},
	review.ActCancel:    {"Cancel", "#cancel-note"},
	review.ActCorrect:   {"Correct", "#correct"},
	review.ActDecide:    {"Approve or refuse", "#correction"},
}

// rowAct is the button of a's row for its next step's act, when the person may
// do it now; nil otherwise.
func (s *Server) rowAct(c echo.Context, a ledger.Action, act string) *views.RowAct {
	actor := actorOf(c)
	u := actionURL(a.Client, a.ID)
	switch act {
	case "":
		return nil
	case review.ActReconnect:
		if actor.Role != settings.RoleAdmin {
			return nil
		}
		return &views.RowAct{Label: "Reconnect", URL: "/destinations", Aria: "Reconnect " + a.Destination}
	case review.ActCorrect, review.ActDecide:
		if !actor.MayAct() || a.State != ledger.StateFailed {
			return nil
		}
	default:
		if s.review(c).Refusal(actor, act, a) != "" {
			return nil
		}
	}
	x := rowActs[act]
	if strings.HasPrefix(x.at, "/") {
		u = views.ActURL(u, x.at[1:])
	} else {
		u += x.at
	}
	return &views.RowAct{Label: x.label, URL: u, Aria: x.label + " action " + strconv.FormatInt(a.ID, 10) + " " + a.Name + " " + a.BusinessKey}
}

// assignees are the people work of any of clients can be assigned to: the
// enabled users who see one of them.
func (s *Server) assignees(c echo.Context, clients ...string) ([]views.Option, error) {
	var out []views.Option
	for _, cl := range clients {
		us, err := s.review(c).Assignees(c.Request().Context(), cl)
		if err != nil {
			return nil, err
		}
		for _, u := range us {
			if !slices.ContainsFunc(out, func(o views.Option) bool { return o.Value == u.Email }) {
				out = append(out, views.Option{Value: u.Email, Label: u.Email + " (" + u.Role + ")"})
			}
		}
	}
	slices.SortFunc(out, func(a, b views.Option) int { return strings.Compare(a.Value, b.Value) })
	return out, nil
}

// flagOwners marks the rows whose owner has no account.
func (s *Server) flagOwners(c echo.Context, rows []views.ActionRow) error {
	known, err := s.review(c).AccountHolders(c.Request().Context())
	if err != nil {
		return err
	}
	for i := range rows {
		rows[i].NoAccount = rows[i].Owner != "" && !known[strings.ToLower(rows[i].Owner)]
	}
	return nil
}

// live makes a page update by itself: the script polls its own URL.
func live(c echo.Context, l views.Layout) views.Layout {
	l.Live, l.LiveURL = true, c.Request().URL.RequestURI()
	return l
}

const waitingKey = "waiting"

// waiting is what the open actions wait for, read once a request: the
// navigation's counts, the overview and a queue's causes come from one read.
func (s *Server) waiting(c echo.Context) (review.Waiting, error) {
	if w, ok := c.Get(waitingKey).(review.Waiting); ok {
		return w, nil
	}
	w, err := s.review(c).Waiting(c.Request().Context())
	if err != nil {
		return review.Waiting{}, err
	}
	c.Set(waitingKey, w)
	return w, nil
}

// navCounts are the open actions of each queue, for the navigation; nil (no
// counts shown) when they cannot be read: the page itself still renders.
func (s *Server) navCounts(c echo.Context) map[string]views.NavCount {
	w, err := s.waiting(c)
	if err != nil {
		s.logger.WarnContext(c.Request().Context(), "count queues for the navigation", "err", err)
		return nil
	}
	out := make(map[string]views.NavCount, len(w.Queues))
	for _, q := range w.Queues {
		out[q.Name] = views.NavCount{N: q.Count, About: q.About, More: q.More}
	}
	return out
}
