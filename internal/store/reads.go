package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// The dashboard's and the API's reads. One Postgres answers a read across
// clients in one statement that walks an index per state or source with a
// lateral subquery and a limit, or reads the planner's statistics; Citus cannot
// push those down to the shards, and a read that names no client goes to every
// shard. So on Citus each runs once for each client the reader sees, routed to
// the client's shard, and the rows are merged (db.EachClient): the same rows.
// Each takes a pool, whose connections the reads of the clients share.

// ListActions is ActionList, planned per call: a search is index probes only
// once Postgres sees the search itself (a generic plan would walk every action).
func (Single) ListActions(ctx context.Context, pool *pgxpool.Pool, p db.ActionListParams, _ Clients) ([]db.Action, error) {
	return db.New(db.PlannedPerCall(pool)).ActionList(ctx, p)
}

// ListActions is ActionList for the client the filter names, else for each
// client, merged (db.ActionListByClient).
func (Sharded) ListActions(ctx context.Context, pool *pgxpool.Pool, p db.ActionListParams, clients Clients) ([]db.Action, error) {
	list := []string{p.Client}
	if p.Client == "" {
		var err error
		if list, err = clients(ctx); err != nil {
			return nil, err
		}
	}
	return db.ActionListByClient(ctx, db.New(db.PlannedPerCall(pool)), p, list)
}

// CountByState is ActionCountByState for a reader of every client, else
// ActionCountInScope state by state (states without actions left out, as
// ActionCountByState leaves them).
func (Single) CountByState(ctx context.Context, pool *pgxpool.Pool, scope ledger.Scope, _ Clients, _ *db.Estimates) ([]db.ActionCountByStateRow, error) {
	if scope.All {
		return db.New(pool).ActionCountByState(ctx)
	}
	q := db.New(db.PlannedPerCall(pool))
	out := []db.ActionCountByStateRow{}
	for _, st := range ledger.AllStates {
		row, err := q.ActionCountInScope(ctx, db.ActionCountInScopeParams{State: st, ScopeClients: scope.Clients})
		if err != nil {
			return nil, err
		}
		if row.N > 0 {
			out = append(out, db.ActionCountByStateRow{State: st, N: row.N, Oldest: row.Oldest})
		}
	}
	return out, nil
}

// CountByState is db.ActionCountByClient over the clients, a state past 1,000
// actions of a client estimated by its shard's planner.
func (Sharded) CountByState(ctx context.Context, pool *pgxpool.Pool, _ ledger.Scope, clients Clients, est *db.Estimates) ([]db.ActionCountByStateRow, error) {
	list, err := clients(ctx)
	if err != nil {
		return nil, err
	}
	return db.ActionCountByClient(ctx, db.New(db.PlannedPerCall(pool)), list, est)
}

// SourceCount is a source's figures from DashboardSourceStats and, for one with
// more events than it counts one by one (Events past SourceCounted), the
// planner's estimate of them.
type SourceCount struct {
	db.DashboardSourceStatsRow
	Estimated int64
}

// SourceCounted is how many of a source's events DashboardSourceStats counts one
// by one; past it the count is the planner's estimate.
//
// 1,000: the newest events of a busy source are not yet all-visible, and each
// counted one is then read from the heap (15 ms a source for 10,000 right after
// an ingest at ten million events, where the page's target is 50 ms).
const SourceCounted = 1_000

// SourceStats is DashboardSourceStatsOne of each source, then SourceEstimates of
// those past SourceCounted. Each source's count is planned for that source
// (PlannedPerCall, the source a constant): with the source out of reach of the
// planner (an unnest, or a generic plan) it may read every event of the source
// rather than walk to the limit (2.7 s at a million events, where the walk
// takes 5 ms).
func (Single) SourceStats(ctx context.Context, pool *pgxpool.Pool, sources []settings.Source, _ *db.Estimates) ([]SourceCount, error) {
	q := db.New(pool)
	planned := db.New(db.PlannedPerCall(pool))
	var rows []db.DashboardSourceStatsRow
	for _, s := range sources {
		one, err := planned.DashboardSourceStatsOne(ctx, s.Name)
		if err != nil {
			return nil, err
		}
		if one.Events > 0 {
			rows = append(rows, db.DashboardSourceStatsRow{Source: s.Name, Events: one.Events, Deliveries: one.Deliveries,
				Conflicts: one.Conflicts, LastReceivedAt: one.LastReceivedAt})
		}
	}
	var big []string
	for _, row := range rows {
		if row.Events > SourceCounted {
			big = append(big, row.Source)
		}
	}
	est := map[string]int64{}
	if len(big) > 0 {
		ests, err := q.SourceEstimates(ctx, big)
		if err != nil {
			return nil, err
		}
		for _, e := range ests {
			est[e.Source] = e.Estimated
		}
	}
	out := make([]SourceCount, 0, len(rows))
	for _, row := range rows {
		out = append(out, SourceCount{row, est[row.Source]})
	}
	return out, nil
}

// SourceStats is DashboardSourceStats for each client with its sources, and a
// source past SourceCounted estimated by that shard's planner
// (db.EstimateEvents): the coordinator has no statistics.
func (Sharded) SourceStats(ctx context.Context, pool *pgxpool.Pool, sources []settings.Source, est *db.Estimates) ([]SourceCount, error) {
	byClient := map[string][]string{}
	var clients []string
	for _, s := range sources {
		if byClient[s.Client] == nil {
			clients = append(clients, s.Client)
		}
		byClient[s.Client] = append(byClient[s.Client], s.Name)
	}
	q := db.New(db.PlannedPerCall(pool))
	return db.EachClient(ctx, clients, func(ctx context.Context, client string) ([]SourceCount, error) {
		rows, err := q.DashboardSourceStats(ctx, db.DashboardSourceStatsParams{Client: client, Sources: byClient[client]})
		if err != nil {
			return nil, err
		}
		out := make([]SourceCount, 0, len(rows))
		for _, row := range rows {
			c := SourceCount{DashboardSourceStatsRow: row}
			if row.Events > SourceCounted {
				if c.Estimated, err = est.Events(ctx, q, client, row.Source); err != nil {
					return nil, err
				}
			}
			out = append(out, c)
		}
		return out, nil
	})
}

// TrendQueues is DashboardTrendQueues.
func (Single) TrendQueues(ctx context.Context, pool *pgxpool.Pool, p db.DashboardTrendQueuesParams, _ Clients) ([]db.DashboardTrendQueuesRow, error) {
	return db.New(pool).DashboardTrendQueues(ctx, p)
}

// TrendQueues is DashboardTrendQueues for each client (its scope that one
// client), the counts added up by state and bucket.
func (Sharded) TrendQueues(ctx context.Context, pool *pgxpool.Pool, p db.DashboardTrendQueuesParams, clients Clients) ([]db.DashboardTrendQueuesRow, error) {
	list, err := clients(ctx)
	if err != nil {
		return nil, err
	}
	q := db.New(db.PlannedPerCall(pool))
	rows, err := db.EachClient(ctx, list, func(ctx context.Context, client string) ([]db.DashboardTrendQueuesRow, error) {
		pc := p
		pc.AllClients, pc.ScopeClients = false, []string{client}
		return q.DashboardTrendQueues(ctx, pc)
	})
	if err != nil {
		return nil, err
	}
	type key struct {
		state string
		at    int64
	}
	at := map[key]int{}
	var out []db.DashboardTrendQueuesRow
	for _, row := range rows {
		k := key{row.State, row.StartAt.UnixMicro()}
		if i, ok := at[k]; ok {
			out[i].N += row.N
			continue
		}
		at[k] = len(out)
		out = append(out, row)
	}
	return out, nil
}

// ReplayEvents is EventReplay.
func (Single) ReplayEvents(ctx context.Context, q *db.Queries, p db.EventReplayParams) ([]db.EventReplayRow, error) {
	return q.EventReplay(ctx, p)
}

// ReplayEvents is EventReplayOne for each event, in the order of the ids as
// EventReplay returns them.
func (Sharded) ReplayEvents(ctx context.Context, q *db.Queries, p db.EventReplayParams) ([]db.EventReplayRow, error) {
	var out []db.EventReplayRow
	for i := range p.Ids {
		rows, err := q.EventReplayOne(ctx, db.EventReplayOneParams{Client: p.Clients[i], ID: p.Ids[i]})
		if err != nil {
			return nil, err
		}
		for _, row := range rows {
			out = append(out, db.EventReplayRow(row))
		}
	}
	slices.SortFunc(out, func(a, b db.EventReplayRow) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// StoredClients is ActionClientsStored: the primary key probed once a client.
func (Single) StoredClients(ctx context.Context, q *db.Queries) ([]string, error) {
	return q.ActionClientsStored(ctx)
}

// StoredClients is ActionClientsWithRows: each shard groups its own rows.
func (Sharded) StoredClients(ctx context.Context, q *db.Queries) ([]string, error) {
	return q.ActionClientsWithRows(ctx)
}

// EventClients is EventClientsStored: the primary key probed once a client.
func (Single) EventClients(ctx context.Context, q *db.Queries) ([]string, error) {
	return q.EventClientsStored(ctx)
}

// EventClients is EventClientsWithRows: each shard groups its own rows.
func (Sharded) EventClients(ctx context.Context, q *db.Queries) ([]string, error) {
	return q.EventClientsWithRows(ctx)
}

// ReadScope is scope: one Postgres reads across a reader's clients in one
// statement.
func (Single) ReadScope(_ context.Context, scope ledger.Scope, _ Clients) (ledger.Scope, error) {
	return scope, nil
}

// ReadScope spells out the clients of a reader of every client, so that Citus
// reads their shards alone.
func (Sharded) ReadScope(ctx context.Context, scope ledger.Scope, clients Clients) (ledger.Scope, error) {
	if !scope.All {
		return scope, nil
	}
	list, err := clients(ctx)
	return ledger.Scope{Clients: list}, err
}

// GetAction is ActionGet: an id alone finds its row through the id's own
// index, whatever its client. An action of a client the reader does not see is
// returned too (the callers say not found, or forbidden).
func (Single) GetAction(ctx context.Context, q *db.Queries, id int64, _ Clients) (db.Action, error) {
	return q.ActionGet(ctx, id)
}

// GetAction is ActionGetByKey for each client in turn, each read on the
// client's shard: a read that names no client goes to every shard.
func (Sharded) GetAction(ctx context.Context, q *db.Queries, id int64, clients Clients) (db.Action, error) {
	return firstOf(ctx, clients, "action", id, func(client string) (db.Action, error) {
		return q.ActionGetByKey(ctx, db.ActionGetByKeyParams{Client: client, ID: id})
	})
}

// GetEvent is EventGet (see GetAction), with the event's bytes.
func (Single) GetEvent(ctx context.Context, q *db.Queries, id int64, _ Clients) (db.Event, error) {
	ev, err := q.EventGet(ctx, id)
	return db.Event(ev), err
}

// GetEvent is EventGetByKey for each client in turn (see GetAction).
func (Sharded) GetEvent(ctx context.Context, q *db.Queries, id int64, clients Clients) (db.Event, error) {
	return firstOf(ctx, clients, "event", id, func(client string) (db.Event, error) {
		ev, err := q.EventGetByKey(ctx, db.EventGetByKeyParams{Client: client, ID: id})
		return db.Event(ev), err
	})
}

// firstOf is the first row read finds, trying each client in turn;
// pgx.ErrNoRows when none has it.
func firstOf[T any](ctx context.Context, clients Clients, kind string, id int64, read func(client string) (T, error)) (T, error) {
	var none T
	list, err := clients(ctx)
	if err != nil {
		return none, err
	}
	for _, c := range list {
		row, err := read(c)
		if !db.IsNotFound(err) {
			return row, err
		}
	}
	return none, fmt.Errorf("%s %d: %w", kind, id, pgx.ErrNoRows)
}
