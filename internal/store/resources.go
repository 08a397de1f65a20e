package store

import (
	"context"

	"github.com/oncehook/oncehook/db"
)

// CancelResource is ResourceCancel.
func (Single) CancelResource(ctx context.Context, q *db.Queries, p db.ResourceCancelParams) error {
	return q.ResourceCancel(ctx, p)
}

// CancelResource is ResourceCancelSharded: the transaction's time comes in as a
// table of one row, for Citus takes no now() within a coalesce on the shards.
func (Sharded) CancelResource(ctx context.Context, q *db.Queries, p db.ResourceCancelParams) error {
	return q.ResourceCancelSharded(ctx, db.ResourceCancelShardedParams(p))
}
