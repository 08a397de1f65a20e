package ledger_test

import (
	"context"
	"testing"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestSourceSummariesCountTheNewestAndEstimateTheRest: a source with a few events
// is counted exactly; one with more than 1,000 gets the planner's count of its
// events, its deliveries scaled from the newest 1,000's, and the duplicate rate,
// conflicts and last delivery of those; a source without events has none.
func TestSourceSummariesCountTheNewestAndEstimateTheRest(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	// big: 30,000 events, the oldest 20,000 delivered once, the newest 10,000 every
	// other one twice, one conflict among the newest 1,000. small: 4 events, one repeated.
	if _, err := pool.Exec(ctx, `
INSERT INTO events (client, environment, source, source_event_id, type, body_sha256, deliveries, conflict,
    received_at, last_received_at)
SELECT 'acme', 'live', 'big', 'evt_' || i, 't', '\x00',
       CASE WHEN i > 20000 AND i % 2 = 0 THEN 2 ELSE 1 END, i = 29000,
       timestamptz '2026-11-01' + make_interval(secs => i), timestamptz '2026-11-01' + make_interval(secs => i)
FROM generate_series(1, 30000) AS i;
INSERT INTO events (client, environment, source, source_event_id, type, body_sha256, deliveries, last_received_at)
SELECT 'acme', 'live', 'small', 'evt_' || i, 't', '\x00', CASE WHEN i = 1 THEN 2 ELSE 1 END,
       timestamptz '2026-11-30 10:00' + make_interval(secs => i)
FROM generate_series(1, 4) AS i;
ANALYZE events`); err != nil {
		t.Fatal(err)
	}
	cfg := &settings.Config{Sources: []settings.Source{{Name: "big", Client: "acme"}, {Name: "small", Client: "acme"}, {Name: "quiet", Client: "acme"}}}
	got, err := review.New(pool, cfg, nil).Sources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d sources, want 3", len(got))
	}
	big, small, quiet := got[0], got[1], got[2]
	// The planner's count: ANALYZE reads every page of 30,000 rows, but the
	// estimate is scaled by the table's pages at planning time, so it may miss by a
	// few rows. Within 1% is the planner's; anything further is a wrong count.
	if !big.About || big.Events < 29700 || big.Events > 30300 {
		t.Errorf("big: %d events (about: %v), want about 30,000", big.Events, big.About)
	}
	// The newest 1,001 (evt_29000..evt_30000): 501 repeated (the even ones), so
	// 1,502 deliveries, scaled by the estimate / 1,001.
	if want := int64(float64(1502) * float64(big.Events) / 1001); big.Deliveries != want {
		t.Errorf("big: %d deliveries, want %d (1,502 scaled by %d / 1,001)", big.Deliveries, want, big.Events)
	}
	if want := float64(501) / 1502; big.DuplicateRate != want || big.Conflicts != 1 {
		t.Errorf("big: duplicate rate %v and %d conflicts, want %v and 1", big.DuplicateRate, big.Conflicts, want)
	}
	if big.LastDelivery == nil || big.LastDelivery.UTC().Format("2006-01-02 15:04:05") != "2026-11-01 08:20:00" {
		t.Errorf("big: last delivery %v, want 2026-11-01 08:20:00 UTC (30,000 s after midnight)", big.LastDelivery)
	}
	if small.About || small.Events != 4 || small.Deliveries != 5 || small.DuplicateRate != 0.2 {
		t.Errorf("small: %+v, want 4 events, 5 deliveries, 20%% repeats, counted exactly", small)
	}
	if quiet.Events != 0 || quiet.LastDelivery != nil {
		t.Errorf("quiet: %+v, want nothing", quiet)
	}
}
