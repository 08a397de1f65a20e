package oncehook_test

import (
	"context"
	"testing"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/db/dbtest"
)

func TestUsers(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	const pw = "twelve chars!"
	admin, err := oncehook.CreateUser(ctx, pool, "boss@example.com", oncehook.RoleAdmin, pw)
	if err != nil {
		t.Fatal(err)
	}
	limits := oncehook.LoginLimits{PerAccount: 3, PerAddress: 100, Window: time.Minute}
	boss := oncehook.Actor{Name: admin.Email, Role: oncehook.RoleAdmin}

	t.Run("CreateRefusals", func(t *testing.T) {
		cases := []struct{ name, email, role, password, code string }{
			{"ShortPassword", "a@example.com", oncehook.RoleOperator, "eleven char", oncehook.EINVALID},
			{"NotAnEmail", "not an email", oncehook.RoleOperator, pw, oncehook.EINVALID},
			{"UnknownRole", "b@example.com", "root", pw, oncehook.EINVALID},
			{"TakenEmailAnyCase", "BOSS@example.com", oncehook.RoleOperator, pw, oncehook.ECONFLICT},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				_, err := oncehook.CreateUser(ctx, pool, c.email, c.role, c.password)
				if got := oncehook.ErrorCode(err); got != c.code {
					t.Errorf("code %q (%v), want %q", got, err, c.code)
				}
			})
		}
	})
	t.Run("AuthenticateIgnoresEmailCase", func(t *testing.T) {
		u, err := oncehook.Authenticate(ctx, pool, limits, "Boss@Example.com", pw, "192.0.2.1")
		if err != nil || u.ID != admin.ID {
			t.Fatalf("authenticate: %+v %v", u, err)
		}
	})
	t.Run("LastAdminStays", func(t *testing.T) {
		if err := oncehook.SetUserRole(ctx, pool, boss, admin.ID, oncehook.RoleOperator); oncehook.ErrorCode(err) != oncehook.ECONFLICT {
			t.Errorf("demoting the last admin: %v, want a conflict", err)
		}
		if err := oncehook.SetUserDisabled(ctx, pool, boss, admin.ID, true); oncehook.ErrorCode(err) != oncehook.ECONFLICT {
			t.Errorf("disabling the last admin: %v, want a conflict", err)
		}
	})
	t.Run("DisabledCannotSignIn", func(t *testing.T) {
		op, err := oncehook.CreateUser(ctx, pool, "op@example.com", oncehook.RoleOperator, pw)
		if err != nil {
			t.Fatal(err)
		}
		opActor := oncehook.Actor{Name: op.Email, Role: oncehook.RoleOperator}
		if err := oncehook.SetUserDisabled(ctx, pool, opActor, admin.ID, true); oncehook.ErrorCode(err) != oncehook.EFORBIDDEN {
			t.Errorf("an operator changing users: %v, want forbidden", err)
		}
		if err := oncehook.SetUserDisabled(ctx, pool, boss, op.ID, true); err != nil {
			t.Fatal(err)
		}
		if _, err := oncehook.Authenticate(ctx, pool, limits, op.Email, pw, "192.0.2.2"); oncehook.ErrorCode(err) != oncehook.EFORBIDDEN {
			t.Errorf("disabled user signs in: %v", err)
		}
	})
	t.Run("ThrottlePerAddress", func(t *testing.T) {
		tight := oncehook.LoginLimits{PerAccount: 100, PerAddress: 2, Window: limits.Window}
		for range 2 {
			_, _ = oncehook.Authenticate(ctx, pool, tight, "nobody@example.com", "wrong wrong", "192.0.2.9")
		}
		_, err := oncehook.Authenticate(ctx, pool, tight, admin.Email, pw, "192.0.2.9")
		if oncehook.ErrorCode(err) != oncehook.ETHROTTLED {
			t.Errorf("after 2 failures from one address: %v, want throttled", err)
		}
		if _, err := oncehook.Authenticate(ctx, pool, tight, admin.Email, pw, "192.0.2.10"); err != nil {
			t.Errorf("another address: %v", err)
		}
	})
}
