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
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/destination"
	"github.com/oncehook/oncehook/internal/engine"
	"github.com/oncehook/oncehook/internal/inbox"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/settings"
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
	o := startOP(t, "oncehook-test", base+settings.OIDCCallbackPath)
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
	d.review = review.New(d.pool, d.cfg, clients)
	srv := httptest.NewUnstartedServer(web.New(web.Params{Config: d.cfg, Pool: d.pool,
		Inbox: inbox.New(d.pool, logger, nil), Review: d.review, Logger: logger}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	eng := engine.New(engine.Params{Pool: d.pool, Config: d.cfg, Clients: clients, Logger: logger,
		Poll: 50 * time.Millisecond, LeaseExtra: 5 * time.Second, BackoffBase: 20 * time.Millisecond,
		BackoffMax: 200 * time.Millisecond, Grace: 2 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	if _, err := accounts.CreateUser(ctx, d.pool, adminEmail, settings.RoleAdmin, password); err != nil {
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
		return strings.HasPrefix(u.String(), p.d.url+settings.OIDCCallbackPath)
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
	u, err = accounts.GetUser(context.Background(), d.pool, id)
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
	if !ok || u.Email != annEmail || u.Role != settings.RoleOperator || strings.Join(u.Clients, ",") != "acme" ||
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

// badAnswers are the provider's answers oncehook must refuse: bad changes
// the ID token's claims (signed again with the provider's key), edit the callback.
var badAnswers = []struct {
	name   string
	bad    func(claims map[string]any)
	edit   func(*url.URL)
	status int
	words  string
}{
	{"ForgedState", nil, func(u *url.URL) {
		q := u.Query()
		q.Set("state", "forged-state")
		u.RawQuery = q.Encode()
	}, http.StatusBadRequest, "This sign-in was not started here"},
	{"WrongNonce", func(c map[string]any) { c["nonce"] = "another-sign-ins-nonce" }, nil,
		http.StatusUnauthorized, "its nonce differs"},
	{"WrongAudience", func(c map[string]any) { c["aud"] = []string{"another-app"}; c["azp"] = "another-app" }, nil,
		http.StatusUnauthorized, "did not pass the checks (issuer, audience, signature)"},
	{"WrongIssuer", func(c map[string]any) { c["iss"] = "https://idp.example.net" }, nil,
		http.StatusUnauthorized, "did not pass the checks"},
	{"Expired", func(c map[string]any) {
		c["iat"], c["exp"] = time.Now().Add(-time.Hour).Unix(), time.Now().Add(-30*time.Minute).Unix()
	}, nil, http.StatusUnauthorized, "had expired before it arrived"},
	{"ForgedSignature", func(c map[string]any) { c[forgeClaim] = true }, nil,
		http.StatusUnauthorized, "did not pass the checks"},
	{"UnverifiedEmail", func(c map[string]any) { c["email_verified"] = false }, nil,
		http.StatusUnauthorized, "has not verified the email"},
}

// TestOIDCRefusals: each bad answer is refused in plain words, and stores no
// user and starts no session.
func TestOIDCRefusals(t *testing.T) {
	t.Parallel()
	d, o := newOIDCDashboard(t, true)
	o.setGroups(annSubject, "acme-ops")
	for _, c := range badAnswers {
		t.Run(c.name, func(t *testing.T) {
			o.issueBad(c.bad)
			defer o.issueBad(nil)
			p := d.person()
			r := p.oidcSignIn(o, "ann", c.edit)
			if r.status != c.status || !strings.Contains(r.body, c.words) {
				t.Errorf("callback: %d, want %d with %q: %s", r.status, c.status, c.words, tailOf(r.body, 600))
			}
			if u, ok := d.oidcUser(annSubject); ok {
				t.Errorf("a refused sign-in stored %+v", u)
			}
			if who := p.signedIn(); who != "" {
				t.Errorf("a refused sign-in left a session of %s", who)
			}
		})
	}
	if logs := d.logs.String(); strings.Contains(logs, o.secret) || !strings.Contains(logs, "nonce mismatch") {
		t.Errorf("the logs hold the client secret, or not why a sign-in was refused:\n%s", tailOf(logs, 2000))
	}
	t.Run("ReplayedCallback", func(t *testing.T) {
		p := d.person()
		var cb *url.URL
		if r := p.oidcSignIn(o, "ann", func(u *url.URL) { cb = u }); r.status != http.StatusSeeOther {
			t.Fatalf("sign-in: %d %s", r.status, tailOf(r.body, 500))
		}
		// The same answer again, in another browser or the same: its state is spent.
		for _, q := range []*person{p, d.person()} {
			if r := q.get(cb.RequestURI()); r.status != http.StatusBadRequest {
				t.Errorf("a replayed callback: %d, want 400", r.status)
			}
		}
	})
}

// TestOIDCGroupChange: the provider's groups decide the access at each
// sign-in; a removed group takes it away.
func TestOIDCGroupChange(t *testing.T) {
	t.Parallel()
	d, o := newOIDCDashboard(t, true)
	steps := []struct {
		groups  []string
		role    string
		clients string
	}{
		{[]string{"acme-ops"}, settings.RoleOperator, "acme"},
		{[]string{"acme-view", "admins"}, settings.RoleAdmin, ""},
		{[]string{"acme-view"}, settings.RoleViewer, "acme"},
	}
	var first ledger.User
	for i, s := range steps {
		o.setGroups(annSubject, s.groups...)
		p := d.person()
		var before string // the session token that carried the sign-in's state
		if r := p.oidcSignIn(o, "ann", func(*url.URL) { before = p.sessionCookie() }); r.status != http.StatusSeeOther || r.location != "/" {
			t.Fatalf("sign-in %d: %d %s", i, r.status, tailOf(r.body, 500))
		}
		if after := p.sessionCookie(); before == "" || after == "" || after == before {
			t.Errorf("the session token was %q before signing in and %q after, want a new one", before, after)
		}
		u, _ := d.oidcUser(annSubject)
		if i == 0 {
			first = u
		}
		if u.ID != first.ID || u.Role != s.role || strings.Join(u.Clients, ",") != s.clients {
			t.Errorf("after signing in with %v: user %d %s of %v, want user %d %s of %q", s.groups, u.ID, u.Role, u.Clients,
				first.ID, s.role, s.clients)
		}
	}
	// The last step's session is live when the groups go; signing in again ends it.
	viewer := d.person()
	if r := viewer.oidcSignIn(o, "ann", nil); r.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", r.status, tailOf(r.body, 500))
	}
	o.setGroups(annSubject, "sales")
	p := d.person()
	r := p.oidcSignIn(o, "ann", nil)
	if r.status != http.StatusForbidden || !strings.Contains(r.body, "Your TestIdP account is in no group with access to oncehook") {
		t.Errorf("sign-in with no group of the rules: %d %s", r.status, tailOf(r.body, 600))
	}
	if u, _ := d.oidcUser(annSubject); u.Role != settings.RoleViewer || len(u.Clients) != 0 {
		t.Errorf("after the groups were removed: %s of %v, want no client left", u.Role, u.Clients)
	}
	if who := p.signedIn(); who != "" {
		t.Errorf("a refused sign-in left a session of %s", who)
	}
	if who := viewer.signedIn(); who != "" {
		t.Errorf("the session from before the groups were removed is still %s's", who)
	}
}

// TestOIDCDisabledSessionEnds: a live session of a user an admin disables ends
// at its next request, and stays ended; the provider cannot sign them in again.
func TestOIDCDisabledSessionEnds(t *testing.T) {
	t.Parallel()
	d, o := newOIDCDashboard(t, true)
	o.setGroups(annSubject, "acme-ops")
	ann := d.person()
	if form := ann.get("/login"); !strings.Contains(form.body, `id="sign-in-oidc"`) || !strings.Contains(form.body, `id="password"`) {
		t.Errorf("with passwords on, the sign-in page lacks the button or the form")
	}
	if r := ann.oidcSignIn(o, "ann", nil); r.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", r.status, tailOf(r.body, 500))
	}
	if who := ann.signedIn(); who != annEmail {
		t.Fatalf("signed in as %q", who)
	}
	u, _ := d.oidcUser(annSubject)
	boss := ledger.Actor{Name: adminEmail, Role: settings.RoleAdmin}
	if err := accounts.SetUserDisabled(t.Context(), d.pool, boss, u.ID, true); err != nil {
		t.Fatal(err)
	}
	if r := ann.get("/"); r.status != http.StatusSeeOther || r.location != "/login" {
		t.Errorf("the disabled user's session: %d to %q, want sent to sign in", r.status, r.location)
	}
	r := d.person().oidcSignIn(o, "ann", nil)
	if r.status != http.StatusForbidden || !strings.Contains(r.body, "This account is disabled") {
		t.Errorf("a disabled user signing in through the provider: %d %s", r.status, tailOf(r.body, 500))
	}
	if err := accounts.SetUserDisabled(t.Context(), d.pool, boss, u.ID, false); err != nil {
		t.Fatal(err)
	}
	if who := ann.signedIn(); who != "" {
		t.Errorf("the ended session came back as %s's when the user was enabled again", who)
	}
}

// TestOIDCAuditNamesSubject: an act by a person the provider signed in is in
// the audit as their email with their subject, on the page too; owners are
// still matched by email.
func TestOIDCAuditNamesSubject(t *testing.T) {
	t.Parallel()
	d, o := newOIDCDashboard(t, true)
	d.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved"})
	d.checkout("evt_oidc", "enq-oidc", "")
	a := d.waitAction("open_opportunity", "enq-oidc", ledger.StateFailed)
	path := "/actions/" + id64(a.ID)
	o.setGroups(annSubject, "acme-ops")
	ann := d.person()
	if r := ann.oidcSignIn(o, "ann", nil); r.status != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", r.status, tailOf(r.body, 500))
	}
	admin := d.person()
	admin.login(adminEmail)
	if r := admin.post(path, path+"/assign", url.Values{"owner": {annEmail}}); r.status != http.StatusSeeOther {
		t.Fatalf("assign to ann: %d %s", r.status, tailOf(r.body, 500))
	}
	if mine := ann.get("/mine"); !strings.Contains(mine.body, "enq-oidc") {
		t.Errorf("ann's own queue lacks the action assigned to her email")
	}
	if r := ann.post(path, path+"/resolve", url.Values{"note": {"settled by phone"}, "external_ref": {"OPP-9"}}); r.status != http.StatusSeeOther {
		t.Fatalf("resolve: %d %s", r.status, tailOf(r.body, 500))
	}
	detail, err := d.review.GetAction(t.Context(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	const want = annEmail + " (sub " + annSubject + ")"
	last := detail.Audit[len(detail.Audit)-1]
	if last.Act != review.ActResolve || last.Actor != want {
		t.Errorf("audit's last line: %s by %q, want resolve by %q", last.Act, last.Actor, want)
	}
	if page := ann.get(path); !strings.Contains(page.body, "<td>"+want+"</td>") {
		t.Errorf("the action's audit on its page does not name %q", want)
	}
}
