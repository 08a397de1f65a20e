package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestStateSince: an action's clock is when it entered its state. Assigning it,
// renewing a note or a worker's claim handed back keep it; a new state resets it.
func TestStateSince(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	fillActions(t, pool, 1, 1, `'failed'`)
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	since := func() time.Time {
		t.Helper()
		var s time.Time
		if err := pool.QueryRow(ctx, `SELECT state_since FROM actions WHERE id = 1`).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s.UTC()
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	exec(`UPDATE actions SET state_since = '2026-01-01 00:00:00+00' WHERE id = 1`)
	r := review.New(pool, &settings.Config{}, nil)
	if _, err := accounts.CreateUser(ctx, pool, "ops@example.com", settings.RoleAdmin, "a long enough password"); err != nil {
		t.Fatal(err) // an owner must be a user who sees the action's client
	}
	if _, err := r.Do(ctx, ledger.Actor{Name: "admin@example.com", Role: settings.RoleAdmin}, review.ActAssign, 1,
		review.ActParams{Owner: "ops@example.com"}); err != nil {
		t.Fatal(err)
	}
	if got := since(); !got.Equal(old) {
		t.Errorf("after Assign, in state since %v, want %v kept", got, old)
	}
	exec(`UPDATE actions SET state = 'failed', reason = 'again', updated_at = now() WHERE id = 1`)
	if got := since(); !got.Equal(old) {
		t.Errorf("after setting the same state, in state since %v, want %v kept", got, old)
	}
	// A claim handed back: processing, then the state it was claimed from.
	exec(`UPDATE actions SET state = 'uncertain' WHERE id = 1`)
	if got := since(); got.Equal(old) {
		t.Fatalf("entering uncertain kept the clock of failed")
	}
	exec(`UPDATE actions SET state_since = '2026-01-01 00:00:00+00' WHERE id = 1`)
	exec(`UPDATE actions SET state = 'processing', claimed_from = 'uncertain' WHERE id = 1`)
	exec(`UPDATE actions SET state = claimed_from WHERE id = 1`)
	if got := since(); !got.Equal(old) {
		t.Errorf("after a claim handed back, in state since %v, want %v kept", got, old)
	}
	exec(`UPDATE actions SET state = 'processing', claimed_from = 'uncertain' WHERE id = 1`)
	exec(`UPDATE actions SET state = 'confirmed' WHERE id = 1`)
	if got := since(); time.Since(got) > time.Minute {
		t.Errorf("confirmed, in state since %v, want now", got)
	}
}
