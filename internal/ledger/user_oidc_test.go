package ledger_test

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

var testOIDC = &settings.OIDC{Name: "Okta", Issuer: "https://idp.example.com", Claim: "groups", Rules: []settings.AccessRule{
	{Value: "acme-view", Role: settings.RoleViewer, Clients: []string{"acme"}},
	{Value: "acme-ops", Role: settings.RoleOperator, Clients: []string{"acme"}},
	{Value: "beta-ops", Role: settings.RoleOperator, Clients: []string{"beta"}},
	{Value: "gamma-view", Role: settings.RoleViewer, Clients: []string{"gamma"}},
	{Value: "admins", Role: settings.RoleAdmin},
}}

// TestOIDCAccess: the most privileged matching role wins, with the clients of
// every matching rule of that role; a less privileged rule adds nothing.
func TestOIDCAccess(t *testing.T) {
	t.Parallel()
	type access struct {
		Role    string
		Clients []string
		OK      bool
	}
	cases := []struct {
		name   string
		values []string
		want   access
	}{
		{"NoGroup", nil, access{}},
		{"UnknownGroup", []string{"sales"}, access{}},
		{"OneRule", []string{"acme-view"}, access{settings.RoleViewer, []string{"acme"}, true}},
		{"OperatorOverViewer", []string{"gamma-view", "acme-ops"}, access{settings.RoleOperator, []string{"acme"}, true}},
		{"UnionOfOneRole", []string{"beta-ops", "acme-ops", "acme-view"}, access{settings.RoleOperator, []string{"acme", "beta"}, true}},
		{"AdminSeesAll", []string{"acme-ops", "admins"}, access{settings.RoleAdmin, []string{}, true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			role, clients, ok := testOIDC.Access(c.values)
			if diff := cmp.Diff(c.want, access{role, clients, ok}); diff != "" {
				t.Errorf("access (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSignInOIDC(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	ann := accounts.Identity{Issuer: testOIDC.Issuer, Subject: "248289761001", Email: "ann@example.com", Values: []string{"acme-ops"}}

	first, err := accounts.SignInOIDC(ctx, pool, testOIDC, ann)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := accounts.GetUser(ctx, pool, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Role != settings.RoleOperator || !cmp.Equal(stored.Clients, []string{"acme"}) || stored.OIDCSubject != ann.Subject ||
		stored.OIDCIssuer != ann.Issuer || stored.SignedInAt == nil || stored.Disabled {
		t.Fatalf("first sign-in stored %+v", stored)
	}
	t.Run("PasswordNeverAuthenticates", func(t *testing.T) {
		for _, pw := range []string{"", "decoy password that no account has"} {
			if _, err := accounts.Authenticate(ctx, pool, accounts.DefaultLoginLimits, ann.Email, pw, "192.0.2.9"); ledger.ErrorCode(err) != ledger.EUNAUTHORIZED {
				t.Errorf("password %q for an identity provider's user: %v, want refused", pw, err)
			}
		}
	})
	t.Run("UpdatedOnEverySignIn", func(t *testing.T) {
		again := ann
		again.Email, again.Values = "ann.smith@example.com", []string{"beta-ops", "acme-view"}
		u, err := accounts.SignInOIDC(ctx, pool, testOIDC, again)
		if err != nil {
			t.Fatal(err)
		}
		stored, _ := accounts.GetUser(ctx, pool, first.ID)
		if u.ID != first.ID || stored.Email != again.Email || stored.Role != settings.RoleOperator ||
			!cmp.Equal(stored.Clients, []string{"beta"}) || !stored.SignedInAt.After(*first.SignedInAt) {
			t.Errorf("second sign-in: %+v, want the same user with the new email and clients", stored)
		}
	})
	t.Run("RemovedGroupRemovesAccess", func(t *testing.T) {
		gone := ann
		gone.Values = []string{"sales"}
		if _, err := accounts.SignInOIDC(ctx, pool, testOIDC, gone); ledger.ErrorCode(err) != ledger.EFORBIDDEN {
			t.Fatalf("sign-in with no matching group: %v, want refused", err)
		}
		stored, _ := accounts.GetUser(ctx, pool, first.ID)
		if stored.Role != settings.RoleViewer || len(stored.Clients) != 0 {
			t.Errorf("after the group was removed: role %s clients %v, want a viewer of nothing", stored.Role, stored.Clients)
		}
	})
}

// TestSignInOIDCRefused: nobody is created for a person no rule lets in; a
// disabled user stays out; an identity cannot take a local account's email.
func TestSignInOIDCRefused(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	ann := accounts.Identity{Issuer: testOIDC.Issuer, Subject: "248289761001", Email: "ann@example.com", Values: []string{"acme-ops"}}
	first, err := accounts.SignInOIDC(ctx, pool, testOIDC, ann)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("UnknownWithNoGroupIsNotCreated", func(t *testing.T) {
		bob := accounts.Identity{Issuer: testOIDC.Issuer, Subject: "bob", Email: "bob@example.com", Values: []string{"sales"}}
		if _, err := accounts.SignInOIDC(ctx, pool, testOIDC, bob); ledger.ErrorCode(err) != ledger.EFORBIDDEN {
			t.Fatalf("refused sign-in: %v", err)
		}
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM users WHERE oidc_subject = 'bob'`).Scan(&n); err != nil || n != 0 {
			t.Errorf("a refused sign-in made %d users (%v)", n, err)
		}
	})
	t.Run("DisabledIsRefused", func(t *testing.T) {
		boss, err := accounts.CreateUser(ctx, pool, "boss@example.com", settings.RoleAdmin, "twelve chars!")
		if err != nil {
			t.Fatal(err)
		}
		if err := accounts.SetUserDisabled(ctx, pool, ledger.Actor{Name: boss.Email, Role: settings.RoleAdmin}, first.ID, true); err != nil {
			t.Fatal(err)
		}
		if _, err := accounts.SignInOIDC(ctx, pool, testOIDC, ann); ledger.ErrorCode(err) != ledger.EFORBIDDEN {
			t.Errorf("a disabled user signed in: %v", err)
		}
		taken := accounts.Identity{Issuer: testOIDC.Issuer, Subject: "other", Email: "Boss@example.com", Values: []string{"admins"}}
		if _, err := accounts.SignInOIDC(ctx, pool, testOIDC, taken); ledger.ErrorCode(err) != ledger.ECONFLICT {
			t.Errorf("an identity with a local account's email: %v, want a conflict, not that account", err)
		}
	})
}

// TestSignInOIDCAtOnce: two first sign-ins of one person at once make one user.
func TestSignInOIDCAtOnce(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	id := accounts.Identity{Issuer: testOIDC.Issuer, Subject: "s-1", Email: "cy@example.com", Values: []string{"admins"}}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { _, errs[i] = accounts.SignInOIDC(context.Background(), pool, testOIDC, id) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Errorf("sign-in at once: %v", err)
		}
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM users WHERE oidc_subject = 's-1'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d users for one subject (%v)", n, err)
	}
}
