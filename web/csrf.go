package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
)

// maxFormBody bounds a dashboard form; the largest is a note.
const maxFormBody = 64 << 10

// csrfToken returns the session's synchronizer token, making one on first use.
// It lives in the server-side session, so a cookie an attacker plants cannot
// stand in for it (as it could with a bare double-submit cookie).
func (s *Server) csrfToken(c echo.Context) string {
	ctx := c.Request().Context()
	if t := s.sessions.GetString(ctx, sessCSRF); t != "" {
		return t
	}
	t := newCSRFToken()
	s.sessions.Put(ctx, sessCSRF, t)
	return t
}

func newCSRFToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// newOriginCheck is the standard library's cross-origin protection (Sec-Fetch-Site,
// else Origin against Host), with the origin of base_url trusted too: behind a
// proxy the Host oncehook sees need not be the one the browser reached.
func newOriginCheck(baseURL string) (*http.CrossOriginProtection, error) {
	c := http.NewCrossOriginProtection()
	b, err := url.Parse(baseURL)
	if err != nil || b.Host == "" {
		return c, nil
	}
	if err := c.AddTrustedOrigin(b.Scheme + "://" + b.Host); err != nil {
		return c, fmt.Errorf("trust the origin of base_url: %w", err)
	}
	return c, nil
}

// checkCSRF refuses a state-changing request that another site could have made:
// one the cross-origin protection refuses (the browser says it is cross-site, or
// its Origin is foreign) and one without the session's token. /hooks and /api
// never pass through it: signatures and bearer tokens protect them, and no browser
// holds those.
func (s *Server) checkCSRF(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			return next(c)
		}
		refused := ledger.Errorf(ledger.EFORBIDDEN,
			"This form was not sent from an oncehook page, so it was refused. Reload the page and try again.")
		if err := s.origins.Check(r); err != nil {
			return refused
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, maxFormBody)
		got := r.FormValue("csrf_token")
		if got == "" {
			got = r.Header.Get("X-CSRF-Token")
		}
		want := s.sessions.GetString(r.Context(), sessCSRF)
		if want == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			return refused
		}
		return next(c)
	}
}

// sameOrigin reports whether origin is this server as the browser reached it
// (scheme and Host of the request) or as the config names it (base_url). The error
// page uses it to offer a way back to the page that sent the person.
func (s *Server) sameOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false // includes "null", sent by sandboxed frames and some redirects
	}
	scheme := "http"
	if r.TLS != nil || s.secure {
		scheme = "https"
	}
	if u.Scheme == scheme && u.Host == r.Host {
		return true
	}
	if b, err := url.Parse(s.cfg.BaseURL); err == nil && b.Host != "" {
		return u.Scheme == b.Scheme && u.Host == b.Host
	}
	return false
}
