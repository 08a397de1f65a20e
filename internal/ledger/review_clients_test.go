package ledger_test

import (
	"context"
	"testing"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestReadsAcrossClientsSeeEveryClient: a list and the counts across clients hold
// the actions of every client, one that the config no longer names included (on
// Citus they go round the clients, so the clients come from the config and from
// the stored actions); a reader of one client sees that one alone.
func TestReadsAcrossClientsSeeEveryClient(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	// c0 and c1, 150 actions each, in the states below; the config names c0 alone.
	fillActions(t, pool, 1, 300, `(ARRAY['failed','confirmed','held'])[1 + i % 3]`)
	cfg := &settings.Config{Sources: []settings.Source{{Name: "s0", Client: "c0"}}}
	r := review.New(pool, cfg, nil)
	for _, tc := range []struct {
		name   string
		review *review.Review
		want   map[string]int // actions listed, by client
	}{
		{"admin", r, map[string]int{"c0": 150, "c1": 150}},
		{"operator of c1", r.For(ledger.Actor{Name: "op@example.com", Role: settings.RoleOperator, Clients: []string{"c1"}}),
			map[string]int{"c1": 150}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]int{}
			f := review.ActionFilter{Limit: 70}
			for pages := 0; ; pages++ {
				page, err := tc.review.ListActions(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				for i, a := range page.Actions {
					got[a.Client]++
					if i > 0 && a.ID >= page.Actions[i-1].ID {
						t.Fatalf("page %d: id %d after %d, want newest first", pages, a.ID, page.Actions[i-1].ID)
					}
				}
				if page.NextCursor == "" {
					break
				}
				f.Cursor = page.NextCursor
			}
			if len(got) != len(tc.want) || got["c0"] != tc.want["c0"] || got["c1"] != tc.want["c1"] {
				t.Errorf("listed %v, want %v", got, tc.want)
			}
			summary, err := tc.review.Summary(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var total int
			for _, want := range tc.want {
				total += want
			}
			counted := 0
			for _, sc := range summary {
				counted += int(sc.Count)
			}
			if counted != total {
				t.Errorf("summary counts %d actions (%+v), want %d", counted, summary, total)
			}
		})
	}
}
