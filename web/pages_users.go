package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/views"
)

// usersPage serves /users (admins).
func (s *Server) usersPage(c echo.Context) error {
	return s.showUsers(c, http.StatusOK, c.QueryParam("email"), oncehook.RoleOperator)
}

func (s *Server) showUsers(c echo.Context, status int, email, role string) error {
	us, err := oncehook.ListUsers(c.Request().Context(), s.pool, false)
	if err != nil {
		return err
	}
	without, err := oncehook.OwnersWithoutAccount(c.Request().Context(), s.pool, s.cfg)
	if err != nil {
		return err
	}
	me := userOf(c).ID
	m := views.UsersPage{Roles: []string{oncehook.RoleOperator, oncehook.RoleAdmin}, NewEmail: email, NewRole: role,
		MinChars: oncehook.MinPasswordLength, OwnersWithout: without}
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
	u, err := oncehook.CreateUser(c.Request().Context(), s.pool, email, role, c.FormValue("password"))
	if err != nil {
		code := oncehook.ErrorCode(err)
		if code == oncehook.EINVALID || code == oncehook.ECONFLICT {
			s.sessions.Put(c.Request().Context(), sessFlashError, oncehook.ErrorMessage(err))
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
	if err := oncehook.SetUserRole(c.Request().Context(), s.pool, actorOf(c), id, c.FormValue("role")); err != nil {
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
	if err := oncehook.SetUserDisabled(c.Request().Context(), s.pool, actorOf(c), id, disabled); err != nil {
		return err
	}
	if disabled {
		s.flash(c, "User disabled; they are signed out on their next request.")
	} else {
		s.flash(c, "User enabled.")
	}
	return c.Redirect(http.StatusSeeOther, "/users")
}
