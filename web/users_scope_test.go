package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestAdminsSetScopes: on /users an admin adds a viewer of acme, changes a
// person's role and clients, and is refused a client no source names (the user
// stays as they were); on /tokens a token is made with its clients; the stored
// rows say so, and the new viewer's API token sees acme's actions only.
func TestAdminsSetScopes(t *testing.T) {
	t.Parallel()
	s := newScopeSite(t)
	admin := s.personas[0].p
	ctx := context.Background()
	stored := func(email string) ledger.User {
		t.Helper()
		us, err := accounts.ListUsers(ctx, s.pool, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range us {
			if u.Email == email {
				return u
			}
		}
		t.Fatalf("no user %s", email)
		return ledger.User{}
	}
	r := admin.post("/users", "/users", url.Values{"email": {"vi@example.com"}, "role": {settings.RoleViewer},
		"clients": {"acme"}, "password": {password}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("add a viewer of acme: %d %s", r.status, tailOf(r.body, 300))
	}
	if u := stored("vi@example.com"); u.Role != settings.RoleViewer || !cmp.Equal(u.Clients, []string{"acme"}) {
		t.Errorf("stored %s of %v, want a viewer of acme", u.Role, u.Clients)
	}
	path := fmt.Sprintf("/users/%d/role", stored("vi@example.com").ID)
	r = admin.post("/users", path, url.Values{"role": {settings.RoleOperator}, "clients": {"globex", "acme"}})
	if u := stored("vi@example.com"); r.status != http.StatusSeeOther || u.Role != settings.RoleOperator ||
		!cmp.Equal(u.Clients, []string{"acme", "globex"}) {
		t.Errorf("change to an operator of acme and globex: %d, stored %s of %v", r.status, u.Role, u.Clients)
	}
	r = admin.post("/users", path, url.Values{"role": {settings.RoleViewer}, "clients": {"initech"}})
	if u := stored("vi@example.com"); r.status != http.StatusBadRequest || !strings.Contains(r.body, `&#34;initech&#34;`) ||
		u.Role != settings.RoleOperator {
		t.Errorf("a client no source names: %d, stored %s of %v\n%s", r.status, u.Role, u.Clients, tailOf(r.body, 300))
	}
	page := admin.get("/tokens")
	if !strings.Contains(page.body, `name="clients" value="globex"`) {
		t.Errorf("/tokens offers no clients to choose")
	}
	r = admin.post("/tokens", "/tokens", url.Values{"name": {"acme reader"}, "role": {settings.RoleViewer},
		"clients": {"acme"}, "expires_days": {"1"}})
	m := newTokenValue.FindStringSubmatch(r.body)
	if r.status != http.StatusOK || m == nil {
		t.Fatalf("create a viewer's token: %d %s", r.status, tailOf(r.body, 300))
	}
	ts, err := accounts.ListTokens(ctx, s.pool)
	if err != nil {
		t.Fatal(err)
	}
	last := ts[len(ts)-1]
	if last.Name != "acme reader" || last.Role != settings.RoleViewer || !cmp.Equal(last.Clients, []string{"acme"}) {
		t.Errorf("stored token %+v, want a viewer of acme", last)
	}
	reader := &scopePersona{email: "token", role: settings.RoleViewer, client: "acme", token: m[1]}
	status, body := s.send(reader, target{method: http.MethodGet, path: "/api/v1/actions?limit=100", api: true}, "acme")
	if status != http.StatusOK || !strings.Contains(body, "enq_acme_1") || strings.Contains(body, "globex") {
		t.Errorf("the viewer's token lists: %d %s", status, tailOf(body, 300))
	}
}

// TestUsersPageFlagsOperatorsWithoutClients: an operator left without clients (as
// an upgrade leaves them) is flagged on /users, where the admin gives them some.
func TestUsersPageFlagsOperatorsWithoutClients(t *testing.T) {
	t.Parallel()
	s := newScopeSite(t)
	var id int64
	if err := s.pool.QueryRow(context.Background(),
		`INSERT INTO users (email, role, password_hash) VALUES ('old-op@example.com', 'operator', '') RETURNING id`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	page := s.personas[0].p.get("/users")
	if !strings.Contains(page.body, fmt.Sprintf(`id="no-clients-%d"`, id)) {
		t.Errorf("/users does not flag an operator without clients")
	}
	if strings.Contains(page.body, fmt.Sprintf(`id="no-clients-%d"`, s.user)) {
		t.Errorf("/users flags a viewer who has a client")
	}
}
