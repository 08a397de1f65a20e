package ledger

import (
	"context"
)

// CountCap is where a count under a filter stops: past it a page says "1000+".
const CountCap = 1000

// FilterCount is how many actions in one state a filter selects, up to CountCap;
// More says there are more than Count.
type FilterCount struct {
	State string
	Count int64
	More  bool
}

// Filtered reports whether f selects by anything but its states.
func (f ActionFilter) Filtered() bool {
	return f.Source != "" || f.Name != "" || f.Owner != "" || f.Destination != "" || f.Client != "" ||
		f.Q != "" || f.Reason != "" || f.Since != nil || f.Until != nil || f.HTTPStatus != 0
}

// CountMatching counts, state by state, the actions f selects, along the list's
// own query (a filter is written in one place): each state is read up to
// CountCap+1 rows, so a count costs at most what that many rows do.
func (r *Review) CountMatching(ctx context.Context, f ActionFilter, states []string) ([]FilterCount, error) {
	out := make([]FilterCount, 0, len(states))
	f.Sort, f.Cursor = "", ""
	for _, st := range states {
		g := f
		g.States = []string{st}
		as, err := r.selectActions(ctx, g, keyset{}, CountCap+1)
		if err != nil {
			return nil, err
		}
		n := int64(min(len(as), CountCap))
		out = append(out, FilterCount{State: st, Count: n, More: len(as) > CountCap})
	}
	return out, nil
}
