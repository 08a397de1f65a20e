package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// apiStatus is the status of GET /api/v1/summary with token.
func apiStatus(t *testing.T, base, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/api/v1/summary", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

var newTokenValue = regexp.MustCompile(`id="new-token-value">(ohk_[A-Za-z0-9_-]+)<`)

// TestTokenLifecycleOnTheTokensPage: an admin creates a token on /tokens (shown
// once, with its expiry), it works and its last use shows; once revoked, or once
// past its expiry, it is refused with 401; the creation and the revocation are
// in the token audit under the admin's name.
func TestTokenLifecycleOnTheTokensPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newAccessSite(t)
	admin := s.person()
	admin.login(adminEmail)
	pg := admin.post("/tokens", "/tokens", url.Values{"name": {"ci-deploy"}, "role": {settings.RoleOperator}, "clients": {"acme"}, "expires_days": {"90"}})
	m := newTokenValue.FindStringSubmatch(pg.body)
	if pg.status != http.StatusOK || m == nil {
		t.Fatalf("create: %d, no token shown:\n%s", pg.status, tailOf(pg.body, 800))
	}
	token := m[1]
	var id int64
	var expires time.Time
	if err := s.pool.QueryRow(ctx, `SELECT id, expires_at FROM api_tokens WHERE name = 'ci-deploy'`).Scan(&id, &expires); err != nil {
		t.Fatal(err)
	}
	if d := time.Until(expires) - 90*24*time.Hour; d > time.Minute || d < -time.Minute {
		t.Errorf("expires at %s, want 90 days from now", expires)
	}
	if strings.Contains(admin.get("/tokens").body, token) {
		t.Error("the token is shown again after its creation")
	}
	if st := apiStatus(t, s.url, token); st != http.StatusOK {
		t.Fatalf("new token: %d, want 200", st)
	}
	row := tokenRow(admin.get("/tokens").body, id)
	if !strings.Contains(row, "active") || strings.Contains(row, `class="token-used">never`) {
		t.Errorf("after use, the row does not show it active and used:\n%s", row)
	}

	pg = admin.post("/tokens", "/tokens/"+itoa(id)+"/revoke", nil)
	if pg.status != http.StatusSeeOther {
		t.Fatalf("revoke: %d %s", pg.status, tailOf(pg.body, 500))
	}
	if st := apiStatus(t, s.url, token); st != http.StatusUnauthorized {
		t.Errorf("revoked token: %d, want 401", st)
	}
	if row := tokenRow(admin.get("/tokens").body, id); !strings.Contains(row, "revoked") || strings.Contains(row, "Revoke") {
		t.Errorf("after revoking, the row:\n%s", row)
	}

	// An expiring token: the clock is moved past its expiry, as time would.
	old, _, err := accounts.IssueToken(ctx, s.pool, accounts.TokenParams{Name: "short", Role: settings.RoleOperator, Clients: []string{"acme"},
		Expires: time.Hour, Actor: ledger.Actor{Name: adminEmail, Role: settings.RoleAdmin}})
	if err != nil {
		t.Fatal(err)
	}
	if st := apiStatus(t, s.url, old); st != http.StatusOK {
		t.Fatalf("token before its expiry: %d, want 200", st)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE name = 'short'`); err != nil {
		t.Fatal(err)
	}
	if st := apiStatus(t, s.url, old); st != http.StatusUnauthorized {
		t.Errorf("expired token: %d, want 401", st)
	}

	var lines []string
	rows, err := s.pool.Query(ctx, `SELECT a.actor || ' ' || a.act || ' ' || t.name FROM token_audit a
		JOIN api_tokens t ON t.id = a.token_id WHERE t.name IN ('ci-deploy', 'short') ORDER BY a.id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var l string
		_ = rows.Scan(&l)
		lines = append(lines, l)
	}
	rows.Close()
	want := []string{adminEmail + " create ci-deploy", adminEmail + " revoke ci-deploy", adminEmail + " create short"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("token audit:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if body := admin.get("/tokens").body; !strings.Contains(body, adminEmail+" revoked ci-deploy") {
		t.Errorf("the page's audit does not show the revocation:\n%s", tailOf(body, 1500))
	}
}

// tokenRow is the table row of token id on the tokens page.
func tokenRow(body string, id int64) string {
	i := strings.Index(body, `id="token-`+itoa(id)+`"`)
	if i < 0 {
		return ""
	}
	j := strings.Index(body[i:], "</tr>")
	return body[i : i+max(j, 0)]
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
