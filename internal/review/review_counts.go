package review

import (
	"context"
)

// CountCap is the largest count of a state's actions that a page shows exactly
// without a filter; past it the count is the planner's, shown as "about".
const CountCap = 1000

// FilterCountCap is where a count under a filter or a search stops: past it a
// page says "100+". Each state's count reads up to this many matching rows (whole
// rows, along the list's own query), so a broad search, such as an owner with a
// third of all actions, costs what a page of rows does in every state.
const FilterCountCap = 100

// FilterCount is how many actions in one state a filter selects, up to
// FilterCountCap; More says there are more than Count.
type FilterCount struct {
	State string
	Count int64
	More  bool
}

// Filtered reports whether f selects by anything but its states.
func (f ActionFilter) Filtered() bool {
	return f.Source != "" || f.Name != "" || f.Owner != "" || f.Destination != "" || f.Client != "" ||
		f.Q != "" || f.Reason != "" || f.Since != nil || f.Until != nil || f.HTTPStatus != 0 || f.Snoozed == SnoozedAsleep ||
		f.Parked == ParkedOnly || f.Imported
}

// CountMatching counts, state by state, the actions f selects, along the list's
// own query (a filter is written in one place), in one read: each state is read
// up to FilterCountCap+1 rows, so a count costs at most what that many rows do.
func (r *Review) CountMatching(ctx context.Context, f ActionFilter, states []string) ([]FilterCount, error) {
	f.Sort, f.Cursor, f.States = "", "", states
	if len(states) == 0 {
		return []FilterCount{}, nil
	}
	as, err := r.selectActions(ctx, f, keyset{}, FilterCountCap+1, (FilterCountCap+1)*len(states))
	if err != nil {
		return nil, err
	}
	n := map[string]int{}
	for _, a := range as {
		n[a.State]++
	}
	out := make([]FilterCount, 0, len(states))
	for _, st := range states {
		out = append(out, FilterCount{State: st, Count: int64(min(n[st], FilterCountCap)), More: n[st] > FilterCountCap})
	}
	return out, nil
}
