package store

import (
	"context"
	"math"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
)

// CausesCounted is how many actions of a group that waits for a person
// DashboardCausesCapped counts one by one; past it the count is an estimate.
const CausesCounted = 1_000

// CauseCount is a group of open actions (state, destination, the start of their
// reason) with how many there are. Past CausesCounted the count is not read
// whole: About says N is the planner's estimate (a reader of every client); More
// says N is CausesCounted and there are more (a reader of some clients, whose
// share the planner's figures do not give). StateOldest is when the action of
// the group's state that waits longest entered it, exact either way.
type CauseCount struct {
	db.DashboardCausesRow
	About, More bool
	StateOldest time.Time
}

// Causes is DashboardCausesCapped, each capped group's count estimated: the
// state's estimate, less the groups counted whole, shared among its capped
// groups by how many reasons start as theirs (never fewer than were counted).
func (Single) Causes(ctx context.Context, pool *pgxpool.Pool, p db.DashboardCausesParams) ([]CauseCount, error) {
	rows, err := db.New(pool).DashboardCausesCapped(ctx, db.DashboardCausesCappedParams{
		Counted: CausesCounted + 1, AllClients: p.AllClients, ScopeClients: p.ScopeClients, Split: p.Split,
		Configured: p.Configured, ReasonBytes: p.ReasonBytes})
	if err != nil {
		return nil, err
	}
	return estimateCauses(rows, p.AllClients), nil
}

// estimateCauses turns capped rows into counts (see Causes).
func estimateCauses(rows []db.DashboardCausesCappedRow, allClients bool) []CauseCount {
	type state struct {
		exact, counted int64   // the groups counted whole; the capped groups' rows counted
		weight         float64 // the capped groups' weights
		zero           bool    // a capped group has no weight: they share evenly
		capped         int
	}
	states := map[string]*state{}
	for _, r := range rows {
		s := states[r.State]
		if s == nil {
			s = &state{}
			states[r.State] = s
		}
		if !r.Capped {
			s.exact += r.N
			continue
		}
		s.capped++
		s.counted += r.N
		s.weight += r.Weight
		s.zero = s.zero || r.Weight <= 0
	}
	out := make([]CauseCount, len(rows))
	for i, r := range rows {
		reason := r.ReasonStart
		out[i] = CauseCount{DashboardCausesRow: db.DashboardCausesRow{State: r.State, Destination: r.Destination,
			ReasonStart: &reason, Blocked: r.Blocked, N: r.N, Oldest: r.Oldest, Unconfigured: r.Unconfigured,
			OldestConfigured: r.OldestConfigured}, StateOldest: r.StateOldest}
		if !r.Capped {
			continue
		}
		c := &out[i]
		if !allClients || r.StateEstimate <= 0 {
			c.N, c.More = CausesCounted, true
			c.Unconfigured = min(c.Unconfigured, c.N)
			continue
		}
		s := states[r.State]
		left := max(r.StateEstimate-s.exact, s.counted)
		share := 1 / float64(s.capped)
		if !s.zero && s.weight > 0 {
			share = r.Weight / s.weight
		}
		n := max(int64(math.Round(float64(left)*share)), r.N)
		// The rows counted say how many of the group are of clients no longer configured.
		c.Unconfigured = int64(math.Round(float64(r.Unconfigured) * float64(n) / float64(r.N)))
		c.N, c.About = n, true
	}
	return out
}

// Causes is DashboardCauses: each shard groups its own rows whole.
func (Sharded) Causes(ctx context.Context, pool *pgxpool.Pool, p db.DashboardCausesParams) ([]CauseCount, error) {
	rows, err := db.New(pool).DashboardCauses(ctx, p)
	if err != nil {
		return nil, err
	}
	oldest := map[string]time.Time{}
	for _, r := range rows {
		if o, ok := oldest[r.State]; !ok || r.Oldest.Before(o) {
			oldest[r.State] = r.Oldest
		}
	}
	out := make([]CauseCount, len(rows))
	for i, r := range rows {
		out[i] = CauseCount{DashboardCausesRow: r, StateOldest: oldest[r.State]}
	}
	return out, nil
}
