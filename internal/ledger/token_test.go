package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestTokenUseIsMarkedAtMostOnceAMinute: a token's first use is marked; a use
// within the minute after writes nothing; one after that minute is marked again.
func TestTokenUseIsMarkedAtMostOnceAMinute(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	token, err := accounts.CreateToken(ctx, pool, "ci", settings.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	lastUsed := func() time.Time {
		t.Helper()
		ts, err := accounts.ListTokens(ctx, pool)
		if err != nil || len(ts) != 1 {
			t.Fatalf("tokens %v: %v", ts, err)
		}
		if ts[0].LastUsedAt == nil {
			return time.Time{}
		}
		return *ts[0].LastUsedAt
	}
	use := func() {
		t.Helper()
		if a, err := accounts.AuthenticateToken(ctx, pool, token); err != nil || a.Name != "token:ci" {
			t.Fatalf("authenticate: %+v, %v", a, err)
		}
	}
	if !lastUsed().IsZero() {
		t.Fatal("a new token is marked used")
	}
	use()
	first := lastUsed()
	if first.IsZero() {
		t.Fatal("the first use was not marked")
	}
	use()
	if got := lastUsed(); !got.Equal(first) {
		t.Errorf("a use within the minute moved the mark from %v to %v", first, got)
	}
	if _, err := pool.Exec(ctx, `UPDATE api_tokens SET last_used_at = now() - interval '2 minutes'`); err != nil {
		t.Fatal(err)
	}
	old := lastUsed()
	use()
	if got := lastUsed(); !got.After(old) {
		t.Errorf("a use two minutes after the last was not marked: %v, was %v", got, old)
	}
}
