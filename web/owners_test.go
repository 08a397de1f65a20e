package web_test

import (
	"strings"
	"testing"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestOwnersWithoutAccountFlagged: the config's owners that nobody signs in as are
// listed on /users with a way to add them, and flagged where they own something.
func TestOwnersWithoutAccountFlagged(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	without, err := accounts.OwnersWithoutAccount(t.Context(), d.pool, d.cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"crm-admin@example.com", "mail-admin@example.com", "sales-ops@example.com"}
	if strings.Join(without, ",") != strings.Join(want, ",") {
		t.Errorf("owners without an account = %v, want %v", without, want)
	}
	admin := d.person()
	admin.login(adminEmail)
	users := admin.get("/users")
	for _, o := range want {
		if !strings.Contains(users.body, `href="/users?email=`+strings.ReplaceAll(o, "@", "%40")+`#new-email"`) {
			t.Errorf("/users offers no account for %s", o)
		}
	}
	if add := admin.get("/users?email=sales-ops%40example.com"); !strings.Contains(add.body, `value="sales-ops@example.com"`) {
		t.Errorf("the add form is not filled in")
	}
	dests := admin.get("/destinations")
	if n := strings.Count(dests.body, `class="no-account"`); n != 2 {
		t.Errorf("/destinations flags %d owners, want 2 (crm-admin, mail-admin)", n)
	}
	if _, err := accounts.CreateUser(t.Context(), d.pool, "crm-admin@example.com", settings.RoleOperator, password, d.cfg.Clients()...); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(admin.get("/destinations").body, `class="no-account"`); n != 1 {
		t.Errorf("after adding crm-admin, /destinations flags %d owners, want 1", n)
	}
}
