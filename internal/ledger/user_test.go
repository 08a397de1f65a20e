package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

func TestUsers(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	const pw = "twelve chars!"
	admin, err := accounts.CreateUser(ctx, pool, "boss@example.com", settings.RoleAdmin, pw)
	if err != nil {
		t.Fatal(err)
	}
	limits := accounts.LoginLimits{PerAccount: 3, PerAddress: 100, Window: time.Minute}
	boss := ledger.Actor{Name: admin.Email, Role: settings.RoleAdmin}

	t.Run("CreateRefusals", func(t *testing.T) {
		cases := []struct{ name, email, role, password, code string }{
			{"ShortPassword", "a@example.com", settings.RoleOperator, "eleven char", ledger.EINVALID},
			{"NotAnEmail", "not an email", settings.RoleOperator, pw, ledger.EINVALID},
			{"UnknownRole", "b@example.com", "root", pw, ledger.EINVALID},
			{"TakenEmailAnyCase", "BOSS@example.com", settings.RoleOperator, pw, ledger.ECONFLICT},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				_, err := accounts.CreateUser(ctx, pool, c.email, c.role, c.password, "acme")
				if got := ledger.ErrorCode(err); got != c.code {
					t.Errorf("code %q (%v), want %q", got, err, c.code)
				}
			})
		}
	})
	t.Run("AuthenticateIgnoresEmailCase", func(t *testing.T) {
		u, err := accounts.Authenticate(ctx, pool, limits, "Boss@Example.com", pw, "192.0.2.1")
		if err != nil || u.ID != admin.ID {
			t.Fatalf("authenticate: %+v %v", u, err)
		}
	})
	t.Run("LastAdminStays", func(t *testing.T) {
		if err := accounts.SetUserRole(ctx, pool, boss, admin.ID, settings.RoleOperator, "acme"); ledger.ErrorCode(err) != ledger.ECONFLICT {
			t.Errorf("demoting the last admin: %v, want a conflict", err)
		}
		if err := accounts.SetUserDisabled(ctx, pool, boss, admin.ID, true); ledger.ErrorCode(err) != ledger.ECONFLICT {
			t.Errorf("disabling the last admin: %v, want a conflict", err)
		}
	})
	t.Run("DisabledCannotSignIn", func(t *testing.T) {
		op, err := accounts.CreateUser(ctx, pool, "op@example.com", settings.RoleOperator, pw, "acme")
		if err != nil {
			t.Fatal(err)
		}
		opActor := ledger.Actor{Name: op.Email, Role: settings.RoleOperator}
		if err := accounts.SetUserDisabled(ctx, pool, opActor, admin.ID, true); ledger.ErrorCode(err) != ledger.EFORBIDDEN {
			t.Errorf("an operator changing users: %v, want forbidden", err)
		}
		if err := accounts.SetUserDisabled(ctx, pool, boss, op.ID, true); err != nil {
			t.Fatal(err)
		}
		if _, err := accounts.Authenticate(ctx, pool, limits, op.Email, pw, "192.0.2.2"); ledger.ErrorCode(err) != ledger.EFORBIDDEN {
			t.Errorf("disabled user signs in: %v", err)
		}
	})
	t.Run("ThrottlePerAddress", func(t *testing.T) {
		tight := accounts.LoginLimits{PerAccount: 100, PerAddress: 2, Window: limits.Window}
		for range 2 {
			_, _ = accounts.Authenticate(ctx, pool, tight, "nobody@example.com", "wrong wrong", "192.0.2.9")
		}
		_, err := accounts.Authenticate(ctx, pool, tight, admin.Email, pw, "192.0.2.9")
		if ledger.ErrorCode(err) != ledger.ETHROTTLED {
			t.Errorf("after 2 failures from one address: %v, want throttled", err)
		}
		if _, err := accounts.Authenticate(ctx, pool, tight, admin.Email, pw, "192.0.2.10"); err != nil {
			t.Errorf("another address: %v", err)
		}
	})
}

// TestLastAdminRace has two admins take each other's admin rights away at the same
// moment, many times: however the two transactions interleave, one admin remains.
func TestLastAdminRace(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	const pw = "twelve chars!"
	a, err := accounts.CreateUser(ctx, pool, "a@example.com", settings.RoleAdmin, pw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := accounts.CreateUser(ctx, pool, "b@example.com", settings.RoleAdmin, pw)
	if err != nil {
		t.Fatal(err)
	}
	actorA := ledger.Actor{Name: a.Email, Role: settings.RoleAdmin}
	actorB := ledger.Actor{Name: b.Email, Role: settings.RoleAdmin}
	moves := map[string]func(ledger.Actor, int64) error{
		"Demote": func(by ledger.Actor, id int64) error {
			return accounts.SetUserRole(ctx, pool, by, id, settings.RoleOperator, "acme")
		},
		"Disable": func(by ledger.Actor, id int64) error {
			return accounts.SetUserDisabled(ctx, pool, by, id, true)
		},
	}
	for _, pair := range [][2]string{{"Demote", "Demote"}, {"Disable", "Disable"}, {"Demote", "Disable"}} {
		t.Run(pair[0]+pair[1], func(t *testing.T) {
			for round := range 40 {
				if _, err := pool.Exec(ctx, `UPDATE users SET role = 'admin', disabled = false WHERE id = ANY($1)`,
					[]int64{a.ID, b.ID}); err != nil {
					t.Fatal(err)
				}
				start := make(chan struct{})
				errs := make(chan error, 2)
				go func() { <-start; errs <- moves[pair[0]](actorA, b.ID) }()
				go func() { <-start; errs <- moves[pair[1]](actorB, a.ID) }()
				close(start)
				refused := 0
				for range 2 {
					switch err := <-errs; ledger.ErrorCode(err) {
					case "":
					case ledger.ECONFLICT:
						refused++
					default:
						t.Fatalf("round %d: %v", round, err)
					}
				}
				var admins int
				if err := pool.QueryRow(ctx, `SELECT count(*) FROM users WHERE role = 'admin' AND NOT disabled`).Scan(&admins); err != nil {
					t.Fatal(err)
				}
				if admins != 1 || refused != 1 {
					t.Fatalf("round %d: %d enabled admins and %d refusals after both moves, want 1 and 1", round, admins, refused)
				}
			}
		})
	}
}

func TestEnsureUser(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	limits := accounts.LoginLimits{PerAccount: 5, PerAddress: 100, Window: time.Minute}
	// Two at once, as two demo runs starting together would: both succeed, one user.
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			errs <- accounts.EnsureUser(ctx, pool, "demo@example.com", settings.RoleAdmin, "first password")
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	u, err := accounts.Authenticate(ctx, pool, limits, "demo@example.com", "first password", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := accounts.CreateUser(ctx, pool, "other@example.com", settings.RoleAdmin, "first password")
	if err != nil {
		t.Fatal(err)
	}
	boss := ledger.Actor{Name: other.Email, Role: settings.RoleAdmin}
	if err := accounts.SetUserRole(ctx, pool, boss, u.ID, settings.RoleOperator, "acme"); err != nil {
		t.Fatal(err)
	}
	if err := accounts.SetUserDisabled(ctx, pool, boss, u.ID, true); err != nil {
		t.Fatal(err)
	}
	// Again, in another case, with a new password: enabled, same role, same user.
	if err := accounts.EnsureUser(ctx, pool, "Demo@Example.com", settings.RoleAdmin, "second password"); err != nil {
		t.Fatal(err)
	}
	again, err := accounts.Authenticate(ctx, pool, limits, "demo@example.com", "second password", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != u.ID || again.Role != settings.RoleOperator {
		t.Errorf("after the second EnsureUser: user %d role %s, want user %d keeping role operator", again.ID, again.Role, u.ID)
	}
	users, err := accounts.ListUsers(ctx, pool, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 2 {
		t.Errorf("%d users, want 2", len(users))
	}
	if err := accounts.EnsureUser(ctx, pool, "demo@example.com", settings.RoleAdmin, "short"); ledger.ErrorCode(err) != ledger.EINVALID {
		t.Errorf("short password: %v, want %s", err, ledger.EINVALID)
	}
}
