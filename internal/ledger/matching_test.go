package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestBulkSelectsWhatTheListShows: for every filter, "all that match" (what a bulk
// act touches) selects exactly the ids that paging through the list shows.
func TestBulkSelectsWhatTheListShows(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	fillActions(t, pool, 1, 400, `(ARRAY['pending','processing','retrying','held','uncertain','failed','confirmed','resolved','cancelled'])[1 + (i * 7) % 9]`)
	if _, err := pool.Exec(ctx, `
INSERT INTO events (client, environment, source, source_event_id, type, status, body, body_sha256)
VALUES ('c1', 'live', 's0', 'evt_linked', 't', 'routed', '\x7b7d', '\x00')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
INSERT INTO action_events (client, action_id, event_id, params, params_sha256)
SELECT a.client, a.id, e.id, '{}', '\x00' FROM actions a, events e WHERE a.id IN (21, 33, 45) AND e.client = a.client`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE actions SET reason = 'refused with ' || (400 + id % 30)::text WHERE id % 4 = 0`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
INSERT INTO attempts (client, action_id, kind, operation_key, worker, status, http_status, part_day)
SELECT client, id, 'call', operation_key, 'w', 'finished', 400 + id % 30, rows_day FROM actions WHERE id % 4 = 0`); err != nil {
		t.Fatal(err)
	}
	r := review.New(pool, &settings.Config{}, nil)
	since, until := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	open := ledger.OpenStates()
	extras := []review.ActionFilter{{}, {Reason: "with 42"}, {HTTPStatus: 422}, {Since: &since}, {Until: &until},
		{Since: &since, Until: &until, Reason: "refused"}}
	for _, extra := range extras {
		for _, states := range [][]string{nil, {"failed"}, {"failed", "uncertain"}, open, {"confirmed", "nope"}} {
			for _, source := range []string{"", "s2"} {
				for _, owner := range []string{"", "o1"} {
					for _, dest := range []string{"", "d1"} {
						for _, client := range []string{"", "c1"} {
							for _, search := range []string{"", "enq_17", "enq_1", "ref_100", "op_33", "evt_linked"} {
								f := extra
								f.States, f.Source, f.Owner, f.Destination, f.Client, f.Q = states, source, owner, dest, client, search
								f.Name = map[bool]string{true: "n1"}[source == "s2"]
								name := fmt.Sprintf("%v/%s/%s/%s/%s/%s/%q/%d/%v/%v", states, source, owner, dest, client, search,
									f.Reason, f.HTTPStatus, f.Since != nil, f.Until != nil)
								shown := []int64{}
								for cursor := ""; ; {
									f.Cursor, f.Limit = cursor, 25
									page, err := r.ListActions(ctx, f)
									if err != nil {
										t.Fatalf("%s: list: %v", name, err)
									}
									for _, a := range page.Actions {
										shown = append(shown, a.ID)
									}
									if cursor = page.NextCursor; cursor == "" {
										break
									}
								}
								matching, err := r.MatchingActions(ctx, f)
								if err != nil {
									t.Fatalf("%s: matching: %v", name, err)
								}
								picked := []int64{}
								for _, a := range matching {
									picked = append(picked, a.ID)
								}
								if diff := cmp.Diff(shown, picked); diff != "" {
									t.Errorf("%s: ids (-listed +all that match):\n%s", name, diff)
								}
							}
						}
					}
				}
			}
		}
	}
}
