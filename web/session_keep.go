package web

import (
	"encoding/json"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/views"
)

// sessKept is a form that arrived after its session had expired, kept for the
// person until they have signed in again and are back on the page it came from.
const sessKept = "kept_form"

// keptForm is what was typed into a form, where it was sent and from which page.
type keptForm struct {
	Page   string      `json:"page"`   // the page the form was on
	Action string      `json:"action"` // where it was sent
	Fields [][2]string `json:"fields"` // name and value, in order, without the CSRF token
}

// keepExpiredForm runs before the CSRF check on the signed-in routes. A form sent
// from one of this server's pages after the person's session expired would fail
// that check (the token lived in the old session); instead its fields are kept in
// the new session and the person signs in, then lands back on the form's page,
// where the page offers what they typed. Nothing is performed on the way: the
// person sends the form again, with a fresh token, once signed in. A form from
// another site is left to the CSRF check, which refuses it.
func (s *Server) keepExpiredForm(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Method != http.MethodPost || s.sessions.GetInt64(r.Context(), sessUserID) != 0 || r.URL.Path == "/logout" {
			return next(c)
		}
		page := refererPath(r)
		origin := r.Header.Get("Origin")
		sameSite := r.Header.Get("Sec-Fetch-Site") == "same-origin" || (origin != "" && s.sameOrigin(r, origin))
		if page == "" || !sameSite {
			return next(c)
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, maxFormBody)
		if err := r.ParseForm(); err != nil {
			return next(c)
		}
		k := keptForm{Page: page, Action: safeNext(r.URL.RequestURI())} // the query names the item's client
		for name, values := range r.PostForm {
			if keptNever[name] {
				continue
			}
			for _, v := range values {
				k.Fields = append(k.Fields, [2]string{name, v})
			}
		}
		raw, err := json.Marshal(k)
		if err != nil {
			return err
		}
		ctx := r.Context()
		s.sessions.Put(ctx, sessKept, string(raw))
		s.flash(c, "Your session had expired, so nothing was sent. Sign in again: what you typed is kept.")
		return c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(page))
	}
}

// keptNever are the fields a kept form leaves out: the old token, and the
// confirmations a person gives for what they see now (that they checked the
// destination, that a cancel cannot be undone, how many events a replay touches).
// Given before the session expired, possibly hours ago, they are asked again.
var keptNever = map[string]bool{"csrf_token": true, "checked_destination": true, "confirm": true, "expected": true}

// refererPath is the path and query of the page a form was sent from, when that
// page is on this server; "" otherwise.
func refererPath(r *http.Request) string {
	u, err := url.Parse(r.Referer())
	if err != nil || u.Host != r.Host || u.Path == "" || u.Path == "/login" {
		return ""
	}
	return safeNext(u.RequestURI())
}

// keptFor pops the form kept for the page of this request, if there is one.
func (s *Server) keptFor(c echo.Context) *views.KeptForm {
	ctx := c.Request().Context()
	raw := s.sessions.GetString(ctx, sessKept)
	if raw == "" || s.sessions.GetInt64(ctx, sessUserID) == 0 {
		return nil
	}
	var k keptForm
	if err := json.Unmarshal([]byte(raw), &k); err != nil || k.Page != c.Request().URL.RequestURI() {
		return nil
	}
	s.sessions.Remove(ctx, sessKept)
	out := &views.KeptForm{Action: k.Action}
	for _, f := range k.Fields {
		out.Fields = append(out.Fields, views.KeptField{Name: f[0], Value: f[1], Label: keptLabels[f[0]]})
	}
	return out
}

// keptLabels are the fields people type, shown for them to check; the others
// (ids, the act, the filter) travel hidden.
var keptLabels = map[string]string{
	"note": "Note", "external_ref": "External ref", "owner": "Owner", "assign_owner": "Assign to",
	"email": "Email", "role": "Role",
}
