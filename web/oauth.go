package web

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// Session keys of an authorization-code flow in progress: one at a time per
// session, taken (and so spent) by the first callback that arrives.
const (
	sessOAuthDestination = "oauth_destination"
	sessOAuthState       = "oauth_state"
	sessOAuthVerifier    = "oauth_verifier"
)

// startConnect sends an admin's browser to the destination's authorize page,
// keeping the state and PKCE verifier in the session for the callback.
func (s *Server) startConnect(c echo.Context, name string) error {
	st, err := s.review(c).StartConnect(actorOf(c), name)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	s.sessions.Put(ctx, sessOAuthDestination, name)
	s.sessions.Put(ctx, sessOAuthState, st.State)
	s.sessions.Put(ctx, sessOAuthVerifier, st.Verifier)
	return c.Redirect(http.StatusSeeOther, st.URL)
}

// oauthCallback serves GET /destinations/{name}/oauth/callback: the provider
// sends the admin's browser back here with a code and the state. Only the state
// this session was given, for this destination, is accepted, and only once; a
// forged or replayed callback changes nothing.
func (s *Server) oauthCallback(c echo.Context) error {
	ctx := c.Request().Context()
	name := c.Param("name")
	dest := s.sessions.PopString(ctx, sessOAuthDestination)
	want := s.sessions.PopString(ctx, sessOAuthState)
	verifier := s.sessions.PopString(ctx, sessOAuthVerifier)
	got := c.QueryParam("state")
	if want == "" || dest != name || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return ledger.Errorf(ledger.EINVALID,
			"This sign-in reply was not started from this session (or was already used); nothing was changed. Use Reconnect on Destinations to connect %s.", name)
	}
	if e := c.QueryParam("error"); e != "" {
		return ledger.Errorf(ledger.ECONFLICT, "The provider did not grant access (%s); nothing was changed.", firstWords(e))
	}
	n, err := s.review(c).FinishConnect(ctx, actorOf(c), name, c.QueryParam("code"), verifier)
	if err != nil {
		return err
	}
	s.flash(c, fmt.Sprintf("%s is connected; %d held actions were released.", name, n))
	return c.Redirect(http.StatusSeeOther, "/destinations")
}

// allowAuthorizeForms widens the page's form-action to the authorize pages of the
// destinations connected through the browser: Reconnect posts here and is
// redirected there, and a browser applies form-action to that redirect too.
func (s *Server) allowAuthorizeForms(c echo.Context) {
	if actorOf(c).Role != settings.RoleAdmin {
		return // only admins reconnect
	}
	var origins []string
	for _, d := range s.cfg.Destinations {
		if d.Auth.OAuth2 == nil || d.Auth.OAuth2.Grant != settings.GrantAuthorizationCode {
			continue
		}
		if u, err := url.Parse(d.Auth.OAuth2.AuthorizeURL); err == nil && u.Host != "" {
			if o := u.Scheme + "://" + u.Host; !slices.Contains(origins, o) {
				origins = append(origins, o)
			}
		}
	}
	if len(origins) == 0 {
		return
	}
	csp := strings.Replace(contentSecurityPolicy, "form-action 'self'", "form-action 'self' "+strings.Join(origins, " "), 1)
	c.Response().Header().Set("Content-Security-Policy", csp)
}

func firstWords(s string) string {
	if len(s) > 80 {
		s = s[:80]
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}
