package review

import (
	"context"
	"fmt"
	"time"

	"github.com/oncehook/oncehook/db"
)

// BackfillStatus is what the last pass of a backfilled source found, for the
// sources page. A source whose first pass has not run has a zero FinishedAt.
type BackfillStatus struct {
	Source      string
	Provider    string
	Every       time.Duration
	Window      time.Duration
	Running     bool // a process holds the pass's lease
	FinishedAt  time.Time
	NextAt      time.Time
	Listed      int
	Missing     int
	Stored      int
	Redelivered int
	Refused     int      // GitHub: deliveries oncehook itself refused (4xx), not asked for again
	RefusedIDs  []string // the first of them, by delivery id
	Error       string
	Failures    int // passes failed in a row
	Passes      int64
}

// BackfillStatuses lists every backfilled source of the config with its last pass.
func (r *Review) BackfillStatuses(ctx context.Context) ([]BackfillStatus, error) {
	rows, err := db.New(r.pool).BackfillList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list backfill passes: %w", err)
	}
	bySource := map[string]db.BackfillState{}
	for _, row := range rows {
		bySource[row.Client+"\x00"+row.Source] = row
	}
	var out []BackfillStatus
	now := r.now()
	for _, src := range r.cfg.Sources {
		if !src.Backfill.On() || !r.scope.Sees(src.Client) {
			continue
		}
		s := BackfillStatus{Source: src.Name, Provider: src.Provider, Every: src.Backfill.Every, Window: src.Backfill.Window}
		if row, ok := bySource[src.Client+"\x00"+src.Name]; ok {
			s.Running = row.LeaseUntil != nil && row.LeaseUntil.After(now)
			if row.FinishedAt != nil {
				s.FinishedAt = *row.FinishedAt
			}
			s.NextAt, s.Listed, s.Missing, s.Stored, s.Redelivered = row.NextAt, int(row.Listed), int(row.Missing), int(row.Stored), int(row.Redelivered)
			s.Error, s.Failures, s.Passes = row.Error, int(row.Failures), row.Passes
			s.Refused, s.RefusedIDs = int(row.Refused), row.RefusedIds
		}
		out = append(out, s)
	}
	return out, nil
}
