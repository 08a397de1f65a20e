package ledger

import (
	"cmp"
	"context"
	"slices"

	"github.com/oncehook/oncehook/db"
)

// The reads below have a second form on Citus (the sharded flag): their
// single-Postgres forms walk an index per state or source with a lateral
// subquery and a limit, or read the planner's statistics, which Citus cannot
// push down to the shards. The Citus forms return the same rows.

// actionListSharded is ActionList on Citus (see ActionListSharded). Its one
// select has no walk per state to bound, so where each state has a bound of its
// own (the counts under a filter) each state is read by itself.
func (r *Review) actionListSharded(ctx context.Context, p db.ActionListParams) ([]db.Action, error) {
	q := db.New(r.pool)
	one := func(states []string, limit int32) ([]db.Action, error) {
		return q.ActionListSharded(ctx, p.Sharded(states, limit))
	}
	if p.StateRows >= p.MaxRows || len(p.States) <= 1 {
		return one(p.States, min(p.StateRows, p.MaxRows))
	}
	var out []db.Action
	for _, st := range p.States {
		rows, err := one([]string{st}, p.StateRows)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

// countByState is ActionCountByState, or its Citus form.
func (r *Review) countByState(ctx context.Context) ([]db.ActionCountByStateRow, error) {
	q := db.New(r.pool)
	if !r.mode.sharded(ctx) {
		return q.ActionCountByState(ctx)
	}
	rows, err := q.ActionCountByStateSharded(ctx)
	out := make([]db.ActionCountByStateRow, 0, len(rows))
	for _, row := range rows {
		out = append(out, db.ActionCountByStateRow(row))
	}
	return out, err
}

// destinationList is DestinationList, or its Citus form.
func (r *Review) destinationList(ctx context.Context) ([]db.DestinationListRow, error) {
	q := db.New(r.pool)
	if !r.mode.sharded(ctx) {
		return q.DestinationList(ctx, db.DestinationListParams{AllClients: r.scope.all, ScopeClients: r.scope.clients})
	}
	rows, err := q.DestinationListSharded(ctx, db.DestinationListShardedParams{AllClients: r.scope.all, ScopeClients: r.scope.clients})
	out := make([]db.DestinationListRow, 0, len(rows))
	for _, row := range rows {
		out = append(out, db.DestinationListRow(row))
	}
	return out, err
}

// sourceStats is DashboardSourceStats, or its Citus form.
func (r *Review) sourceStats(ctx context.Context, names []string) ([]db.DashboardSourceStatsRow, error) {
	q := db.New(r.pool)
	if !r.mode.sharded(ctx) {
		return q.DashboardSourceStats(ctx, names)
	}
	var out []db.DashboardSourceStatsRow
	for _, name := range names {
		rows, err := q.DashboardSourceStatsSharded(ctx, name)
		if err != nil {
			return nil, err
		}
		for _, row := range rows {
			out = append(out, db.DashboardSourceStatsRow(row))
		}
	}
	return out, nil
}

// trendQueues is DashboardTrendQueues, or its Citus form.
func (r *Review) trendQueues(ctx context.Context, p db.DashboardTrendQueuesParams) ([]db.DashboardTrendQueuesRow, error) {
	q := db.New(r.pool)
	if !r.mode.sharded(ctx) {
		return q.DashboardTrendQueues(ctx, p)
	}
	rows, err := q.DashboardTrendQueuesSharded(ctx, db.DashboardTrendQueuesShardedParams(p))
	out := make([]db.DashboardTrendQueuesRow, 0, len(rows))
	for _, row := range rows {
		out = append(out, db.DashboardTrendQueuesRow(row))
	}
	return out, err
}

// replayEvents is EventReplay, or on Citus EventReplayOne for each event, in
// the order of the ids as EventReplay returns them.
func (r *Review) replayEvents(ctx context.Context, q *db.Queries, p db.EventReplayParams) ([]db.EventReplayRow, error) {
	if !r.mode.sharded(ctx) {
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
