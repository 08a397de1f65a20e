package ledger_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestSnoozeAndNoteGuards: a snooze ends later than now and within 90 days, and
// only an action that waits for a person is snoozed; a note needs text and
// fits 2,000 characters; a viewer does neither; the snoozed action leaves a
// list's "awake" view, shows in its "asleep" one, and its state is untouched.
func TestSnoozeAndNoteGuards(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	fillActions(t, pool, 1, 4, `(ARRAY['failed','pending','held','confirmed'])[i]`)
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	rv := review.New(pool, &settings.Config{Sources: []settings.Source{{Name: "s0", Client: "c0"}, {Name: "s1", Client: "c1"}}}, nil).
		WithClock(func() time.Time { return now })
	op := ledger.Actor{Name: "op@example.com", Role: settings.RoleOperator, Clients: []string{"c0", "c1"}}
	viewer := ledger.Actor{Name: "v@example.com", Role: settings.RoleViewer, Clients: []string{"c0", "c1"}}
	for _, c := range []struct {
		name  string
		actor ledger.Actor
		act   string
		id    int64
		p     review.ActParams
		code  string
		words string
	}{
		{"a past end", op, review.ActSnooze, 1, review.ActParams{Until: now.Add(-time.Minute)}, ledger.EINVALID, "later than now"},
		{"too far", op, review.ActSnooze, 1, review.ActParams{Until: now.Add(91 * 24 * time.Hour)}, ledger.EINVALID, "within 90 days"},
		{"a pending action", op, review.ActSnooze, 2, review.ActParams{Until: now.Add(time.Hour)}, ledger.ECONFLICT, ""},
		{"a viewer", viewer, review.ActSnooze, 1, review.ActParams{Until: now.Add(time.Hour)}, ledger.EFORBIDDEN, ""},
		{"an empty note", op, review.ActNote, 1, review.ActParams{Note: "  "}, ledger.EINVALID, "needs some text"},
		{"a long note", op, review.ActNote, 1, review.ActParams{Note: strings.Repeat("é", 2001)}, ledger.EINVALID, "at most 2000"},
		{"a viewer's note", viewer, review.ActNote, 1, review.ActParams{Note: "hello"}, ledger.EFORBIDDEN, ""},
		{"a wake of what is not snoozed", op, review.ActWake, 3, review.ActParams{}, ledger.ECONFLICT, "not snoozed"},
		{"an undo with nothing to undo", op, review.ActUndo, 3, review.ActParams{}, ledger.ECONFLICT, "nothing to undo"},
	} {
		_, err := rv.Do(ctx, c.actor, c.act, c.id, c.p)
		if ledger.ErrorCode(err) != c.code || !strings.Contains(ledger.ErrorMessage(err), c.words) {
			t.Errorf("%s: %v (%s), want %s saying %q", c.name, err, ledger.ErrorCode(err), c.code, c.words)
		}
	}
	count := func(sql string) int {
		var n int
		if err := pool.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(`SELECT count(*) FROM snoozes`); n != 0 {
		t.Fatalf("%d snoozes after refusals only", n)
	}

	// A snooze that is let through: the lists' views, and nothing else changed.
	if _, err := rv.Do(ctx, op, review.ActSnooze, 3, review.ActParams{Until: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	ids := func(snoozed string) []int64 {
		page, err := rv.ListActions(ctx, review.ActionFilter{States: []string{ledger.StateHeld, ledger.StateFailed}, Snoozed: snoozed, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, a := range page.Actions {
			out = append(out, a.ID)
		}
		return out
	}
	if got := ids(review.SnoozedAwake); len(got) != 1 || got[0] != 1 {
		t.Errorf("awake lists %v, want [1]", got)
	}
	if got := ids(review.SnoozedAsleep); len(got) != 1 || got[0] != 3 {
		t.Errorf("asleep lists %v, want [3]", got)
	}
	if got := ids(""); len(got) != 2 {
		t.Errorf("every action lists %v, want both", got)
	}
	if n := count(`SELECT count(*) FROM actions WHERE id = 3 AND state = 'held'`); n != 1 {
		t.Errorf("the snoozed action is no longer held")
	}
	now = now.Add(time.Hour + time.Second)
	if got := ids(review.SnoozedAwake); len(got) != 2 {
		t.Errorf("after its time, awake lists %v, want both", got)
	}
}

// TestStoredClientsFormsAgree: the loose index scan of the clients with actions
// (one Postgres) finds what the grouping (Citus's form) finds.
func TestStoredClientsFormsAgree(t *testing.T) {
	dbtest.SinglePostgresOnly(t, "the loose index scan is a recursive CTE, which Citus does not run over a distributed table")
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	q := db.New(pool)
	if got, err := q.ActionClientsStored(ctx); err != nil || len(got) != 0 {
		t.Fatalf("no actions: %v, %v", got, err)
	}
	fillActions(t, pool, 1, 50, `'failed'`)
	if _, err := pool.Exec(ctx, `UPDATE actions SET client = 'c' || (id % 7) WHERE id % 5 = 0`); err != nil {
		t.Fatal(err)
	}
	loose, err := q.ActionClientsStored(ctx)
	if err != nil {
		t.Fatal(err)
	}
	grouped, err := q.ActionClientsWithRows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(loose, grouped) || len(loose) < 3 {
		t.Errorf("the loose scan finds %v, the grouping %v", loose, grouped)
	}
}
