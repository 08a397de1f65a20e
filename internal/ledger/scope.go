package ledger

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/oncehook/oncehook/db"
)

// scope is the clients a reader sees, as every scoped query takes it: all, or the
// listed ones. It is the one rule every read and act of the dashboard and the API
// goes through, written into SQL as (@all_clients OR client = ANY(@scope_clients)).
type scope struct {
	all     bool
	clients []string
}

// everyClient is the scope of the engine, the command line and admins.
var everyClient = scope{all: true, clients: []string{}}

// scope is what a sees: every client for an admin, else a's clients (none for an
// actor without a role, so a forgotten role shows nothing).
func (a Actor) scope() scope {
	if a.Role == RoleAdmin {
		return everyClient
	}
	return scope{clients: append([]string{}, a.Clients...)}
}

// Sees reports whether a may read the records of client.
func (a Actor) Sees(client string) bool { return a.scope().sees(client) }

// MayAct reports whether a may do anything at all (a viewer only reads).
func (a Actor) MayAct() bool { return a.Role == RoleAdmin || a.Role == RoleOperator }

func (s scope) sees(client string) bool { return s.all || slices.Contains(s.clients, client) }

// of keeps those of clients the scope sees, in their order.
func (s scope) of(clients []string) []string {
	out := []string{}
	for _, c := range clients {
		if s.sees(c) {
			out = append(out, c)
		}
	}
	return out
}

// For returns the review service as actor sees it: every list, count and page it
// reads holds only the clients actor sees. NewReview's own sees every client.
func (r *Review) For(actor Actor) *Review {
	s := *r
	s.scope = actor.scope()
	return &s
}

// notFound is how a record of a client outside the scope is refused: as if it did
// not exist, so a person learns nothing of other clients' records.
func notFound(what string, id int64) error {
	return Errorf(ENOTFOUND, "%s %d does not exist.", what, id)
}

// checkActor refuses an act by actor on a record of client: ENOTFOUND outside its
// scope, EFORBIDDEN for a viewer.
func checkActor(actor Actor, client, what string, id int64) error {
	if !actor.Sees(client) {
		return notFound(what, id)
	}
	if !actor.MayAct() {
		return Errorf(EFORBIDDEN, "Viewers can read but not change anything.")
	}
	return nil
}

// Clients are the clients the config's sources name, in config order.
func (c *Config) Clients() []string {
	var out []string
	for _, s := range c.Sources {
		if !slices.Contains(out, s.Client) {
			out = append(out, s.Client)
		}
	}
	return out
}

// CheckScope refuses (EINVALID) a role that is not admin, operator or viewer, and
// clients that known does not hold; an admin has no clients (it sees all), an
// operator or viewer needs at least one. It returns the clients cleaned and sorted.
func CheckScope(role string, clients, known []string) ([]string, error) {
	out, err := scopeShape(role, clients)
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

// scopeShape is CheckScope without the config: the role known, the clients
// cleaned, none for an admin and some for anyone else.
func scopeShape(role string, clients []string) ([]string, error) {
	if err := checkRole(role); err != nil {
		return nil, err
	}
	out := []string{}
	for _, c := range clients {
		c = strings.TrimSpace(c)
		if c == "" || slices.Contains(out, c) {
			continue
		}
		if err := checkText("client", c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	slices.Sort(out)
	switch {
	case role == RoleAdmin && len(out) > 0:
		return nil, Errorf(EINVALID, "An admin sees every client; give clients to operators and viewers only.")
	case role != RoleAdmin && len(out) == 0:
		return nil, Errorf(EINVALID, "An %s needs at least one client to see.", role)
	}
	return out, nil
}

// seesDestination reports whether the reader sees the destination called name: a
// destination serves the clients whose sources' rules act there, and a person of
// some clients sees those that serve any of them (its held count holds only theirs).
func (r *Review) seesDestination(name string) bool {
	if r.scope.all {
		return true
	}
	for _, rule := range r.cfg.Actions {
		if rule.Destination != name {
			continue
		}
		if src, ok := r.cfg.Source(rule.Source); ok && r.scope.sees(src.Client) {
			return true
		}
	}
	return false
}

// Assignees are the enabled users who see client, by email: the people work of
// client can be assigned to.
func (r *Review) Assignees(ctx context.Context, client string) ([]User, error) {
	users, err := ListUsers(ctx, r.pool, true)
	if err != nil {
		return nil, err
	}
	out := []User{}
	for _, u := range users {
		if u.Actor().Sees(client) {
			out = append(out, u)
		}
	}
	return out, nil
}

// checkAssignee refuses (EINVALID) an owner who is not an enabled user seeing client.
func checkAssignee(ctx context.Context, q *db.Queries, owner, client string) error {
	u, err := q.UserGetByEmail(ctx, owner)
	if err != nil && !db.IsNotFound(err) {
		return fmt.Errorf("read owner: %w", err)
	}
	if err != nil || u.Disabled || !userOf(u).Actor().Sees(client) {
		return Errorf(EINVALID, "%s cannot see this client's work, so it cannot be assigned to them; "+
			"choose someone who can, or ask an admin to give them the client.", owner)
	}
	return nil
}

// Catalog is what of the config a reader sees, for the pages' filters: the
// sources and clients in their scope, the rules of those sources and the
// destinations those rules act at.
type Catalog struct {
	Sources, Clients, Actions, Destinations []string
}

// Catalog returns the reader's part of the config, in config order.
func (r *Review) Catalog() Catalog {
	var out Catalog
	for _, s := range r.cfg.Sources {
		if r.scope.sees(s.Client) {
			out.Sources = append(out.Sources, s.Name)
		}
	}
	out.Clients = r.scope.of(r.cfg.Clients())
	for _, a := range r.cfg.Actions {
		if slices.Contains(out.Sources, a.Source) {
			out.Actions = append(out.Actions, a.Name)
		}
	}
	for _, d := range r.cfg.Destinations {
		if r.seesDestination(d.Name) {
			out.Destinations = append(out.Destinations, d.Name)
		}
	}
	return out
}
