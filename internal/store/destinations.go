package store

import (
	"context"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
)

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
