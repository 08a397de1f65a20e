package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/destination"
	"github.com/oncehook/oncehook/internal/engine"
	"github.com/oncehook/oncehook/internal/inbox"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/sender"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/web"
)

const (
	dashStripeSecret = "whsec_dashboard_test"
	dashCRMToken     = "dashboard-crm-token"
	password         = "correct horse battery staple"
	adminEmail       = "admin@example.com"
	opsEmail         = "ops@example.com"
)

// dashConfig has one Stripe source whose checkouts open a CRM opportunity and send
// an email, each independently. %[1]s is the CRM's URL, %[2]s the mail sink.
const dashConfig = `
sources:
  - {name: stripe-live, client: acme, provider: stripe, account: acct_1, environment: live, secret_env: STRIPE_SECRET}
destinations:
  - name: crm
    type: http
    create: {method: POST, url: "%[1]s/opportunities"}
    auth: {bearer_env: CRM_TOKEN}
    idempotency: {header: Idempotency-Key, ttl: 24h}
    reference_field: source_ref
    result_id: /id
    timeout: 5s
    owner: crm-admin@example.com
  - name: mail
    type: smtp
    addr: %[2]s
    from: hello@example.com
    timeout: 5s
    owner: mail-admin@example.com
actions:
  - name: open_opportunity
    source: stripe-live
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    destination: crm
    params:
      enquiry_id: /data/object/metadata/enquiry_id
      amount: /data/object/amount_total
      note: /data/object/metadata/note
    retry: {attempts: 3, within: 1h}
    owner: sales-ops@example.com
  - name: send_welcome_email
    source: stripe-live
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    destination: mail
    params:
      to: /data/object/customer_details/email
      subject: {const: Welcome}
      text: {const: "Thanks!"}
    retry: {attempts: 2, within: 1h}
`

// dashboard is a running oncehook with the dashboard: Postgres, the sandbox CRM and
// mail sink, the engine, and two people, an admin and an operator.
type dashboard struct {
	t      *testing.T
	url    string
	pool   *pgxpool.Pool
	cfg    *settings.Config
	review *review.Review
	crm    *sandbox.CRM
	mail   *sandbox.Mail
	logs   *lockedWriter
	clock  *testClock // the pages' and the review's time: the real one, moved on by a test
}

// testClock is the time plus an offset a test moves it on by.
type testClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

// Advance moves the clock on by d.
func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

func newDashboard(t *testing.T) *dashboard {
	t.Helper()
	return newDashboardConfig(t, dashConfig)
}

// dashAfterConfig is dashConfig with the email sent only after the CRM
// opportunity is confirmed: a follow-on action.
var dashAfterConfig = strings.Replace(dashConfig, "    destination: mail\n    params:\n      to:",
	"    destination: mail\n    after: open_opportunity\n    params:\n      to:", 1)

// newDashboardConfig is newDashboard with its own config text (with dashConfig's
// two %s: the CRM's URL and the mail sink's address).
func newDashboardConfig(t *testing.T, cfgText string) *dashboard {
	t.Helper()
	return newDashboardEnv(t, cfgText, nil)
}

// newDashboardEnv is newDashboardConfig with more environment variables for the
// config to read (an alert channel's URL).
func newDashboardEnv(t *testing.T, cfgText string, extraEnv map[string]string) *dashboard {
	t.Helper()
	d := &dashboard{t: t, logs: &lockedWriter{w: &strings.Builder{}}}
	d.pool = dbtest.New(t)
	d.crm = sandbox.NewCRM(sandbox.CRMParams{Token: dashCRMToken})
	crmSrv := httptest.NewServer(d.crm.Handler())
	t.Cleanup(crmSrv.Close)
	mail, err := sandbox.StartMail("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mail.Close)
	d.mail = mail
	env := map[string]string{"STRIPE_SECRET": dashStripeSecret, "CRM_TOKEN": dashCRMToken}
	for k, v := range extraEnv {
		env[k] = v
	}
	d.cfg, err = config.Parse("dashboard.yaml", []byte(fmt.Sprintf(cfgText, crmSrv.URL, mail.Addr())),
		func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(d.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	clients := destination.NewClients(d.cfg)
	d.clock = &testClock{}
	d.review = review.New(d.pool, d.cfg, clients).WithClock(d.clock.Now)
	e := web.New(web.Params{Config: d.cfg, Pool: d.pool, Inbox: inbox.New(d.pool, logger, nil),
		Review: d.review, Logger: logger, Now: d.clock.Now})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	d.url = srv.URL

	eng := engine.New(engine.Params{Pool: d.pool, Config: d.cfg, Clients: clients, Logger: logger,
		Poll: 50 * time.Millisecond, LeaseExtra: 5 * time.Second, BackoffBase: 20 * time.Millisecond,
		BackoffMax: 200 * time.Millisecond, Grace: 2 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	for email, role := range map[string]string{adminEmail: settings.RoleAdmin, opsEmail: settings.RoleOperator} {
		if _, err := accounts.CreateUser(context.Background(), d.pool, email, role, password, scopeOf(d.cfg, role)...); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// checkout delivers a signed checkout.session.completed for enquiry, with extra
// raw JSON text put in metadata.note, and returns the event id.
func (d *dashboard) checkout(eventID, enquiry, note string) string {
	d.t.Helper()
	body := []byte(`{"id":"` + eventID + `","type":"checkout.session.completed","created":1700000000,` +
		`"data":{"object":{"id":"cs_` + eventID + `","amount_total":4200,"customer_details":{"email":"ada@example.com"},` +
		`"metadata":{"enquiry_id":"` + enquiry + `","note":"` + note + `"}}}}`)
	id, ok := d.post(body)["event_id"].(string)
	if !ok {
		d.t.Fatalf("deliver %s: no event id in the reply", eventID)
	}
	return id
}

// post sends body to the dashboard's Stripe source, signed as Stripe signs it,
// fails the test unless it is acknowledged, and returns the ingest reply: the
// one way the dashboard tests deliver a webhook.
func (d *dashboard) post(body []byte) map[string]any {
	d.t.Helper()
	hdr, err := sender.Headers("stripe", dashStripeSecret, sender.Delivery{Body: body})
	if err != nil {
		d.t.Fatal(err)
	}
	return d.call(http.MethodPost, "/hooks/stripe-live", hdr, body, http.StatusOK)
}

// call sends one request and fails the test unless it is answered want, with
// JSON; the server's log tail goes with a failure.
func (d *dashboard) call(method, path string, hdr http.Header, body []byte, want int) map[string]any {
	d.t.Helper()
	req, err := http.NewRequest(method, d.url+path, bytes.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header = hdr
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		d.t.Fatalf("%s %s: %d, want %d: %s\nlogs:\n%s", method, path, res.StatusCode, want, raw, tailOf(d.logs.String(), 1500))
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		d.t.Fatalf("%s %s: not JSON: %s", method, path, raw)
	}
	return out
}

// waitAction polls until the action named name for enquiry is in state want.
func (d *dashboard) waitAction(name, enquiry, want string) ledger.Action {
	d.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last []ledger.Action
	for time.Now().Before(deadline) {
		page, err := d.review.ListActions(context.Background(), review.ActionFilter{Name: name, Q: enquiry, Limit: 10})
		if err != nil {
			d.t.Fatal(err)
		}
		last = page.Actions
		for _, a := range page.Actions {
			if a.BusinessKey == enquiry && a.State == want {
				return a
			}
		}
		time.Sleep(25 * time.Millisecond) // poll interval
	}
	d.t.Fatalf("%s %s never became %s; last %+v\nlogs:\n%s", name, enquiry, want, last, tailOf(d.logs.String(), 3000))
	return ledger.Action{}
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// person is a browser-less client of the dashboard: a cookie jar, no redirects
// followed, so each test sees exactly what the server answered.
type person struct {
	d      *dashboard
	client *http.Client
	jar    *cookiejar.Jar
}

func (d *dashboard) person() *person {
	jar, _ := cookiejar.New(nil)
	return &person{d: d, jar: jar, client: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// reply is one answer of the server.
type reply struct {
	status   int
	location string
	body     string
	header   http.Header
}

func (p *person) do(method, path string, form url.Values, hdr map[string]string) reply {
	p.d.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, p.d.url+path, body)
	if err != nil {
		p.d.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := p.client.Do(req)
	if err != nil {
		p.d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return reply{status: res.StatusCode, location: res.Header.Get("Location"), body: string(raw), header: res.Header}
}

func (p *person) get(path string) reply { return p.do(http.MethodGet, path, nil, nil) }

var csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// token is the CSRF token of the forms on path.
func (p *person) token(path string) string {
	p.d.t.Helper()
	pg := p.get(path)
	m := csrfField.FindStringSubmatch(pg.body)
	if m == nil {
		p.d.t.Fatalf("no csrf token on %s (%d): %s", path, pg.status, tailOf(pg.body, 500))
	}
	return m[1]
}

// post sends a form from path's page: with that page's CSRF token, as a browser would.
func (p *person) post(from, path string, form url.Values) reply {
	p.d.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf_token", p.token(from))
	return p.do(http.MethodPost, path, form, map[string]string{"Origin": p.d.url, "Sec-Fetch-Site": "same-origin"})
}

func (p *person) login(email string) {
	p.d.t.Helper()
	pg := p.post("/login", "/login", url.Values{"email": {email}, "password": {password}})
	if pg.status != http.StatusSeeOther || pg.location != "/" {
		p.d.t.Fatalf("login %s: %d to %q: %s", email, pg.status, pg.location, tailOf(pg.body, 500))
	}
}

func (p *person) sessionCookie() string {
	u, _ := url.Parse(p.d.url)
	for _, c := range p.jar.Cookies(u) {
		if c.Name == "oncehook_session" {
			return c.Value
		}
	}
	return ""
}

// scopeOf is the clients a test gives a person or token of role: every client of
// cfg for an operator or a viewer, none (every one, implied) for an admin.
func scopeOf(cfg *settings.Config, role string) []string {
	if role == settings.RoleAdmin {
		return nil
	}
	return cfg.Clients()
}
