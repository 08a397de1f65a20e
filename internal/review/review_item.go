package review

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
)

// The reads of one action or event by its id. On Citus a read that names no
// client goes to every shard, so there each read of an item names a client and
// goes to that client's shard alone: the client the item's URL names (In), else each client
// the reader sees in turn (for a reader of one client, one read; for a reader of
// every client, the config's and every client with rows stored, readClients).
// The pages' and the API's links to an item name its client, so a read reached
// through them is one read on one shard. On one Postgres an id alone finds its
// row through the id's own index, which serves a reader of several clients.

// In returns the review service reading the items of client: the client an
// item's URL names (?client=). An item of another client is then not found, as
// one the reader does not see is; an empty client names none.
func (r *Review) In(client string) *Review {
	s := *r
	s.hint = client
	return &s
}

// itemClients is the clients an item's read tries in turn where it must name
// one (the store's GetAction): those the scope sees.
func (r *Review) itemClients(ctx context.Context, scope ledger.Scope) ([]string, error) {
	if !scope.All {
		return scope.Clients, nil
	}
	return r.readClients(ctx)
}

// knownClient is the one client an item's read names whatever the database:
// the one the URL names, else the reader's only client. A read by that client's
// key is as cheap as one by id on one Postgres, and the same answer on both.
func (r *Review) knownClient(scope ledger.Scope) (string, bool) {
	switch {
	case r.hint != "":
		return r.hint, true
	case !scope.All && len(scope.Clients) == 1:
		return scope.Clients[0], true
	}
	return "", false
}

// actionRow reads action id as scope may see it; pgx.ErrNoRows when there is
// none the scope's clients hold. On one Postgres an action of a client the scope
// does not see may be returned too (the callers say not found, or forbidden).
func (r *Review) actionRow(ctx context.Context, q *db.Queries, scope ledger.Scope, id int64) (db.Action, error) {
	if c, ok := r.knownClient(scope); ok {
		a, err := q.ActionGetByKey(ctx, db.ActionGetByKeyParams{Client: c, ID: id})
		if db.IsNotFound(err) {
			return a, fmt.Errorf("action %d: %w", id, pgx.ErrNoRows)
		}
		return a, err
	}
	return r.store.GetAction(ctx, q, id, func(ctx context.Context) ([]string, error) { return r.itemClients(ctx, scope) })
}

// eventRow is actionRow for an event.
func (r *Review) eventRow(ctx context.Context, q *db.Queries, scope ledger.Scope, id int64) (db.Event, error) {
	if c, ok := r.knownClient(scope); ok {
		ev, err := q.EventGetByKey(ctx, db.EventGetByKeyParams{Client: c, ID: id})
		if db.IsNotFound(err) {
			return db.Event(ev), fmt.Errorf("event %d: %w", id, pgx.ErrNoRows)
		}
		return db.Event(ev), err
	}
	return r.store.GetEvent(ctx, q, id, func(ctx context.Context) ([]string, error) { return r.itemClients(ctx, scope) })
}
