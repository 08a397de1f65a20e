package accounts

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
)

// EnsureUser creates the user with role and clients, or gives an existing one this
// password (re-enabled, keeping its role and clients), in one statement: two runs
// at once both succeed. The demo uses it so the login it prints always works,
// whether or not an earlier run created the account. It returns EINVALID as
// CreateUser does.
func EnsureUser(ctx context.Context, pool *pgxpool.Pool, email, role, password string, clients ...string) error {
	email, err := cleanEmail(email)
	if err != nil {
		return err
	}
	clients, err = ledger.ScopeShape(role, clients)
	if err != nil {
		return err
	}
	if utf8.RuneCountInString(password) < MinPasswordLength {
		return ledger.Errorf(ledger.EINVALID, "The password must be at least %d characters long.", MinPasswordLength)
	}
	hash, err := hashPassword(password)
	if err != nil {
		return err
	}
	q := db.New(pool)
	if _, err := q.UserEnsure(ctx, db.UserEnsureParams{Email: email, Role: role, Clients: clients, PasswordHash: hash}); err != nil {
		return fmt.Errorf("store user: %w", err)
	}
	// A fresh login starts with a clean slate of failed sign-ins.
	if err := q.LoginThrottleClear(ctx, "account:"+strings.ToLower(email)); err != nil {
		return fmt.Errorf("clear failed sign-ins: %w", err)
	}
	return nil
}
