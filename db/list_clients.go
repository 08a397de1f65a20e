package db

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// ReadsAtOnce bounds how many clients' reads ActionListByClient and EachClient
// run at the same time: each holds a connection of the pool.
const ReadsAtOnce = 4

// EachClient runs read for each of clients, ReadsAtOnce at a time, and returns
// their rows in the order of clients; what read uses must take statements at the
// same time (a pool, not one connection or a transaction). On Citus each such read names one client
// and is routed to its shard: a read across clients then costs one shard per
// client instead of every shard.
func EachClient[T any](ctx context.Context, clients []string, read func(ctx context.Context, client string) ([]T, error)) ([]T, error) {
	rows := make([][]T, len(clients))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(ReadsAtOnce)
	for i, c := range clients {
		g.Go(func() error {
			var err error
			if rows[i], err = read(ctx, c); err != nil {
				return fmt.Errorf("client %s: %w", c, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return slices.Concat(rows...), nil
}

// ActionListByClient is ActionList over clients, for Citus, where a list across
// clients cannot walk its indexes (a lateral subquery with a limit is not pushed
// down to the shards): ActionList runs for each client (p.Client set, so it is
// routed whole to that client's shard), and the rows are merged in p.Sort's
// order, each state bounded by p.StateRows and all by p.MaxRows, as ActionList
// bounds them. q must plan per call (PlannedPerCall), so Citus sees the client,
// and be over a pool (see EachClient).
func ActionListByClient(ctx context.Context, q *Queries, p ActionListParams, clients []string) ([]Action, error) {
	rows, err := EachClient(ctx, clients, func(ctx context.Context, client string) ([]Action, error) {
		pc := p
		pc.Client = client
		return q.ActionList(ctx, pc)
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(rows, listOrder(p.Sort))
	perState := map[string]int32{}
	out := make([]Action, 0, min(len(rows), int(p.MaxRows)))
	for _, a := range rows {
		if len(out) == int(p.MaxRows) {
			break
		}
		if perState[a.State] == p.StateRows {
			continue
		}
		perState[a.State]++
		out = append(out, a)
	}
	return out, nil
}

// ActionCountByClient is ActionCountByState over clients, for Citus, where
// ActionCountByState's walks cannot be pushed down and the coordinator has no
// statistics of actions: ActionCountByStateOfClient for each client (routed to
// its shard), a state past 1,000 actions of a client estimated by its shard's
// planner (EstimateActions), the counts added up and the oldest kept, by state.
// q must plan per call (PlannedPerCall), and be over a pool for more than one
// client (see EachClient).
func ActionCountByClient(ctx context.Context, q *Queries, clients []string, est *Estimates) ([]ActionCountByStateRow, error) {
	rows, err := EachClient(ctx, clients, func(ctx context.Context, client string) ([]ActionCountByStateOfClientRow, error) {
		rows, err := q.ActionCountByStateOfClient(ctx, client)
		if err != nil {
			return nil, err
		}
		for i, row := range rows {
			if row.N > 1000 {
				n, err := est.Actions(ctx, q, client, row.State)
				if err != nil {
					return nil, err
				}
				rows[i].N = max(row.N, n)
			}
		}
		return rows, nil
	})
	if err != nil {
		return nil, err
	}
	at := map[string]int{} // each state's place in out
	out := []ActionCountByStateRow{}
	for _, row := range rows {
		i, ok := at[row.State]
		if !ok {
			at[row.State] = len(out)
			out = append(out, ActionCountByStateRow(row))
			continue
		}
		out[i].N += row.N
		if row.Oldest.Before(out[i].Oldest) {
			out[i].Oldest = row.Oldest
		}
	}
	slices.SortFunc(out, func(a, b ActionCountByStateRow) int { return cmp.Compare(a.State, b.State) })
	return out, nil
}

// listOrder compares two actions in ActionList's order for sort: 'created'
// (oldest first), 'state_since' (longest in its state first), '-state_since', or
// anything else newest first; ties on the time go by id the same way.
func listOrder(sort string) func(a, b Action) int {
	switch sort {
	case "created":
		return func(a, b Action) int { return cmp.Compare(a.ID, b.ID) }
	case "state_since":
		return func(a, b Action) int {
			return cmp.Or(a.StateSince.Compare(b.StateSince), cmp.Compare(a.ID, b.ID))
		}
	case "-state_since":
		return func(a, b Action) int {
			return cmp.Or(b.StateSince.Compare(a.StateSince), cmp.Compare(b.ID, a.ID))
		}
	}
	return func(a, b Action) int { return cmp.Compare(b.ID, a.ID) }
}

// estimateActions asks the planner how many actions of one client are in one
// state. On Citus the statement is routed to the client's shard, and the
// estimate is that shard's planner's, from its own statistics (autovacuum's
// ANALYZE keeps them): what ActionCountByState reads from pg_stats on one
// Postgres, where the coordinator's statistics of the table are empty.
const estimateActions = `EXPLAIN (FORMAT JSON) SELECT 1 FROM actions WHERE client = $1 AND state = $2`

// estimateEvents is estimateActions for the events of one client's source.
const estimateEvents = `EXPLAIN (FORMAT JSON) SELECT 1 FROM events WHERE client = $1 AND source = $2`

// Estimates keeps the planner's estimates (EstimateActions, EstimateEvents) for
// a while, so the pages that show them ask each shard's planner at most once in
// that while: the estimates come from statistics that autovacuum's ANALYZE
// refreshes from time to time, so a kept one is as current as a new one. A nil
// *Estimates keeps nothing.
type Estimates struct {
	keep time.Duration
	now  func() time.Time
	mu   sync.Mutex
	m    map[[3]string]keptEstimate
}

type keptEstimate struct {
	n  int64
	at time.Time
}

// NewEstimates keeps each estimate for keep.
func NewEstimates(keep time.Duration) *Estimates {
	return &Estimates{keep: keep, now: time.Now, m: map[[3]string]keptEstimate{}}
}

// Actions is EstimateActions, kept.
func (e *Estimates) Actions(ctx context.Context, q *Queries, client, state string) (int64, error) {
	return e.get([3]string{"actions", client, state}, func() (int64, error) { return EstimateActions(ctx, q, client, state) })
}

// Events is EstimateEvents, kept.
func (e *Estimates) Events(ctx context.Context, q *Queries, client, source string) (int64, error) {
	return e.get([3]string{"events", client, source}, func() (int64, error) { return EstimateEvents(ctx, q, client, source) })
}

func (e *Estimates) get(key [3]string, read func() (int64, error)) (int64, error) {
	if e == nil {
		return read()
	}
	e.mu.Lock()
	k, ok := e.m[key]
	e.mu.Unlock()
	if ok && e.now().Sub(k.at) < e.keep {
		return k.n, nil
	}
	n, err := read()
	if err != nil {
		return 0, err
	}
	e.mu.Lock()
	e.m[key] = keptEstimate{n: n, at: e.now()}
	e.mu.Unlock()
	return n, nil
}

// EstimateActions is the planner's estimate of the actions of client in state
// (see estimateActions). q must plan per call (PlannedPerCall).
func EstimateActions(ctx context.Context, q *Queries, client, state string) (int64, error) {
	n, err := estimate(ctx, q, estimateActions, client, state)
	if err != nil {
		return 0, fmt.Errorf("estimate the %s actions of %s: %w", state, client, err)
	}
	return n, nil
}

// EstimateEvents is the planner's estimate of the events of client's source
// (see estimateEvents). q must plan per call (PlannedPerCall).
func EstimateEvents(ctx context.Context, q *Queries, client, source string) (int64, error) {
	n, err := estimate(ctx, q, estimateEvents, client, source)
	if err != nil {
		return 0, fmt.Errorf("estimate the events of %s's source %s: %w", client, source, err)
	}
	return n, nil
}

// estimate runs an EXPLAIN (FORMAT JSON) and returns the largest row count of
// its plan, which on Citus is the routed task's plan on the shard.
func estimate(ctx context.Context, q *Queries, explain string, args ...any) (int64, error) {
	var plan []byte
	if err := q.db.QueryRow(ctx, explain, args...).Scan(&plan); err != nil {
		return 0, err
	}
	var doc any
	if err := json.Unmarshal(plan, &doc); err != nil {
		return 0, fmt.Errorf("read the plan: %w", err)
	}
	return largestPlanRows(doc), nil
}

// largestPlanRows is the largest "Plan Rows" anywhere in an EXPLAIN (FORMAT
// JSON) document.
func largestPlanRows(v any) int64 {
	var n int64
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if f, ok := x.(float64); ok && k == "Plan Rows" {
				n = max(n, int64(f))
			} else {
				n = max(n, largestPlanRows(x))
			}
		}
	case []any:
		for _, x := range v {
			n = max(n, largestPlanRows(x))
		}
	}
	return n
}
