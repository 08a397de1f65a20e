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

// TestLastAdminRace has two admins take each other's admin rights away at the same
// moment, many times: however the two transactions interleave, one admin remains.
func TestLastAdminRace(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	const pw = "twelve chars!"
	a, err := oncehook.CreateUser(ctx, pool, "a@example.com", oncehook.RoleAdmin, pw)
	if err != nil {
		t.Fatal(err)
	}
	b, err := oncehook.CreateUser(ctx, pool, "b@example.com", oncehook.RoleAdmin, pw)
	if err != nil {
		t.Fatal(err)
	}
	actorA := oncehook.Actor{Name: a.Email, Role: oncehook.RoleAdmin}
	actorB := oncehook.Actor{Name: b.Email, Role: oncehook.RoleAdmin}
	moves := map[string]func(oncehook.Actor, int64) error{
		"Demote": func(by oncehook.Actor, id int64) error {
			return oncehook.SetUserRole(ctx, pool, by, id, oncehook.RoleOperator)
		},
		"Disable": func(by oncehook.Actor, id int64) error {
			return oncehook.SetUserDisabled(ctx, pool, by, id, true)
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
					switch err := <-errs; oncehook.ErrorCode(err) {
					case "":
					case oncehook.ECONFLICT:
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
	limits := oncehook.LoginLimits{PerAccount: 5, PerAddress: 100, Window: time.Minute}
	// Two at once, as two demo runs starting together would: both succeed, one user.
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			errs <- oncehook.EnsureUser(ctx, pool, "demo@example.com", oncehook.RoleAdmin, "first password")
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	u, err := oncehook.Authenticate(ctx, pool, limits, "demo@example.com", "first password", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := oncehook.CreateUser(ctx, pool, "other@example.com", oncehook.RoleAdmin, "first password")
	if err != nil {
		t.Fatal(err)
	}
	boss := oncehook.Actor{Name: other.Email, Role: oncehook.RoleAdmin}
	if err := oncehook.SetUserRole(ctx, pool, boss, u.ID, oncehook.RoleOperator); err != nil {
		t.Fatal(err)
	}
	if err := oncehook.SetUserDisabled(ctx, pool, boss, u.ID, true); err != nil {
		t.Fatal(err)
	}
	// Again, in another case, with a new password: enabled, same role, same user.
	if err := oncehook.EnsureUser(ctx, pool, "Demo@Example.com", oncehook.RoleAdmin, "second password"); err != nil {
		t.Fatal(err)
	}
	again, err := oncehook.Authenticate(ctx, pool, limits, "demo@example.com", "second password", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != u.ID || again.Role != oncehook.RoleOperator {
		t.Errorf("after the second EnsureUser: user %d role %s, want user %d keeping role operator", again.ID, again.Role, u.ID)
	}
	users, err := oncehook.ListUsers(ctx, pool, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 2 {
		t.Errorf("%d users, want 2", len(users))
	}
	if err := oncehook.EnsureUser(ctx, pool, "demo@example.com", oncehook.RoleAdmin, "short"); oncehook.ErrorCode(err) != oncehook.EINVALID {
		t.Errorf("short password: %v, want %s", err, oncehook.EINVALID)
	}
}
