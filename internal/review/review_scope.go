package review

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/ledger"
)

// WithClock returns the review service telling the time by now (a test's
// clock: a snooze's end, the trends' buckets); every For of it does too.
func (r *Review) WithClock(now func() time.Time) *Review {
	s := *r
	s.now = now
	return &s
}

// For returns the review service as actor sees it: every list, count and page it
// reads holds only the clients actor sees. NewReview's own sees every client.
func (r *Review) For(actor ledger.Actor) *Review {
	s := *r
	s.scope = actor.Scope()
	return &s
}

// seesDestination reports whether the reader sees the destination called name: a
// destination serves the clients whose sources' rules act there, and a person of
// some clients sees those that serve any of them (its held count holds only theirs).
func (r *Review) seesDestination(name string) bool {
	if r.scope.All {
		return true
	}
	for _, rule := range r.cfg.Actions {
		if rule.Destination != name {
			continue
		}
		if src, ok := r.cfg.Source(rule.Source); ok && r.scope.Sees(src.Client) {
			return true
		}
	}
	return false
}

// Assignees are the enabled users who see client, by email: the people work of
// client can be assigned to.
func (r *Review) Assignees(ctx context.Context, client string) ([]ledger.User, error) {
	users, err := accounts.ListUsers(ctx, r.pool, true)
	if err != nil {
		return nil, err
	}
	out := []ledger.User{}
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
	if err != nil || u.Disabled || !ledger.UserOf(u).Actor().Sees(client) {
		return ledger.Errorf(ledger.EINVALID, "%s cannot see this client's work, so it cannot be assigned to them; "+
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
		if r.scope.Sees(s.Client) {
			out.Sources = append(out.Sources, s.Name)
		}
	}
	out.Clients = r.scope.Of(r.cfg.Clients())
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
