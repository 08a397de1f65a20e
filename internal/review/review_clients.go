package review

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
)

// On Citus a read that names no client goes to every shard, and a read whose
// index walks are lateral subqueries with limits cannot be pushed down at all.
// So there the dashboard's and the API's reads across clients name the clients
// the reader sees: a read that Citus can push down takes them as its scope and
// goes to their shards alone; a walk runs once for each client, routed whole to
// its shard, and the rows are merged (db.EachClient, db.ActionListByClient).

// clientsAgain is how long the list of clients with actions is kept before it is
// read again: a client that is new to the config is in the config at once; one
// dropped from it, with actions still stored, is kept on the list.
const clientsAgain = time.Minute

// estimatesKept is how long a shard's planner's estimate of a count past its cap
// is kept (db.Estimates): it comes from statistics that ANALYZE refreshes now
// and then, so kept this long it is hardly staler.
const estimatesKept = 30 * time.Second

// knownClients keeps the clients that have actions, read at most every
// clientsAgain; one for every Review made from the same NewReview.
type knownClients struct {
	mu      sync.Mutex
	at      time.Time
	clients []string
}

// readClients is the clients a read across clients goes round: the reader's
// own, or for a reader of every client the config's and every client with
// actions stored.
func (r *Review) readClients(ctx context.Context) ([]string, error) {
	if !r.scope.All {
		return slices.Clone(r.scope.Clients), nil
	}
	out := slices.Clone(r.cfg.Clients())
	stored, err := r.storedClients(ctx)
	if err != nil {
		return nil, err
	}
	for _, c := range stored {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// storedClients is every client with actions stored, read at most every
// clientsAgain: on Citus each shard groups its own rows, on one Postgres the
// primary key is probed once a client.
func (r *Review) storedClients(ctx context.Context) ([]string, error) {
	k := r.known
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.at.IsZero() || r.now().Sub(k.at) >= clientsAgain {
		stored, err := r.store.StoredClients(ctx, db.New(r.pool))
		if err != nil {
			return nil, fmt.Errorf("find the clients with actions: %w", err)
		}
		k.clients, k.at = stored, r.now()
	}
	return slices.Clone(k.clients), nil
}

// readScope is the scope a read across clients takes (the store's ReadScope).
func (r *Review) readScope(ctx context.Context) (ledger.Scope, error) {
	return r.store.ReadScope(ctx, r.scope, r.readClients)
}

// destinationList is the store's ListDestinations for what the reader sees.
func (r *Review) destinationList(ctx context.Context) ([]db.DestinationListRow, error) {
	sc, err := r.readScope(ctx)
	if err != nil {
		return nil, err
	}
	return r.store.ListDestinations(ctx, db.New(r.pool), sc)
}
