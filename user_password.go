package oncehook

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
)

// EnsureUser creates the user, or gives an existing one this password (re-enabled,
// keeping its role). The demo uses it so the login it prints always works, whether
// or not an earlier run created the account.
func EnsureUser(ctx context.Context, pool *pgxpool.Pool, email, role, password string) error {
	if utf8.RuneCountInString(password) < MinPasswordLength {
		return Errorf(EINVALID, "The password must be at least %d characters long.", MinPasswordLength)
	}
	hash, err := hashPassword(password)
	if err != nil {
		return err
	}
	q := db.New(pool)
	n, err := q.UserSetPassword(ctx, db.UserSetPasswordParams{Email: email, PasswordHash: hash})
	if err != nil {
		return fmt.Errorf("set password: %w", err)
	}
	if n > 0 {
		// A fresh login starts with a clean slate of failed sign-ins.
		if err := q.LoginThrottleClear(ctx, "account:"+strings.ToLower(strings.TrimSpace(email))); err != nil {
			return fmt.Errorf("clear failed sign-ins: %w", err)
		}
		return nil
	}
	_, err = CreateUser(ctx, pool, email, role, password)
	return err
}
