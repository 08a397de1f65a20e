package web_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/destination"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/web"
)

// signInConfig follows dashConfig: %[3]s is base_url, %[4]s the provider's
// issuer, %[5]s whether passwords are accepted.
const signInConfig = `
base_url: %[3]s
sign_in:
  passwords: %[5]s
  oidc:
    name: TestIdP
    issuer: %[4]s
    client_id_env: OIDC_CLIENT_ID
    client_secret_env: OIDC_CLIENT_SECRET
    rules:
      - {group: admins, role: admin}
      - {group: acme-ops, role: operator, clients: [acme]}
      - {group: acme-view, role: viewer, clients: [acme]}
`

const (
	annSubject = "248289761001"
	annEmail   = "ann@example.com"
)

// newOIDCDashboard is newDashboard signing people in through a test provider:
// its base_url is known before it starts, since the provider must know where
// to send people back. The admin and the operator have local passwords.
func newOIDCDashboard(t *testing.T, passwords bool) (*dashboard, *testOP) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	o := startOP(t, "oncehook-test", base+web.OIDCCallbackPath)
	d := &dashboard{t: t, logs: &lockedWriter{w: &strings.Builder{}}, url: base}
	d.pool = dbtest.New(t)
	d.crm = sandbox.NewCRM(sandbox.CRMParams{Token: dashCRMToken})
	crmSrv := httptest.NewServer(d.crm.Handler())
	t.Cleanup(crmSrv.Close)
	if d.mail, err = sandbox.StartMail("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.mail.Close)
	env := map[string]string{"STRIPE_SECRET": dashStripeSecret, "CRM_TOKEN": dashCRMToken,
		"OIDC_CLIENT_ID": o.clientID, "OIDC_CLIENT_SECRET": o.secret}
	text := fmt.Sprintf(dashConfig+signInConfig, crmSrv.URL, d.mail.Addr(), base, o.issuer, fmt.Sprint(passwords))
	if d.cfg, err = config.Parse("dashboard.yaml", []byte(text), func(k string) string { return env[k] }); err != nil {
		t.Fatalf("config: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(d.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	clients := destination.NewClients(d.cfg)
	d.review = ledger.NewReview(d.pool, d.cfg, clients)
	srv := httptest.NewUnstartedServer(web.New(web.Params{Config: d.cfg, Pool: d.pool,
		Inbox: ledger.NewInbox(d.pool, logger, nil), Review: d.review, Logger: logger}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	eng := ledger.NewEngine(ledger.EngineParams{Pool: d.pool, Config: d.cfg, Clients: clients, Logger: logger,
		Poll: 50 * time.Millisecond, LeaseExtra: 5 * time.Second, BackoffBase: 20 * time.Millisecond,
		BackoffMax: 200 * time.Millisecond, Grace: 2 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if _, err := ledger.CreateUser(ctx, d.pool, adminEmail, ledger.RoleAdmin, password); err != nil {
		t.Fatal(err)
	}
	return d, o
}

// oidcSignIn goes through the provider's sign-in as user (whose password is
// user + "-password") with the person's cookies, and returns oncehook's reply
// to the callback; edit, if set, changes the callback's URL first.
func (p *person) oidcSignIn(o *testOP, user string, edit func(*url.URL)) reply {
	p.d.t.Helper()
	start := p.get("/login/oidc")
	if start.status != http.StatusSeeOther {
		p.d.t.Fatalf("GET /login/oidc: %d %s", start.status, tailOf(start.body, 500))
	}
	form := p.follow(start.location, func(u *url.URL) bool { return u.Path == "/login/username" })
	res, err := p.client.PostForm(o.issuer+"/login/username", url.Values{"id": {form.Query().Get("authRequestID")},
		"username": {user}, "password": {user + "-password"}})
	if err != nil {
		p.d.t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusFound {
		p.d.t.Fatalf("the provider's sign-in: %d", res.StatusCode)
	}
	back, err := res.Location()
	if err != nil {
		p.d.t.Fatal(err)
	}
	cb := p.follow(back.String(), func(u *url.URL) bool {
		return strings.HasPrefix(u.String(), p.d.url+web.OIDCCallbackPath)
	})
	if edit != nil {
		edit(cb)
	}
	return p.get(cb.RequestURI())
}

// follow follows redirects from loc until stop says the URL is where to stop.
func (p *person) follow(loc string, stop func(*url.URL) bool) *url.URL {
	p.d.t.Helper()
	for range 10 {
		u, err := url.Parse(loc)
		if err != nil {
			p.d.t.Fatal(err)
		}
		if stop(u) {
			return u
		}
		res, err := p.client.Get(loc)
		if err != nil {
			p.d.t.Fatal(err)
		}
		res.Body.Close()
		next, err := res.Location()
		if err != nil {
			p.d.t.Fatalf("GET %s: %d and no redirect", loc, res.StatusCode)
		}
		loc = next.String()
	}
	p.d.t.Fatalf("too many redirects from %s", loc)
	return nil
}

// signedIn reports who the person's session belongs to, "" for nobody.
func (p *person) signedIn() string {
	p.d.t.Helper()
	pg := p.get("/")
	if pg.status == http.StatusSeeOther {
		return ""
	}
	if pg.status != http.StatusOK {
		p.d.t.Fatalf("GET /: %d", pg.status)
	}
	for _, email := range []string{annEmail, adminEmail, "ben@example.com"} {
		if strings.Contains(pg.body, "<span>"+email+" (") {
			return email
		}
	}
	p.d.t.Fatalf("GET / names nobody: %s", tailOf(pg.body, 500))
	return ""
}

// user is the stored user of the subject, ok false when there is none.
func (d *dashboard) oidcUser(subject string) (u ledger.User, ok bool) {
	d.t.Helper()
	var id int64
	err := d.pool.QueryRow(context.Background(), `SELECT id FROM users WHERE oidc_subject = $1`, subject).Scan(&id)
	if err != nil {
		return ledger.User{}, false
	}
	u, err = ledger.GetUser(context.Background(), d.pool, id)
	if err != nil {
		d.t.Fatal(err)
	}
	return u, true
}

// TestBrowserOIDCSignIn: with passwords off, the sign-in page offers only the
// provider's button; Chromium goes through the provider and lands on the
// dashboard as the role the rules give. Passwords are refused.
func TestBrowserOIDCSignIn(t *testing.T) {
	t.Parallel()
	d, o := newOIDCDashboard(t, false)
	o.setGroups(annSubject, "sales", "acme-ops")
	b := newBrowser(t, d.url)
	b.open("/login?next=/actions", "#sign-in-oidc")
	if eval[bool](b, `document.getElementById('password') !== null`) {
		t.Errorf("the password form is shown with passwords off")
	}
	if got := b.text("#sign-in-oidc"); got != "Sign in with TestIdP" {
		t.Errorf("the button reads %q", got)
	}
	b.submit("#sign-in-oidc")
	b.do("sign in at the provider", chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), "ann"), chromedp.SendKeys(chromedp.ID("password"), "ann-password"))
	b.submit("#op-submit")
	if loc := b.location(); loc != "/actions" {
		t.Fatalf("after signing in through the provider: %s, want /actions", loc)
	}
	if got := b.text("details summary"); got != "Account" {
		t.Errorf("the account menu reads %q", got)
	}
	if who := eval[string](b, `document.querySelector('details summary').title`); who != annEmail+" (operator)" {
		t.Errorf("signed in as %q, want %s (operator)", who, annEmail)
	}
	b.screenshot("oidc-signed-in")
	u, ok := d.oidcUser(annSubject)
	if !ok || u.Email != annEmail || u.Role != ledger.RoleOperator || strings.Join(u.Clients, ",") != "acme" ||
		u.OIDCIssuer != o.issuer || u.SignedInAt == nil {
		t.Errorf("stored user %+v, want ann, operator of acme, from %s", u, o.issuer)
	}

	// A password, even the admin's right one, is refused: only the provider signs people in.
	p := d.person()
	if r := p.oidcSignIn(o, "ann", nil); r.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", r.status, tailOf(r.body, 500))
	}
	r := p.post("/", "/login", url.Values{"email": {adminEmail}, "password": {password}})
	if r.status != http.StatusForbidden || !strings.Contains(r.body, "Passwords are turned off here") {
		t.Errorf("a password sign-in with passwords off: %d %s", r.status, tailOf(r.body, 400))
	}
	if who := p.signedIn(); who != annEmail {
		t.Errorf("after the refused password, the session is %q's, want unchanged", who)
	}
}
