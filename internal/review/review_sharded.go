package review

import (
	"cmp"
	"context"
	"slices"

	"github.com/oncehook/oncehook/db"
)

// The reads below run differently on Citus (the sharded flag): their
// single-Postgres forms walk an index per state or source with a lateral
// subquery and a limit, or read the planner's statistics, which Citus cannot
// push down to the shards. There they run client by client (see
// review_clients.go), or have a form of their own; either returns the same rows.

// actionListSharded is ActionList on Citus: run for each client the reader
// sees (or the one the filter names), each routed to its shard, and merged
// (db.ActionListByClient).
func (r *Review) actionListSharded(ctx context.Context, p db.ActionListParams) ([]db.Action, error) {
	clients := []string{p.Client}
	if p.Client == "" {
		var err error
		if clients, err = r.readClients(ctx); err != nil {
			return nil, err
		}
	}
	return db.ActionListByClient(ctx, db.New(db.PlannedPerCall(r.pool)), p, clients)
}

// countByState is ActionCountByState, or on Citus the same counts of the
// clients the reader sees, client by client (db.ActionCountByClient).
func (r *Review) countByState(ctx context.Context) ([]db.ActionCountByStateRow, error) {
	if !r.mode.Sharded(ctx) {
		return db.New(r.pool).ActionCountByState(ctx)
	}
	clients, err := r.readClients(ctx)
	if err != nil {
		return nil, err
	}
	return db.ActionCountByClient(ctx, db.New(db.PlannedPerCall(r.pool)), clients, r.estimates)
}

// destinationList is the store's ListDestinations for what the reader sees.
func (r *Review) destinationList(ctx context.Context) ([]db.DestinationListRow, error) {
	sc, err := r.readScope(ctx)
	if err != nil {
		return nil, err
	}
	return r.store.ListDestinations(ctx, db.New(r.pool), sc)
}

// sourceCount is a source's figures from DashboardSourceStats, and for one with
// more events than it counts one by one, the planner's estimate of them.
type sourceCount struct {
	db.DashboardSourceStatsRow
	estimated int64
}

// sourceStats is DashboardSourceStats of names, each a configured source of a
// client the reader sees, with SourceEstimates for the sources past
// sourceCounted. On Citus it runs for each client with its sources, routed to
// the client's shard, and a source past sourceCounted is estimated by that
// shard's planner (db.EstimateEvents): the coordinator has no statistics.
func (r *Review) sourceStats(ctx context.Context, names []string) ([]sourceCount, error) {
	if !r.mode.Sharded(ctx) {
		q := db.New(r.pool)
		rows, err := q.DashboardSourceStats(ctx, db.DashboardSourceStatsParams{Sources: names})
		if err != nil {
			return nil, err
		}
		var big []string
		for _, row := range rows {
			if row.Events > sourceCounted {
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
		out := make([]sourceCount, 0, len(rows))
		for _, row := range rows {
			out = append(out, sourceCount{row, est[row.Source]})
		}
		return out, nil
	}
	byClient := map[string][]string{}
	var clients []string
	for _, s := range r.cfg.Sources {
		if slices.Contains(names, s.Name) {
			if byClient[s.Client] == nil {
				clients = append(clients, s.Client)
			}
			byClient[s.Client] = append(byClient[s.Client], s.Name)
		}
	}
	q := db.New(db.PlannedPerCall(r.pool))
	return db.EachClient(ctx, clients, func(ctx context.Context, client string) ([]sourceCount, error) {
		rows, err := q.DashboardSourceStats(ctx, db.DashboardSourceStatsParams{Client: client, Sources: byClient[client]})
		if err != nil {
			return nil, err
		}
		out := make([]sourceCount, 0, len(rows))
		for _, row := range rows {
			c := sourceCount{DashboardSourceStatsRow: row}
			if row.Events > sourceCounted {
				if c.estimated, err = r.estimates.Events(ctx, q, client, row.Source); err != nil {
					return nil, err
				}
			}
			out = append(out, c)
		}
		return out, nil
	})
}

// trendQueues is DashboardTrendQueues; on Citus it runs for each client the
// reader sees, routed to the client's shard (its scope that one client), and
// the counts are added up by state and bucket.
func (r *Review) trendQueues(ctx context.Context, p db.DashboardTrendQueuesParams) ([]db.DashboardTrendQueuesRow, error) {
	if !r.mode.Sharded(ctx) {
		return db.New(r.pool).DashboardTrendQueues(ctx, p)
	}
	clients, err := r.readClients(ctx)
	if err != nil {
		return nil, err
	}
	q := db.New(db.PlannedPerCall(r.pool))
	rows, err := db.EachClient(ctx, clients, func(ctx context.Context, client string) ([]db.DashboardTrendQueuesRow, error) {
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

// replayEvents is EventReplay, or on Citus EventReplayOne for each event, in
// the order of the ids as EventReplay returns them.
func (r *Review) replayEvents(ctx context.Context, q *db.Queries, p db.EventReplayParams) ([]db.EventReplayRow, error) {
	if !r.mode.Sharded(ctx) {
		return q.EventReplay(ctx, p)
	}
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
