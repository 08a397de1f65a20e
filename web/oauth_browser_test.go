package web_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/destination"
	"github.com/oncehook/oncehook/internal/engine"
	"github.com/oncehook/oncehook/internal/inbox"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/notify"
	"github.com/oncehook/oncehook/internal/oauthstore"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/sandbox/authserver"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/web"
)

// oauthConfig has one Stripe source whose checkouts open an opportunity in a CRM
// reached with the OAuth2 authorization-code grant. %[1]s is the CRM, %[2]s the
// authorization server, %[3]s the mail sink for owner digests.
const oauthConfig = `
sources:
  - {name: stripe-live, client: acme, provider: stripe, account: acct_1, environment: live, secret_env: STRIPE_SECRET}
destinations:
  - name: crm
    type: http
    create: {method: POST, url: "%[1]s/opportunities"}
    auth:
      oauth2:
        grant: authorization_code
        token_url: %[2]s/token
        authorize_url: %[2]s/authorize
        client_id_env: CRM_CLIENT_ID
        client_secret_env: CRM_CLIENT_SECRET
        scopes: [crm]
    reference_field: source_ref
    lookup: {url: "%[1]s/opportunities?source_ref={ref}", consistency: strong}
    timeout: 5s
    owner: crm-admin@example.com
actions:
  - name: open_opportunity
    source: stripe-live
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    destination: crm
    params: {enquiry_id: /data/object/metadata/enquiry_id}
notify:
  every: 1m
  smtp: {addr: "%[3]s", from: oncehook@example.com}
`

var oauthEnv = map[string]string{"STRIPE_SECRET": dashStripeSecret, "CRM_CLIENT_ID": "oncehook-crm",
	"CRM_CLIENT_SECRET": "crm-client-secret-81f2", settings.SecretKeyEnv: "q9Jc2v0N9f0cS4nq0p1u3mZyXbq3rQ3l7w1vYc8hK2E="}

// TestOAuthConnectRevokeReconnectInTheBrowser: an authorization_code destination
// waits for its first connection, which an admin makes through the provider's
// page; a revoked grant holds its work and tells its owner; Reconnect through the
// browser releases it. Each action leaves exactly one record in the CRM.
func TestOAuthConnectRevokeReconnectInTheBrowser(t *testing.T) {
	ctx := context.Background()
	as := authserver.New(authserver.Params{ClientID: oauthEnv["CRM_CLIENT_ID"], ClientSecret: oauthEnv["CRM_CLIENT_SECRET"]})
	t.Cleanup(as.Close)
	crm := sandbox.NewCRM(sandbox.CRMParams{Authorize: as.Valid})
	crmSrv := httptest.NewServer(crm.Handler())
	t.Cleanup(crmSrv.Close)
	mail, err := sandbox.StartMail("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mail.Close)
	cfg, err := config.Parse("oauth.yaml", []byte(fmt.Sprintf(oauthConfig, crmSrv.URL, as.URL, mail.Addr())),
		func(k string) string { return oauthEnv[k] })
	if err != nil {
		t.Fatal(err)
	}
	pool := dbtest.New(t)
	tokens, err := oauthstore.OpenTokens(ctx, pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedWriter{w: &strings.Builder{}}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	clients := destination.NewClients(cfg)
	destination.UseOAuth(clients, cfg, tokens, nil)
	review := review.New(pool, cfg, clients)
	srv := httptest.NewServer(web.New(web.Params{Config: cfg, Pool: pool, Inbox: inbox.New(pool, logger, nil),
		Review: review, Logger: logger}))
	t.Cleanup(srv.Close)
	cfg.BaseURL = srv.URL
	as.SetRedirectDomain(srv.URL)
	eng := engine.New(engine.Params{Pool: pool, Config: cfg, Clients: clients, Logger: logger,
		Poll: 50 * time.Millisecond, LeaseExtra: 5 * time.Second, BackoffBase: 20 * time.Millisecond,
		BackoffMax: 200 * time.Millisecond, Grace: 2 * time.Second})
	engCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(engCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	if _, err := accounts.CreateUser(ctx, pool, adminEmail, settings.RoleAdmin, password); err != nil {
		t.Fatal(err)
	}
	d := &dashboard{t: t, url: srv.URL, pool: pool, cfg: cfg, review: review, crm: crm, mail: mail, logs: logs}

	// Before its first connection the destination holds its work.
	d.checkout("evt_o1", "enq-1", "first")
	held := d.waitAction("open_opportunity", "enq-1", ledger.StateHeld)
	b := newBrowser(t, srv.URL)
	b.login(adminEmail, password)
	b.open("/destinations", "main")
	if text := b.text("main"); !strings.Contains(text, "not connected yet") {
		t.Errorf("the destinations page does not say why crm waits:\n%s", text)
	}
	reconnect := func() {
		t.Helper()
		b.open("/destinations", `button[aria-label="Reconnect crm"]`)
		b.submit(`button[aria-label="Reconnect crm"]`)
		if loc := eval[string](b, "location.origin + location.pathname"); loc != as.URL+"/authorize" {
			t.Fatalf("Reconnect led to %s, not the provider's authorize page", loc)
		}
		b.submit("#approve")
		if loc := b.location(); loc != "/destinations" {
			t.Fatalf("after approving, the browser is at %s:\n%s", loc, b.text("main"))
		}
	}
	reconnect()
	if text := b.text("main"); !strings.Contains(text, "crm is connected; 1 held actions were released.") {
		t.Errorf("no confirmation of the connection:\n%s", text)
	}
	first := d.waitAction("open_opportunity", "enq-1", ledger.StateConfirmed)
	if n := crm.CountByRef(held.OperationKey); n != 1 || first.ExternalRef == "" {
		t.Fatalf("enq-1: %d records (ref %q), want 1", n, first.ExternalRef)
	}

	// The provider revokes the grant: the refresh is refused, the work is held.
	as.Revoke()
	d.checkout("evt_o2", "enq-2", "second")
	second := d.waitAction("open_opportunity", "enq-2", ledger.StateHeld)
	if n := crm.CountByRef(second.OperationKey); n != 0 {
		t.Fatalf("enq-2 has %d records while held", n)
	}
	b.open("/destinations", "main")
	if text := b.text("main"); !strings.Contains(text, "credential refresh cannot recover access") || !strings.Contains(text, "invalid_grant") {
		t.Errorf("the destinations page does not say why crm is disconnected:\n%s", text)
	}
	notifier := notify.New(notify.Params{Pool: pool, Config: cfg,
		Mail: destination.NewSMTP(cfg.Notify.SMTP.Destination()), Logger: logger})
	if _, err := notifier.NotifyOnce(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	told := false
	for _, m := range mail.Messages() {
		told = told || (strings.Join(m.To, ",") == "crm-admin@example.com" && strings.Contains(m.Body, "enq-2"))
	}
	if !told {
		t.Errorf("the connection owner was not told about enq-2: %+v", mail.Messages())
	}

	// Reconnect through the browser releases it.
	codeGrants := as.Grants("authorization_code")
	reconnect()
	d.waitAction("open_opportunity", "enq-2", ledger.StateConfirmed)
	if n := crm.CountByRef(second.OperationKey); n != 1 {
		t.Errorf("enq-2: %d records, want 1", n)
	}
	if n := crm.Len(); n != 2 {
		t.Errorf("%d records in the CRM, want 2", n)
	}

	// A replayed callback and a forged one change nothing.
	grants := as.Grants("authorization_code")
	if grants != codeGrants+1 {
		t.Errorf("%d code exchanges for one Reconnect", grants-codeGrants)
	}
	for name, path := range map[string]string{
		"replayed": strings.TrimPrefix(as.LastRedirect(), srv.URL),
		"forged":   "/destinations/crm/oauth/callback?code=forged-code&state=forged-state",
	} {
		b.do("open the "+name+" callback", chromedp.Navigate(srv.URL+path))
		if text := b.text("main"); !strings.Contains(text, "nothing was changed") {
			t.Errorf("%s callback: %s", name, text)
		}
	}
	if n := as.Grants("authorization_code"); n != grants {
		t.Errorf("the refused callbacks exchanged %d codes", n-grants)
	}
	st, err := tokens.Open(ctx)
	if err != nil || !st["crm"].Connected {
		t.Errorf("after the refused callbacks: %v %+v", err, st)
	}

	// No token appears in any log line or page.
	b.open("/destinations", "main")
	page := eval[string](b, "document.documentElement.outerHTML")
	access, refresh := as.Issued()
	for _, tok := range append(access, refresh...) {
		if strings.Contains(logs.String(), tok) || strings.Contains(page, tok) {
			t.Errorf("a token appears in the logs or a page")
		}
	}
	for _, m := range mail.Messages() {
		for _, tok := range append(access, refresh...) {
			if strings.Contains(m.Body, tok) {
				t.Errorf("a token appears in a mail to %v", m.To)
			}
		}
	}
}
