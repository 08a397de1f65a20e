package web

import (
	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/static"
)

// pageRoutes are the dashboard's routes (docs/dashboard.md, "Signing in and the pages"). Each gets
// its middleware per route rather than from a group, because an Echo group with
// middleware claims every unmatched path under its prefix (here: all of them).
func (s *Server) pageRoutes(e *echo.Echo) {
	e.GET(static.Prefix+"*", echo.WrapHandler(static.Handler()))
	e.GET("/favicon.ico", echo.WrapHandler(static.Favicon()))

	open := []echo.MiddlewareFunc{markPage, noStore, s.withSession, s.checkCSRF}
	e.GET("/login", s.loginForm, open...)
	e.POST("/login", s.login, open...)
	e.GET("/login/oidc", s.oidcStart, open...)
	e.GET(settings.OIDCCallbackPath, s.oidcCallback, open...)

	// Signed-in routes keep a form that arrives after its session expired (before
	// the CSRF check, which would refuse it) and send the person to sign in.
	in := []echo.MiddlewareFunc{markPage, noStore, s.withSession, s.keepExpiredForm, s.checkCSRF, s.requireUser}
	admin := append(in[:len(in):len(in)], requireAdmin)
	e.POST("/logout", s.logout, in...)
	e.GET("/", s.overviewPage, in...)
	e.GET("/queue/:queue", s.queuePage, in...)
	e.POST("/queue/:queue/bulk", s.queueBulk, in...)
	e.GET("/queue/:queue/bulk", s.bulkConfirm, in...)
	e.GET("/queue/:queue/bulk/done", s.bulkDone, in...)
	e.GET("/mine", s.minePage, in...)
	e.POST("/mine/bulk", s.queueBulk, in...)
	e.GET("/mine/bulk", s.bulkConfirm, in...)
	e.GET("/mine/bulk/done", s.bulkDone, in...)
	e.GET("/actions", s.actionsPage, in...)
	e.POST("/actions/bulk", s.queueBulk, in...)
	e.GET("/actions/bulk", s.bulkConfirm, in...)
	e.GET("/actions/bulk/done", s.bulkDone, in...)
	e.GET("/actions/:id", s.actionPage, in...)
	e.GET("/actions/:id/retry", s.retryPage, in...)
	e.GET("/actions/:id/reconcile", s.reconcilePage, in...)
	e.POST("/actions/:id/correct", s.correctAct, in...)
	e.POST("/actions/:id/correction", s.correctionDecide, in...)
	e.POST("/actions/:id/:act", s.actionAct, in...)
	e.GET("/events", s.eventsPage, in...)
	e.GET("/events/replay", s.replayAllPage, admin...)
	e.POST("/events/replay", s.replayAll, admin...)
	e.GET("/events/:id", s.eventPage, in...)
	e.POST("/events/:id/replay", s.eventReplay, in...)
	e.GET("/sources", s.sourcesPage, in...)
	e.GET("/trends", s.trendsPage, in...)
	e.GET("/destinations", s.destinationsPage, in...)
	e.POST("/destinations/:name/reconnect", s.reconnect, admin...)
	e.GET("/destinations/:name/breaker", s.breakerConfirm, admin...)
	e.POST("/destinations/:name/breaker", s.breakerChange, admin...)
	e.GET("/destinations/:name/oauth/callback", s.oauthCallback, admin...)
	e.GET("/users", s.usersPage, admin...)
	e.POST("/users", s.addUser, admin...)
	e.POST("/users/:id/role", s.setUserRole, admin...)
	e.POST("/users/:id/disabled", s.setUserDisabled, admin...)
	e.GET("/tokens", s.tokensPage, admin...)
	e.POST("/tokens", s.addToken, admin...)
	e.POST("/tokens/:id/revoke", s.revokeToken, admin...)
}

// pageKey marks a dashboard request: its errors are rendered as HTML pages.
const pageKey = "page"

func markPage(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Set(pageKey, true)
		return next(c)
	}
}

func isPage(c echo.Context) bool {
	ok, _ := c.Get(pageKey).(bool)
	return ok
}

// isFragment reports an htmx request for part of a page; a history restore wants
// the whole page.
func isFragment(c echo.Context) bool {
	h := c.Request().Header
	return h.Get("HX-Request") == "true" && h.Get("HX-History-Restore-Request") != "true"
}
