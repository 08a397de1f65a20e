package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/views"
)

// roles are the roles the forms offer, the least first.
var roles = []string{settings.RoleViewer, settings.RoleOperator, settings.RoleAdmin}

// usersPage serves /users (admins).
func (s *Server) usersPage(c echo.Context) error {
	return s.showUsers(c, http.StatusOK, c.QueryParam("email"), settings.RoleOperator, nil)
}

func (s *Server) showUsers(c echo.Context, status int, email, role string, clients []string) error {
	us, err := accounts.ListUsers(c.Request().Context(), s.pool, false)
	if err != nil {
		return err
	}
	without, err := accounts.OwnersWithoutAccount(c.Request().Context(), s.pool, s.cfg)
	if err != nil {
		return err
	}
	me := userOf(c).ID
	m := views.UsersPage{Roles: roles, NewEmail: email, NewRole: role,
		MinChars: accounts.MinPasswordLength, OwnersWithout: without, Clients: s.cfg.Clients(), NewClients: clients}
	for _, u := range us {
		m.Rows = append(m.Rows, views.UserRow{ID: u.ID, Email: u.Email, Role: u.Role, Clients: u.Clients, Disabled: u.Disabled,
			Created: stamp(u.CreatedAt), IsMe: u.ID == me})
	}
	return s.render(c, status, views.Users(s.layout(c, "Users", "users"), m))
}

// addUser serves POST /users. A refusal (short password, taken email) shows the
// form again with the reason and what was typed, except the password.
func (s *Server) addUser(c echo.Context) error {
	email, role := c.FormValue("email"), c.FormValue("role")
	clients, err := s.formClients(c)
	if err != nil {
		return err
	}
	if role == settings.RoleAdmin {
		clients = nil // an admin sees every client, whatever is ticked
	}
	clients, err = ledger.CheckScope(role, clients, s.cfg.Clients())
	var u ledger.User
	if err == nil {
		u, err = accounts.CreateUser(c.Request().Context(), s.pool, email, role, c.FormValue("password"), clients...)
	}
	if err != nil {
		code := ledger.ErrorCode(err)
		if code == ledger.EINVALID || code == ledger.ECONFLICT {
			s.sessions.Put(c.Request().Context(), sessFlashError, ledger.ErrorMessage(err))
			return s.showUsers(c, statusOf[code], email, role, clients)
		}
		return err
	}
	s.flash(c, "Added "+u.Email+" as "+scopeWords(u.Role, u.Clients)+".")
	return c.Redirect(http.StatusSeeOther, "/users")
}

// setUserRole serves POST /users/{id}/role.
func (s *Server) setUserRole(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	clients, err := s.formClients(c)
	if err != nil {
		return err
	}
	role := c.FormValue("role")
	if role == settings.RoleAdmin {
		clients = nil // an admin sees every client, whatever is ticked
	}
	if clients, err = ledger.CheckScope(role, clients, s.cfg.Clients()); err != nil {
		return err
	}
	if err := accounts.SetUserRole(c.Request().Context(), s.pool, actorOf(c), id, role, clients...); err != nil {
		return err
	}
	s.flash(c, "Role changed: "+scopeWords(role, clients)+".")
	return c.Redirect(http.StatusSeeOther, "/users")
}

// setUserDisabled serves POST /users/{id}/disabled with disabled=true|false.
func (s *Server) setUserDisabled(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	disabled := c.FormValue("disabled") == "true"
	if err := accounts.SetUserDisabled(c.Request().Context(), s.pool, actorOf(c), id, disabled); err != nil {
		return err
	}
	if disabled {
		s.flash(c, "User disabled; they are signed out on their next request.")
	} else {
		s.flash(c, "User enabled.")
	}
	return c.Redirect(http.StatusSeeOther, "/users")
}

// formClients are the clients ticked in the form (the checkboxes named clients).
func (s *Server) formClients(c echo.Context) ([]string, error) {
	form, err := c.FormParams()
	if err != nil {
		return nil, ledger.Errorf(ledger.EINVALID, "The form could not be read.")
	}
	return form["clients"], nil
}

// scopeWords says a role with its clients: "admin", "viewer of acme, globex".
func scopeWords(role string, clients []string) string {
	if role == settings.RoleAdmin || len(clients) == 0 {
		return role
	}
	return role + " of " + strings.Join(clients, ", ")
}
