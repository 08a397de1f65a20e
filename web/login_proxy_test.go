package web_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/inbox"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/web"
)

// proxyLimits are the default limits with short waits, so the test is quick.
var proxyLimits = accounts.LoginLimits{PerAccount: 5, PerAddress: 20, Window: 15 * time.Minute,
	Delay: 100 * time.Millisecond, MaxDelay: 400 * time.Millisecond}

// proxySite is the dashboard with extra top-level config (trusted_proxies) and
// proxyLimits, with the admin and operator accounts.
func proxySite(t *testing.T, extra string) *dashboard {
	t.Helper()
	d := &dashboard{t: t, logs: &lockedWriter{w: &strings.Builder{}}, pool: dbtest.New(t)}
	env := map[string]string{"STRIPE_SECRET": dashStripeSecret, "CRM_TOKEN": dashCRMToken}
	cfg, err := config.Parse("proxy.yaml", []byte(fmt.Sprintf(dashConfig, "http://127.0.0.1:1", "127.0.0.1:1")+extra),
		func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	d.cfg = cfg
	logger := slog.New(slog.NewTextHandler(d.logs, nil))
	srv := httptest.NewServer(web.New(web.Params{Config: cfg, Pool: d.pool, Inbox: inbox.New(d.pool, logger, nil),
		Review: review.New(d.pool, cfg, nil), Logger: logger, LoginLimits: proxyLimits}))
	t.Cleanup(srv.Close)
	d.url = srv.URL
	if _, err := accounts.CreateUser(context.Background(), d.pool, adminEmail, settings.RoleAdmin, password); err != nil {
		t.Fatal(err)
	}
	return d
}

// signIn posts the sign-in form for email with pw as sent through a proxy that
// says the client is xff ("" for no header), and returns the status.
func signIn(d *dashboard, email, pw, xff string) int {
	d.t.Helper()
	p := d.person()
	form := url.Values{"email": {email}, "password": {pw}, "csrf_token": {p.token("/login")}}
	hdr := map[string]string{"Origin": d.url, "Sec-Fetch-Site": "same-origin"}
	if xff != "" {
		hdr["X-Forwarded-For"] = xff
	}
	return p.do(http.MethodPost, "/login", form, hdr).status
}

// TestSignInBehindATrustedProxy: behind a proxy listed in trusted_proxies, a
// guesser's wrong passwords lock out only the guesser's own address; the account's
// owner, at another address behind the same proxy, signs in, after the account's
// short wait.
func TestSignInBehindATrustedProxy(t *testing.T) {
	t.Parallel()
	d := proxySite(t, "trusted_proxies: [127.0.0.1/32]\n")
	const guesser, owner = "203.0.113.5", "198.51.100.7"
	counts := map[int]int{}
	for i := range 25 {
		counts[signIn(d, adminEmail, fmt.Sprintf("guess %d", i), guesser)]++
	}
	if counts[http.StatusUnauthorized] != proxyLimits.PerAccount || counts[http.StatusTooManyRequests] != 25-proxyLimits.PerAccount {
		t.Errorf("25 guesses from one address: %v, want %d checked (401) and the rest refused (429)", counts, proxyLimits.PerAccount)
	}
	if st := signIn(d, adminEmail, password, guesser); st != http.StatusTooManyRequests {
		t.Errorf("the right password from the guesser's address: %d, want 429", st)
	}
	start := time.Now()
	if st := signIn(d, adminEmail, password, owner); st != http.StatusSeeOther {
		t.Fatalf("the owner behind the same proxy: %d, want 303 (signed in)", st)
	}
	if took := time.Since(start); took < proxyLimits.MaxDelay {
		t.Errorf("the owner's sign-in took %s, want the account's wait of %s first", took, proxyLimits.MaxDelay)
	}
	var keys string
	if err := d.pool.QueryRow(context.Background(), `SELECT string_agg(key, ',' ORDER BY key) FROM login_throttle
		WHERE failures > 0`).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(keys, "127.0.0.1") {
		t.Errorf("the proxy's own address was counted: %s", keys)
	}
}

// TestForwardedForIgnoredFromUntrustedPeers: without trusted_proxies, a client
// that names a new address in X-Forwarded-For for each guess is still counted as
// itself, and refused past the address's limit.
func TestForwardedForIgnoredFromUntrustedPeers(t *testing.T) {
	t.Parallel()
	d := proxySite(t, "")
	for i := range proxyLimits.PerAddress {
		signIn(d, fmt.Sprintf("user%d@example.com", i), "wrong password", fmt.Sprintf("192.0.2.%d", i+1))
	}
	if st := signIn(d, adminEmail, password, "192.0.2.200"); st != http.StatusTooManyRequests {
		t.Errorf("after %d failures from one peer under made-up addresses: %d, want 429", proxyLimits.PerAddress, st)
	}
}
