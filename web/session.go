package web

import (
	"net/http"
	"strings"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/alexedwards/scs/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// Session keys.
const (
	sessUserID     = "user_id"
	sessCSRF       = "csrf"
	sessFlash      = "flash"
	sessFlashError = "flash_error"
	sessFlashUndo  = "flash_undo"
)

// sessionLoadedKey marks a request whose session was loaded, so the error page
// knows whether it may read it.
const sessionLoadedKey = "session_loaded"

// newSessions returns the session manager: scs over Postgres, so every oncehook
// process sees the same sessions and a restart signs nobody out.
// The lifetimes are the config's sessions section, defaults given by the loader.
func newSessions(pool *pgxpool.Pool, p settings.Sessions, baseURL string) *scs.SessionManager {
	sm := scs.New()
	// No cleanup goroutine: web.New has no stop, and sign-in sweeps expired rows.
	sm.Store = pgxstore.NewWithCleanupInterval(pool, 0)
	sm.IdleTimeout, sm.Lifetime = p.Idle, p.Lifetime
	sm.Cookie.HttpOnly = true
	sm.Cookie.SameSite = http.SameSiteLaxMode
	sm.Cookie.Path = "/"
	sm.Cookie.Persist = false // a browser session cookie; the server enforces the timeouts
	sm.Cookie.Name = "oncehook_session"
	if strings.HasPrefix(baseURL, "https://") {
		// __Host- makes the browser refuse the cookie unless it is Secure, host-only
		// and for the whole path: no subdomain or plain-HTTP page can plant one.
		sm.Cookie.Name = "__Host-oncehook_session"
		sm.Cookie.Secure = true
	}
	return sm
}

// withSession loads the session before the handler and commits it just before the
// response's header is written, whatever writes it: the handler, a redirect or the
// error handler. Errors are rendered here, while the session is still loaded.
func (s *Server) withSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		var token string
		if ck, err := r.Cookie(s.sessions.Cookie.Name); err == nil {
			token = ck.Value
		}
		ctx, err := s.sessions.Load(r.Context(), token)
		if err != nil {
			return &ledger.Error{Code: ledger.EUNAVAILABLE, Message: "Sessions are unavailable; try again shortly.", Err: err}
		}
		c.SetRequest(r.WithContext(ctx))
		c.Set(sessionLoadedKey, true)
		c.Response().Header().Add("Vary", "Cookie")
		c.Response().Before(func() { s.commitSession(c) })
		if err := next(c); err != nil {
			c.Error(err)
		}
		return nil
	}
}

func (s *Server) commitSession(c echo.Context) {
	ctx := c.Request().Context()
	switch s.sessions.Status(ctx) {
	case scs.Modified:
		token, expiry, err := s.sessions.Commit(ctx)
		if err != nil {
			// The header is being written: too late to change the status. The
			// person sees the page; their next request finds no session.
			s.logger.ErrorContext(ctx, "commit session", "err", err)
			return
		}
		s.sessions.WriteSessionCookie(ctx, c.Response(), token, expiry)
	case scs.Destroyed:
		s.sessions.WriteSessionCookie(ctx, c.Response(), "", time.Time{})
	}
}

func sessionLoaded(c echo.Context) bool {
	ok, _ := c.Get(sessionLoadedKey).(bool)
	return ok
}

// flash keeps a message for the next page the person sees.
func (s *Server) flash(c echo.Context, msg string) {
	s.sessions.Put(c.Request().Context(), sessFlash, msg)
}
