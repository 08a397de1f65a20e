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

// itemClients is the clients an item's read tries, in turn, on Citus (or when
// the URL names one): the one the URL names, else those the scope sees.
func (r *Review) itemClients(ctx context.Context, scope ledger.Scope) ([]string, error) {
	switch {
	case r.hint != "":
		return []string{r.hint}, nil
	case !scope.All:
		return scope.Clients, nil
	}
	return r.readClients(ctx)
}

// namesClients reports whether an item's read names its client: always on
// Citus, and on one Postgres when one client is known (then as cheap as by id,
// and the same answer on both).
func (r *Review) namesClients(ctx context.Context, scope ledger.Scope) bool {
	return r.hint != "" || !scope.All && len(scope.Clients) == 1 || r.mode.Sharded(ctx)
}

// actionRow reads action id as scope may see it; pgx.ErrNoRows when there is
// none the scope's clients hold. On one Postgres an action of a client the scope
// does not see is returned too (the callers say not found, or forbidden).
func (r *Review) actionRow(ctx context.Context, q *db.Queries, scope ledger.Scope, id int64) (db.Action, error) {
	if !r.namesClients(ctx, scope) {
		return q.ActionGet(ctx, id)
	}
	clients, err := r.itemClients(ctx, scope)
	if err != nil {
		return db.Action{}, err
	}
	for _, c := range clients {
		a, err := q.ActionGetByKey(ctx, db.ActionGetByKeyParams{Client: c, ID: id})
		if !db.IsNotFound(err) {
			return a, err
		}
	}
	return db.Action{}, fmt.Errorf("action %d: %w", id, pgx.ErrNoRows)
}

// eventRow is actionRow for an event.
func (r *Review) eventRow(ctx context.Context, q *db.Queries, scope ledger.Scope, id int64) (db.Event, error) {
	if !r.namesClients(ctx, scope) {
		return q.EventGet(ctx, id)
	}
	clients, err := r.itemClients(ctx, scope)
	if err != nil {
		return db.Event{}, err
	}
	for _, c := range clients {
		ev, err := q.EventGetByKey(ctx, db.EventGetByKeyParams{Client: c, ID: id})
		if !db.IsNotFound(err) {
			return ev, err
		}
	}
	return db.Event{}, fmt.Errorf("event %d: %w", id, pgx.ErrNoRows)
}
