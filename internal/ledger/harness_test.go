package ledger_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
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
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/sender"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/web"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild() // the crash tests' performer process; never returns
	}
	dbtest.Main(m)
}

const (
	stripeSecret = "whsec_ledger_test"
	crmToken     = "crm-test-token"
)

// ledgerConfig is the config of the ledger tests: the design card's two actions on a
// Stripe source, a CRM over HTTP and mail over SMTP. %[1]s is the CRM's URL, %[2]s
// the mail sink's address, %[3]s extra destination lines for the CRM.
const ledgerConfig = `
sources:
  - {name: stripe-live, client: acme, provider: stripe, account: acct_1, environment: live, secret_env: STRIPE_SECRET}
  - {name: stripe-simple, client: acme, provider: stripe, account: acct_2, environment: live, secret_env: STRIPE_SECRET}
destinations:
  - name: crm
    type: http
    create: {method: POST, url: "%[1]s/opportunities"}
    auth: {bearer_env: CRM_TOKEN}
    idempotency: {header: Idempotency-Key, ttl: 24h}
    reference_field: source_ref
    result_id: /id
    timeout: 2s
    owner: crm-admin@example.com
%[3]s
  - name: mail
    type: smtp
    addr: %[2]s
    from: hello@example.com
    timeout: 2s
    owner: mail-admin@example.com
actions:
  - name: open_opportunity
    source: stripe-live
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    destination: crm
    resource: /data/object/id
    occurred_at: /created
    cancelled_by: [checkout.session.expired]
    params:
      enquiry_id: /data/object/metadata/enquiry_id
      amount: /data/object/amount_total
    retry: {attempts: 4, within: 1h}
    owner: sales-ops@example.com
  - name: send_welcome_email
    source: stripe-live
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    after: open_opportunity
    destination: mail
    params:
      to: /data/object/customer_details/email
      subject: {const: Welcome}
      text: {result: open_opportunity}   # the CRM record id, from the step before
    retry: {attempts: 3, within: 1h}
  - name: log_checkout        # independent: no resource, no predecessor (routed in runs)
    source: stripe-simple
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    destination: crm
    params:
      enquiry_id: /data/object/metadata/enquiry_id
      amount: /data/object/amount_total
`

// Lookup lines for the CRM destination.
const (
	strongLookup   = `    lookup: {url: "%s/opportunities?source_ref={ref}", consistency: strong}`
	eventualLookup = `    lookup: {url: "%s/opportunities?source_ref={ref}", consistency: eventual}`
)

// world is one ledger test's running system: Postgres, the sandbox CRM and mail
// sink, the oncehook HTTP server and an engine.
type world struct {
	t       *testing.T
	pool    *pgxpool.Pool
	dsn     string
	cfg     *settings.Config
	yaml    string
	crm     *sandbox.CRM
	crmURL  string
	mail    *sandbox.Mail
	url     string
	token   string
	admin   string // an admin API token
	logs    *syncBuffer
	metrics *metrics.Metrics
	stop    func() // stops the engine
}

type worldOptions struct {
	lookup    string // "", "strong" or "eventual"
	keyTTL    time.Duration
	noEngine  bool
	lease     time.Duration
	crmTokens string                          // the token the CRM accepts; default crmToken
	crmWrap   func(http.Handler) http.Handler // stands between oncehook and the CRM
	crmExtra  string                          // more lines of the CRM destination
	yaml      func(string) string             // changes the config before it is loaded
}

func newWorld(t *testing.T, o worldOptions) *world {
	t.Helper()
	w := &world{t: t, logs: &syncBuffer{}}
	w.pool, w.dsn = dbtest.NewDSN(t)
	if o.keyTTL == 0 {
		o.keyTTL = 24 * time.Hour
	}
	if o.crmTokens == "" {
		o.crmTokens = crmToken
	}
	w.crm = sandbox.NewCRM(sandbox.CRMParams{Token: o.crmTokens, KeyTTL: o.keyTTL})
	var crmHandler http.Handler = w.crm.Handler()
	if o.crmWrap != nil {
		crmHandler = o.crmWrap(crmHandler)
	}
	crmSrv := httptest.NewServer(crmHandler)
	t.Cleanup(crmSrv.Close)
	w.crmURL = crmSrv.URL
	mail, err := sandbox.StartMail("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mail.Close)
	w.mail = mail
	extra := ""
	switch o.lookup {
	case "strong":
		extra = fmt.Sprintf(strongLookup, w.crmURL)
	case "eventual":
		extra = fmt.Sprintf(eventualLookup, w.crmURL)
	}
	if o.crmExtra != "" {
		extra += "\n" + o.crmExtra
	}
	w.yaml = fmt.Sprintf(ledgerConfig, w.crmURL, mail.Addr(), extra)
	if o.yaml != nil {
		w.yaml = o.yaml(w.yaml)
	}
	w.cfg = w.loadConfig()
	logger := slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	clients := destination.NewClients(w.cfg)
	w.metrics = metrics.New(w.pool)
	e := web.New(web.Params{Config: w.cfg, Pool: w.pool, Inbox: inbox.New(w.pool, logger, w.metrics),
		Review: review.New(w.pool, w.cfg, clients), Logger: logger, Metrics: w.metrics})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	w.url = srv.URL
	w.token = w.newToken("ops", settings.RoleOperator)
	w.admin = w.newToken("boss", settings.RoleAdmin)
	if !o.noEngine {
		w.stop = w.startEngine(o.lease)
	}
	return w
}

func (w *world) loadConfig() *settings.Config {
	cfg, err := config.Parse("ledger.yaml", []byte(w.yaml), func(k string) string {
		return map[string]string{"STRIPE_SECRET": stripeSecret, "CRM_TOKEN": crmToken}[k]
	})
	if err != nil {
		w.t.Fatalf("config: %v", err)
	}
	return cfg
}

// startEngine runs an engine with test-sized timings until the test ends or the
// returned stop is called.
func (w *world) startEngine(lease time.Duration) (stop func()) {
	return w.startEngineWith(func(p *engine.Params) {
		if lease != 0 {
			p.LeaseExtra = lease
		}
	})
}

// startEngineWith is startEngine with the engine's parameters changed by set.
func (w *world) startEngineWith(set func(*engine.Params)) (stop func()) {
	logger := slog.New(slog.NewTextHandler(w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p := engine.Params{
		Pool: w.pool, Config: w.cfg, Clients: w.clients(), Logger: logger,
		Poll: 50 * time.Millisecond, LeaseExtra: 2 * time.Second, BackoffBase: 20 * time.Millisecond,
		BackoffMax: 200 * time.Millisecond, Grace: 2 * time.Second, Metrics: w.metrics,
	}
	set(&p)
	eng := engine.New(p)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	w.t.Cleanup(stop)
	return stop
}

func (w *world) newToken(name, role string) string {
	var clients []string
	if role != settings.RoleAdmin {
		clients = w.cfg.Clients() // an operator of every client: scopes have tests of their own
	}
	tok, err := accounts.CreateToken(context.Background(), w.pool, name, role, clients...)
	if err != nil {
		w.t.Fatal(err)
	}
	return tok
}

// checkout is a Stripe checkout.session.completed event.
type checkout struct {
	eventID, sessionID, enquiry, email string
	currency                           string // ISO 4217, in lower case as Stripe writes it; default usd
	amount                             int
	created                            int64
	typ                                string
}

func (c checkout) body() []byte {
	if c.typ == "" {
		c.typ = "checkout.session.completed"
	}
	if c.created == 0 {
		c.created = 1700000000
	}
	if c.sessionID == "" {
		c.sessionID = "cs_" + c.enquiry
	}
	if c.email == "" {
		c.email = "ada@example.com"
	}
	if c.currency == "" {
		c.currency = "usd"
	}
	return []byte(fmt.Sprintf(`{"id":%q,"type":%q,"created":%d,"data":{"object":{"id":%q,"amount_total":%d,"currency":%q,`+
		`"customer_details":{"email":%q},"metadata":{"enquiry_id":%q}}}}`,
		c.eventID, c.typ, c.created, c.sessionID, c.amount, c.currency, c.email, c.enquiry))
}

// deliver posts an event as Stripe would and fails the test unless it is acknowledged.
func (w *world) deliver(c checkout) map[string]any {
	w.t.Helper()
	body := c.body()
	hdr, err := sender.Headers("stripe", stripeSecret, sender.Delivery{Body: body})
	if err != nil {
		w.t.Fatal(err)
	}
	status, out := w.request("POST", "/hooks/stripe-live", hdr, body)
	if status != http.StatusOK {
		w.t.Fatalf("deliver %s: status %d %v", c.eventID, status, out)
	}
	return out
}

func (w *world) request(method, path string, hdr http.Header, body []byte) (int, map[string]any) {
	w.t.Helper()
	req, err := http.NewRequest(method, w.url+path, bytes.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}

// api calls the JSON API with a token.
func (w *world) api(token, method, path string, body any) (int, map[string]any) {
	w.t.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	hdr := http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}}
	return w.request(method, "/api/v1"+path, hdr, b)
}

// action is an action as the JSON API shows it.
type action struct {
	ID, Name, State, Reason, OperationKey, ExternalRef, Owner, BusinessKey string
	Attempts                                                               int
}

func (w *world) actions(name string) []action {
	w.t.Helper()
	status, out := w.api(w.token, "GET", "/actions?limit=500&name="+name, nil)
	if status != 200 {
		w.t.Fatalf("list actions: %d %v", status, out)
	}
	var list []action
	for _, raw := range out["actions"].([]any) {
		m := raw.(map[string]any)
		list = append(list, action{ID: m["id"].(string), Name: m["name"].(string), State: m["state"].(string),
			Reason: m["reason"].(string), OperationKey: m["operation_key"].(string),
			ExternalRef: m["external_ref"].(string), Owner: m["owner"].(string),
			BusinessKey: m["business_key"].(string), Attempts: int(m["attempts"].(float64))})
	}
	return list
}

// waitFor polls the one action named name (optionally with a business key) until
// its state is want, and returns it.
func (w *world) waitFor(name, key, want string) action {
	w.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last []action
	for time.Now().Before(deadline) {
		last = w.actions(name)
		for _, a := range last {
			if (key == "" || a.BusinessKey == key) && a.State == want {
				return a
			}
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	w.t.Fatalf("action %s %s never became %s; last seen %+v\nlogs:\n%s", name, key, want, last, tail(w.logs.String(), 4000))
	return action{}
}

// waitEvent polls until the event has left "received" and returns its status.
func (w *world) waitEvent(id string) map[string]any {
	w.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		status, ev := w.api(w.token, "GET", "/events/"+id, nil)
		if status == 200 && ev["status"] != "received" {
			return ev
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	w.t.Fatalf("event %s was never routed", id)
	return nil
}

func (w *world) detail(id string) map[string]any {
	w.t.Helper()
	status, d := w.api(w.token, "GET", "/actions/"+id, nil)
	if status != 200 {
		w.t.Fatalf("get action %s: %d %v", id, status, d)
	}
	return d
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var _ = strings.Contains

// route runs the router once, without performing anything.
func (w *world) route() {
	w.t.Helper()
	eng := engine.New(engine.Params{Pool: w.pool, Config: w.cfg,
		Logger: slog.New(slog.NewTextHandler(w.logs, nil))})
	if _, err := eng.RouteBatch(context.Background(), 100); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) exec(sql string, args ...any) {
	w.t.Helper()
	if _, err := w.pool.Exec(context.Background(), sql, args...); err != nil {
		w.t.Fatalf("%s: %v", sql, err)
	}
}

func (w *world) count(sql string, args ...any) int {
	w.t.Helper()
	var n int
	if err := w.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		w.t.Fatalf("%s: %v", sql, err)
	}
	return n
}
