package web

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/views"
)

// defaultTokenDays is the expiry the form proposes.
const defaultTokenDays = 90

// tokenAuditLines is how much of the token audit the page shows.
const tokenAuditLines = 50

// tokensPage serves /tokens (admins).
func (s *Server) tokensPage(c echo.Context) error {
	return s.showTokens(c, views.TokensPage{})
}

func (s *Server) showTokens(c echo.Context, m views.TokensPage) error {
	ctx := c.Request().Context()
	ts, err := accounts.ListTokens(ctx, s.pool)
	if err != nil {
		return err
	}
	audit, err := accounts.TokenAudit(ctx, s.pool, tokenAuditLines)
	if err != nil {
		return err
	}
	m.Roles, m.DefaultDays, m.Clients = roles, defaultTokenDays, s.cfg.Clients()
	now := s.now()
	for _, t := range ts {
		m.Rows = append(m.Rows, views.TokenRow{ID: t.ID, Name: t.Name, Role: t.Role, Clients: t.Clients, State: t.State(now),
			Created: stamp(t.CreatedAt), Expires: stampPtr(t.ExpiresAt), LastUsed: stampPtr(t.LastUsedAt)})
	}
	for _, a := range audit {
		m.Audit = append(m.Audit, views.TokenAuditRow{At: stamp(a.At), Actor: a.Actor, Act: a.Act, Token: a.Token, ID: a.ID})
	}
	return s.render(c, http.StatusOK, views.Tokens(s.layout(c, "API tokens", "tokens"), m))
}

// addToken serves POST /tokens: the new token is shown on the page it answers
// with, once, and never kept in the session.
func (s *Server) addToken(c echo.Context) error {
	days, err := strconv.Atoi(c.FormValue("expires_days"))
	if err != nil || days < 0 {
		return ledger.Errorf(ledger.EINVALID, "Expires after must be a number of days, 0 for never.")
	}
	name, role := c.FormValue("name"), c.FormValue("role")
	clients, err := s.formClients(c)
	if err != nil {
		return err
	}
	if clients, err = ledger.CheckScope(role, clients, s.cfg.Clients()); err != nil {
		return err
	}
	token, _, err := accounts.IssueToken(c.Request().Context(), s.pool, accounts.TokenParams{Name: name,
		Role: role, Clients: clients, Expires: time.Duration(days) * 24 * time.Hour, Actor: actorOf(c)})
	if err != nil {
		return err
	}
	return s.showTokens(c, views.TokensPage{NewToken: token, NewName: name})
}

// revokeToken serves POST /tokens/{id}/revoke.
func (s *Server) revokeToken(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	t, err := accounts.RevokeToken(c.Request().Context(), s.pool, actorOf(c), id)
	if err != nil {
		return err
	}
	s.flash(c, "Revoked token "+t.Name+".")
	return c.Redirect(http.StatusSeeOther, "/tokens")
}

func stampPtr(t *time.Time) views.Stamp {
	if t == nil {
		return views.Stamp{}
	}
	return stamp(*t)
}
