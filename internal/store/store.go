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
	// InsertActions inserts the actions p asks for, each in the state, with the
	// reason and due time its cutover, predecessor and destination give it, and
	// returns the rows it created: none for an operation that has an action.
	InsertActions(ctx context.Context, q *db.Queries, p db.ActionInsertParams) ([]db.ActionInsertRow, error)
	// InsertEvents inserts a batch of deliveries, one row an identity (see
	// EventInsertBatch), and commits it: c is a pool, or a transaction the
	// caller commits.
	InsertEvents(ctx context.Context, c Conn, p db.EventInsertBatchParams) ([]db.EventInsertBatchRow, error)
	// ClaimEvents claims up to n of client's received events for the router,
	// oldest first, skipping those another router holds.
	ClaimEvents(ctx context.Context, q *db.Queries, client string, n int) ([]db.EventClaimReceivedRow, error)
	// SetEventStatuses writes what became of one client's routed batch.
	SetEventStatuses(ctx context.Context, q *db.Queries, p db.EventSetStatusesParams) error
}

// Conn is a pool or a transaction: what an operation that opens its own
// transaction runs on.
type Conn interface {
	db.DBTX
	db.Beginner
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

func (c chosen) InsertActions(ctx context.Context, q *db.Queries, p db.ActionInsertParams) ([]db.ActionInsertRow, error) {
	return c.form(ctx).InsertActions(ctx, q, p)
}

func (c chosen) InsertEvents(ctx context.Context, conn Conn, p db.EventInsertBatchParams) ([]db.EventInsertBatchRow, error) {
	return c.form(ctx).InsertEvents(ctx, conn, p)
}

func (c chosen) ClaimEvents(ctx context.Context, q *db.Queries, client string, n int) ([]db.EventClaimReceivedRow, error) {
	return c.form(ctx).ClaimEvents(ctx, q, client, n)
}

func (c chosen) SetEventStatuses(ctx context.Context, q *db.Queries, p db.EventSetStatusesParams) error {
	return c.form(ctx).SetEventStatuses(ctx, q, p)
}
