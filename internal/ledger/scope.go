package ledger

import (
	"slices"
	"strings"

	"github.com/oncehook/oncehook/internal/settings"
)

// Scope is the clients a reader sees, as every scoped query takes it: all, or the
// listed ones. It is the one rule every read and act of the dashboard and the API
// goes through, written into SQL as (@all_clients OR client = ANY(@scope_clients)).
type Scope struct {
	All     bool
	Clients []string
}

// EveryClient is the scope of the engine, the command line and admins.
var EveryClient = Scope{All: true, Clients: []string{}}

// Scope is what a sees: every client for an admin, else a's clients (none for an
// actor without a role, so a forgotten role shows nothing).
func (a Actor) Scope() Scope {
	if a.Role == settings.RoleAdmin {
		return EveryClient
	}
	return Scope{Clients: append([]string{}, a.Clients...)}
}

// Sees reports whether a may read the records of client.
func (a Actor) Sees(client string) bool { return a.Scope().Sees(client) }

// MayAct reports whether a may do anything at all (a viewer only reads).
func (a Actor) MayAct() bool { return a.Role == settings.RoleAdmin || a.Role == settings.RoleOperator }

// Sees reports whether the scope holds client.
func (s Scope) Sees(client string) bool { return s.All || slices.Contains(s.Clients, client) }

// Of keeps those of clients the scope sees, in their order.
func (s Scope) Of(clients []string) []string {
	out := []string{}
	for _, c := range clients {
		if s.Sees(c) {
			out = append(out, c)
		}
	}
	return out
}

// NotFound is how a record of a client outside the scope is refused: as if it did
// not exist, so a person learns nothing of other clients' records.
func NotFound(what string, id int64) error {
	return Errorf(ENOTFOUND, "%s %d does not exist.", what, id)
}

// CheckActor refuses an act by actor on a record of client: ENOTFOUND outside its
// scope, EFORBIDDEN for a viewer.
func CheckActor(actor Actor, client, what string, id int64) error {
	if !actor.Sees(client) {
		return NotFound(what, id)
	}
	if !actor.MayAct() {
		return Errorf(EFORBIDDEN, "Viewers can read but not change anything.")
	}
	return nil
}

// CheckScope refuses (EINVALID) a role that is not admin, operator or viewer, and
// clients that known does not hold; an admin has no clients (it sees all), an
// operator or viewer needs at least one. It returns the clients cleaned and sorted.
func CheckScope(role string, clients, known []string) ([]string, error) {
	out, err := ScopeShape(role, clients)
	if err != nil {
		return nil, err
	}
	for _, c := range out {
		if !slices.Contains(known, c) {
			return nil, Errorf(EINVALID, "No source of the config has the client %q; the clients are: %s.", c, strings.Join(known, ", "))
		}
	}
	return out, nil
}

// ScopeShape is CheckScope without the config: the role known, the clients
// cleaned, none for an admin and some for anyone else.
func ScopeShape(role string, clients []string) ([]string, error) {
	if err := checkRole(role); err != nil {
		return nil, err
	}
	out := []string{}
	for _, c := range clients {
		c = strings.TrimSpace(c)
		if c == "" || slices.Contains(out, c) {
			continue
		}
		if err := CheckText("client", c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	slices.Sort(out)
	switch {
	case role == settings.RoleAdmin && len(out) > 0:
		return nil, Errorf(EINVALID, "An admin sees every client; give clients to operators and viewers only.")
	case role != settings.RoleAdmin && len(out) == 0:
		return nil, Errorf(EINVALID, "An %s needs at least one client to see.", role)
	}
	return out, nil
}

// Actor is who asks for a manual act: a signed-in person or an API token.
type Actor struct {
	Name    string // an email, or "token:<name>"
	Role    string
	Clients []string // the clients an operator or a viewer sees; an admin sees every one
	// Subject is the identity provider's subject of a person who signed in
	// through it, "" otherwise. Owners and proposers are matched by Name.
	Subject string
}

// Label names the actor in an audit trail: the email, and for a person who
// signed in through the identity provider, their subject there beside it, as in
// "ann@example.com (sub 248289761001)". Emails can move between people; the
// subject is the provider's lasting name for one.
func (a Actor) Label() string {
	if a.Subject == "" {
		return a.Name
	}
	return a.Name + " (sub " + a.Subject + ")"
}

func checkRole(role string) error {
	if role != settings.RoleAdmin && role != settings.RoleOperator && role != settings.RoleViewer {
		return Errorf(EINVALID, "The role must be admin, operator or viewer, not %q.", role)
	}
	return nil
}
