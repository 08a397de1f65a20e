// Package store is the seam between the stages (inbox, router, performer,
// review) and the database for what differs between a single Postgres and a
// Citus cluster. Each operation has two forms, side by side here: Single's, for
// one Postgres, and Sharded's, for Citus, where each statement names its client
// to run on the client's shard and evaluates no stable function on the shards.
// The stages call a Store and never ask which database they are on; For picks
// the form from the database's own answer.
package store

import (
	"context"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
)

// Store is what the stages do that a Citus cluster does differently.
type Store interface {
	// CancelResource marks the resource cancelled, at the event's time (or the
	// transaction's, without one), unless it was cancelled before, and moves its
	// last event time on.
	CancelResource(ctx context.Context, q *db.Queries, p db.ResourceCancelParams) error
	// ListDestinations lists the destinations' connection rows, by name, each
	// with how many actions of the clients scope sees it holds.
	ListDestinations(ctx context.Context, q *db.Queries, scope ledger.Scope) ([]db.DestinationListRow, error)
	// LinkEvents links routed events to the actions they asked for; a link that
	// exists is left as it is.
	LinkEvents(ctx context.Context, q *db.Queries, links db.ActionEventLinksParams) error
}

// Single is the Store of one Postgres.
type Single struct{}

// Sharded is the Store of a Citus cluster.
type Sharded struct{}

// For is the Store of the database behind mode: each call takes the form the
// database answered, asked once, when first needed.
func For(mode *ledger.DatabaseMode) Store { return chosen{mode: mode} }

type chosen struct{ mode *ledger.DatabaseMode }

func (c chosen) form(ctx context.Context) Store {
	if c.mode.Sharded(ctx) {
		return Sharded{}
	}
	return Single{}
}

func (c chosen) CancelResource(ctx context.Context, q *db.Queries, p db.ResourceCancelParams) error {
	return c.form(ctx).CancelResource(ctx, q, p)
}

func (c chosen) ListDestinations(ctx context.Context, q *db.Queries, scope ledger.Scope) ([]db.DestinationListRow, error) {
	return c.form(ctx).ListDestinations(ctx, q, scope)
}

func (c chosen) LinkEvents(ctx context.Context, q *db.Queries, links db.ActionEventLinksParams) error {
	return c.form(ctx).LinkEvents(ctx, q, links)
}

// CancelResource is ResourceCancel.
func (Single) CancelResource(ctx context.Context, q *db.Queries, p db.ResourceCancelParams) error {
	return q.ResourceCancel(ctx, p)
}

// CancelResource is ResourceCancelSharded: the transaction's time comes in as a
// table of one row, for Citus takes no now() within a coalesce on the shards.
func (Sharded) CancelResource(ctx context.Context, q *db.Queries, p db.ResourceCancelParams) error {
	return q.ResourceCancelSharded(ctx, db.ResourceCancelShardedParams(p))
}

// ListDestinations is DestinationList: the held actions counted for each
// destination in a subquery.
func (Single) ListDestinations(ctx context.Context, q *db.Queries, scope ledger.Scope) ([]db.DestinationListRow, error) {
	return q.DestinationList(ctx, db.DestinationListParams{AllClients: scope.All, ScopeClients: scope.Clients})
}

// ListDestinations is DestinationListSharded: Citus runs no subquery correlated
// with a reference table, so the held actions are counted by destination across
// the shards, then joined.
func (Sharded) ListDestinations(ctx context.Context, q *db.Queries, scope ledger.Scope) ([]db.DestinationListRow, error) {
	rows, err := q.DestinationListSharded(ctx, db.DestinationListShardedParams{AllClients: scope.All, ScopeClients: scope.Clients})
	out := make([]db.DestinationListRow, 0, len(rows))
	for _, row := range rows {
		out = append(out, db.DestinationListRow(row))
	}
	return out, err
}

// LinkEvents is ActionEventLinks: one statement for the batch.
func (Single) LinkEvents(ctx context.Context, q *db.Queries, links db.ActionEventLinksParams) error {
	return q.ActionEventLinks(ctx, links)
}

// LinkEvents is ActionEventLinkOne for each link, sent together: an insert of
// rows selected from arrays runs through the coordinator, one that names its
// client runs on the client's shard.
func (Sharded) LinkEvents(ctx context.Context, q *db.Queries, links db.ActionEventLinksParams) error {
	one := make([]db.ActionEventLinkOneParams, len(links.ActionIds))
	for i := range one {
		one[i] = db.ActionEventLinkOneParams{Client: links.Clients[i], ActionID: links.ActionIds[i],
			EventID: links.EventIds[i], Params: links.Params[i], ParamsSha256: links.ParamsSha256s[i],
			Conflict: links.Conflicts[i]}
	}
	var first error
	q.ActionEventLinkOne(ctx, one).Exec(func(_ int, err error) {
		if first == nil {
			first = err
		}
	})
	return first
}
