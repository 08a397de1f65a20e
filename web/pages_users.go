package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/views"
)

// usersPage serves /users (admins).
func (s *Server) usersPage(c echo.Context) error {
	return s.showUsers(c, http.StatusOK, c.QueryParam("email"), ledger.RoleOperator)
}

func (s *Server) showUsers(c echo.Context, status int, email, role string) error {
	us, err := ledger.ListUsers(c.Request().Context(), s.pool, false)
	if err != nil {
		return err
	}
	without, err := ledger.OwnersWithoutAccount(c.Request().Context(), s.pool, s.cfg)
	if err != nil {
		return err
	}
	me := userOf(c).ID
	m := views.UsersPage{Roles: []string{ledger.RoleOperator, ledger.RoleAdmin}, NewEmail: email, NewRole: role,
		MinChars: ledger.MinPasswordLength, OwnersWithout: without}
	for _, u := range us {
		m.Rows = append(m.Rows, views.UserRow{ID: u.ID, Email: u.Email, Role: u.Role, Disabled: u.Disabled,
			Created: stamp(u.CreatedAt), IsMe: u.ID == me})
	}
	return s.render(c, status, views.Users(s.layout(c, "Users", "users"), m))
}

// addUser serves POST /users. A refusal (short password, taken email) shows the
// form again with the reason and what was typed, except the password.
func (s *Server) addUser(c echo.Context) error {
	email, role := c.FormValue("email"), c.FormValue("role")
	u, err := ledger.CreateUser(c.Request().Context(), s.pool, email, role, c.FormValue("password"))
	if err != nil {
		code := ledger.ErrorCode(err)
		if code == ledger.EINVALID || code == ledger.ECONFLICT {
			s.sessions.Put(c.Request().Context(), sessFlashError, ledger.ErrorMessage(err))
			return s.showUsers(c, statusOf[code], email, role)
		}
		return err
	}
	s.flash(c, "Added "+u.Email+" as "+u.Role+".")
	return c.Redirect(http.StatusSeeOther, "/users")
}

// setUserRole serves POST /users/{id}/role.
func (s *Server) setUserRole(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := ledger.SetUserRole(c.Request().Context(), s.pool, actorOf(c), id, c.FormValue("role")); err != nil {
		return err
	}
	s.flash(c, "Role changed.")
	return c.Redirect(http.StatusSeeOther, "/users")
}

// setUserDisabled serves POST /users/{id}/disabled with disabled=true|false.
func (s *Server) setUserDisabled(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	disabled := c.FormValue("disabled") == "true"
	if err := ledger.SetUserDisabled(c.Request().Context(), s.pool, actorOf(c), id, disabled); err != nil {
		return err
	}
	if disabled {
		s.flash(c, "User disabled; they are signed out on their next request.")
	} else {
		s.flash(c, "User enabled.")
	}
	return c.Redirect(http.StatusSeeOther, "/users")
}
