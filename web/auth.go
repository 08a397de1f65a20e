package web

import (
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/views"
)

const userKey = "user"

// requireUser lets signed-in, enabled people through and sends everyone else to
// /login. The user is read on every request, so a disabled account, access the
// identity provider took away or a changed role takes effect at once rather than
// when the session ends.
func (s *Server) requireUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		id := s.sessions.GetInt64(ctx, sessUserID)
		if id == 0 {
			return s.toLogin(c)
		}
		u, err := accounts.GetUser(ctx, s.pool, id)
		if ledger.ErrorCode(err) == ledger.ENOTFOUND || (err == nil && (u.Disabled || u.AccessRevoked())) {
			if err := s.sessions.Destroy(ctx); err != nil {
				return err
			}
			return s.toLogin(c)
		}
		if err != nil {
			return err
		}
		c.Set(userKey, u)
		c.Set(actorKey, u.Actor())
		return next(c)
	}
}

// toLogin redirects to the sign-in page, remembering where the person was going.
func (s *Server) toLogin(c echo.Context) error {
	target := "/login"
	if c.Request().Method == http.MethodGet && c.Request().URL.Path != "/" {
		target += "?next=" + url.QueryEscape(c.Request().URL.RequestURI())
	}
	if c.Request().Header.Get("HX-Request") == "true" {
		// htmx would follow a redirect inside the page; this makes it load the form.
		c.Response().Header().Set("HX-Redirect", target)
		return c.NoContent(http.StatusUnauthorized)
	}
	return c.Redirect(http.StatusSeeOther, target)
}

// requireAdmin refuses operators; the domain refuses them too, this only keeps
// admin pages from rendering for them.
func requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if actorOf(c).Role != settings.RoleAdmin {
			return ledger.Errorf(ledger.EFORBIDDEN, "Only admins can do that.")
		}
		return next(c)
	}
}

func userOf(c echo.Context) ledger.User {
	u, _ := c.Get(userKey).(ledger.User)
	return u
}

func (s *Server) loginForm(c echo.Context) error {
	if s.sessions.GetInt64(c.Request().Context(), sessUserID) != 0 {
		return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next")))
	}
	return s.render(c, http.StatusOK, views.Login(s.layout(c, "Sign in", ""), s.loginPage(views.LoginPage{Next: c.QueryParam("next")})))
}

// login signs a person in with their password, unless the config turned
// passwords off: then the identity provider is the only way in.
func (s *Server) login(c echo.Context) error {
	ctx := c.Request().Context()
	email, next := c.FormValue("email"), c.FormValue("next")
	if s.cfg.SignIn.PasswordsOff {
		return s.refuseSignIn(c, http.StatusForbidden, "Passwords are turned off here: use the button to sign in.")
	}
	u, err := accounts.Authenticate(ctx, s.pool, s.limits, email, c.FormValue("password"), c.RealIP())
	if status, msg, ok := signInError(err); ok && ledger.ErrorCode(err) != ledger.ECONFLICT {
		return s.render(c, status, views.Login(s.layout(c, "Sign in", ""),
			s.loginPage(views.LoginPage{Email: email, Next: next, Error: msg})))
	}
	if err != nil {
		return err
	}
	return s.startSession(c, u, next)
}

// logout destroys the session in the store, not only the cookie: a copied
// session id stops working too.
func (s *Server) logout(c echo.Context) error {
	if err := s.sessions.Destroy(c.Request().Context()); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/login")
}

// safeNext keeps a post-login redirect on this site: a path and query, else "/".
// Browsers drop tabs and newlines and read a backslash as a slash, so "/\t/host"
// and "/\host" mean "//host", another site; a value with a scheme or a host is
// one too. The path is checked once more decoded, so a proxy or handler that
// decodes again cannot turn "/%2F%2Fhost" into "//host" either.
func safeNext(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		!onSitePath(next) || !onSitePath(u.Path) {
		return "/"
	}
	return next
}

// onSitePath reports whether p starts with exactly one slash and holds no
// backslash, control character, space or invalid UTF-8.
func onSitePath(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return false
	}
	return !strings.ContainsFunc(p, func(r rune) bool {
		return r == '\\' || r == utf8.RuneError || unicode.IsControl(r) || unicode.IsSpace(r)
	})
}

// requireToken authenticates the JSON API by bearer token.
func (s *Server) requireToken(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header.Get(echo.HeaderAuthorization)
		token, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || token == "" {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="oncehook"`)
			return ledger.Errorf(ledger.EUNAUTHORIZED, "An API token is required: Authorization: Bearer TOKEN.")
		}
		actor, err := accounts.AuthenticateToken(c.Request().Context(), s.pool, token)
		if err != nil {
			return err
		}
		c.Set(actorKey, actor)
		return next(c)
	}
}
