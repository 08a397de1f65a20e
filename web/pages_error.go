package web

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/views"
)

// wantsHTML reports whether an error reply should be a page: always on dashboard
// routes, never on /hooks or /api, and for any other path (an unknown one) when
// the client is a browser asking for HTML.
func wantsHTML(c echo.Context) bool {
	if isPage(c) {
		return true
	}
	p := c.Request().URL.Path
	if strings.HasPrefix(p, "/hooks/") || strings.HasPrefix(p, "/api/") {
		return false
	}
	return strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "text/html")
}

// errorTitles are the headings of error pages, in plain words.
var errorTitles = map[int]string{
	http.StatusBadRequest:          "Please check what you entered",
	http.StatusUnauthorized:        "Please sign in",
	http.StatusForbidden:           "Not allowed",
	http.StatusNotFound:            "Not found",
	http.StatusConflict:            "That could not be done now",
	http.StatusTooManyRequests:     "Too many attempts",
	http.StatusServiceUnavailable:  "Temporarily unavailable",
	http.StatusInternalServerError: "Something went wrong",
}

func (s *Server) renderError(c echo.Context, status int, msg string) {
	title := errorTitles[status]
	if title == "" {
		title = http.StatusText(status)
	}
	back := ""
	if ref := c.Request().Referer(); ref != "" && s.sameOrigin(c.Request(), originOf(ref)) {
		back = ref
	}
	var l views.Layout
	if sessionLoaded(c) || s.loadSessionForError(c) {
		l = s.layout(c, title, "")
	} else {
		l = baseLayout(title, "")
	}
	var buf bytes.Buffer
	if err := views.Error(l, views.ErrorPage{Status: status, Title: title, Message: msg, Back: back}).Render(c.Request().Context(), &buf); err != nil {
		s.logger.ErrorContext(c.Request().Context(), "render error page", "err", err)
		_ = c.String(status, msg)
		return
	}
	_ = c.HTMLBlob(status, buf.Bytes())
}

// originOf is the scheme://host part of an absolute URL.
func originOf(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return ""
	}
	host, _, _ := strings.Cut(rest, "/")
	return scheme + "://" + host
}

// loadSessionForError reads the session of a request that no dashboard route
// took (an unknown path), so its 404 page keeps the navigation of the person
// signed in. The session is only read: nothing of it is written back.
func (s *Server) loadSessionForError(c echo.Context) bool {
	r := c.Request()
	ck, err := r.Cookie(s.sessions.Cookie.Name)
	if err != nil {
		return false
	}
	ctx, err := s.sessions.Load(r.Context(), ck.Value)
	if err != nil {
		return false
	}
	id := s.sessions.GetInt64(ctx, sessUserID)
	if id == 0 {
		return false
	}
	u, err := accounts.GetUser(ctx, s.pool, id)
	if err != nil || u.Disabled {
		return false
	}
	c.SetRequest(r.WithContext(ctx))
	c.Set(userKey, u)
	return true
}
