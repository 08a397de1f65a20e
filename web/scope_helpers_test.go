package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/destination"
	"github.com/oncehook/oncehook/internal/engine"
	"github.com/oncehook/oncehook/internal/inbox"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sender"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/web"
)

// scopeConfig has two clients, acme and globex, each with a Stripe source whose
// checkouts open an opportunity in the CRM both share and send an email through a
// mail server of its own. Every name of a client's own holds the client's name,
// so a page that shows the word shows that client's data.
const scopeConfig = `
sources:
  - {name: stripe-acme, client: acme, provider: stripe, account: acct_1, environment: live, secret_env: STRIPE_SECRET}
  - {name: stripe-globex, client: globex, provider: stripe, account: acct_2, environment: live, secret_env: STRIPE_SECRET}
destinations:
  - name: crm
    type: http
    create: {method: POST, url: "http://127.0.0.1:1/opportunities"}
    auth: {bearer_env: CRM_TOKEN}
    idempotency: {header: Idempotency-Key, ttl: 24h}
    reference_field: source_ref
    result_id: /id
    timeout: 5s
    owner: crm-admin@example.com
  - {name: mail-acme, type: smtp, addr: "127.0.0.1:1", from: hello@example.com, timeout: 5s, owner: mail-admin@example.com}
  - {name: mail-globex, type: smtp, addr: "127.0.0.1:1", from: hello@example.com, timeout: 5s, owner: mail-admin@example.com}
actions:
  - name: opportunity_acme
    source: stripe-acme
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    destination: crm
    params: {enquiry_id: /data/object/metadata/enquiry_id, amount: /data/object/amount_total, email: /data/object/customer_details/email}
    retry: {attempts: 3, within: 1h}
  - name: welcome_acme
    source: stripe-acme
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    destination: mail-acme
    params: {to: /data/object/customer_details/email, subject: {const: Welcome}, text: {const: "Thanks!"}}
    retry: {attempts: 2, within: 1h}
  - name: opportunity_globex
    source: stripe-globex
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    destination: crm
    params: {enquiry_id: /data/object/metadata/enquiry_id, amount: /data/object/amount_total, email: /data/object/customer_details/email}
    retry: {attempts: 3, within: 1h}
  - name: welcome_globex
    source: stripe-globex
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    destination: mail-globex
    params: {to: /data/object/customer_details/email, subject: {const: Welcome}, text: {const: "Thanks!"}}
    retry: {attempts: 2, within: 1h}
`

// scopeClients are the two clients of scopeConfig.
var scopeClients = []string{"acme", "globex"}

// other is the client of scopeClients that is not c.
func other(c string) string {
	if c == "acme" {
		return "globex"
	}
	return "acme"
}

// scopePersona is one person who signs in, with an API token of the same scope.
type scopePersona struct {
	email, role, client string // client "" for the admin
	token               string
	p                   *person
}

// clientData are the ids of one client's records.
type clientData struct {
	actions map[string]int64 // by the state it was put in
	events  []int64
	all     []int64 // every action id
}

// scopeSite is the dashboard without its engine over both clients' data: events,
// actions in several states, a conflicting repeat, a proposed correction, audit
// lines of acts on actions and on events.
type scopeSite struct {
	*dashboard
	routes   []*echo.Route
	data     map[string]*clientData
	personas []*scopePersona
	spare    int64 // an API token to revoke
	user     int64 // a user whose role the admin's walk changes
}

func newScopeSite(t *testing.T) *scopeSite {
	t.Helper()
	d := &dashboard{t: t, logs: &lockedWriter{w: &strings.Builder{}}, pool: dbtest.New(t)}
	env := map[string]string{"STRIPE_SECRET": dashStripeSecret, "CRM_TOKEN": dashCRMToken}
	cfg, err := config.Parse("scope.yaml", []byte(scopeConfig), func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	d.cfg = cfg
	logger := slog.New(slog.NewTextHandler(d.logs, nil))
	d.review = review.New(d.pool, cfg, destination.NewClients(cfg))
	e := web.New(web.Params{Config: cfg, Pool: d.pool, Inbox: inbox.New(d.pool, logger, nil),
		Review: d.review, Logger: logger, Metrics: metrics.New(d.pool), MetricsToken: accessMetricsToken})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	d.url = srv.URL
	s := &scopeSite{dashboard: d, routes: e.Routes(), data: map[string]*clientData{}}
	s.addPersonas()
	for _, c := range scopeClients {
		s.data[c] = s.fill(c)
	}
	return s
}

// addPersonas creates the admin, an operator and a viewer of acme and an operator
// of globex, each with a session and an API token of the same scope.
func (s *scopeSite) addPersonas() {
	s.t.Helper()
	ctx := context.Background()
	for _, x := range []struct{ email, role, client string }{
		{adminEmail, settings.RoleAdmin, ""},
		{"op-acme@example.com", settings.RoleOperator, "acme"},
		{"viewer-acme@example.com", settings.RoleViewer, "acme"},
		{"op-globex@example.com", settings.RoleOperator, "globex"},
	} {
		var clients []string
		if x.client != "" {
			clients = []string{x.client}
		}
		if _, err := accounts.CreateUser(ctx, s.pool, x.email, x.role, password, clients...); err != nil {
			s.t.Fatal(err)
		}
		tok, err := accounts.CreateToken(ctx, s.pool, "scope-"+x.email, x.role, clients...)
		if err != nil {
			s.t.Fatal(err)
		}
		p := s.person()
		p.login(x.email)
		s.personas = append(s.personas, &scopePersona{email: x.email, role: x.role, client: x.client, token: tok, p: p})
	}
	u, err := accounts.CreateUser(ctx, s.pool, "spare@example.com", settings.RoleViewer, password, "acme")
	if err != nil {
		s.t.Fatal(err)
	}
	s.user = u.ID
	if _, err := accounts.CreateToken(ctx, s.pool, "spare", settings.RoleViewer, "acme"); err != nil {
		s.t.Fatal(err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT id FROM api_tokens WHERE name = 'spare'`).Scan(&s.spare); err != nil {
		s.t.Fatal(err)
	}
}

// deliver posts a signed checkout of client c for enquiry n (amount tells a
// conflicting repeat apart) and returns the event id.
func (s *scopeSite) deliver(c string, n, amount int) int64 {
	s.t.Helper()
	body := fmt.Sprintf(`{"id":"evt_%[1]s_%[2]d","type":"checkout.session.completed","created":1700000000,`+
		`"data":{"object":{"id":"cs_%[1]s_%[2]d","amount_total":%[3]d,"customer_details":{"email":"buyer-%[1]s-%[2]d@example.com"},`+
		`"metadata":{"enquiry_id":"enq_%[1]s_%[2]d"}}}}`, c, n, amount)
	hdr, err := sender.Headers("stripe", dashStripeSecret, sender.Delivery{Body: []byte(body)})
	if err != nil {
		s.t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, s.url+"/hooks/stripe-"+c, strings.NewReader(body))
	req.Header = hdr
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	m := regexp.MustCompile(`"event_id":"(\d+)"`).FindStringSubmatch(string(raw))
	if res.StatusCode != http.StatusOK || m == nil {
		s.t.Fatalf("deliver %s %d: %d %s", c, n, res.StatusCode, raw)
	}
	var id int64
	fmt.Sscan(m[1], &id)
	return id
}

// fill gives client c four checkouts, routed, one of them repeated with another
// amount (a conflict), their opportunities put in the states people see (failed
// by a rejection, uncertain, confirmed, held) and the emails left pending; an
// assignment, a proposed correction and a replayed event leave audit lines.
func (s *scopeSite) fill(c string) *clientData {
	s.t.Helper()
	ctx := context.Background()
	d := &clientData{actions: map[string]int64{}}
	for n := range 4 {
		d.events = append(d.events, s.deliver(c, n, 1000+n))
	}
	s.deliver(c, 0, 9999) // a repeat with another body
	eng := engine.New(engine.Params{Pool: s.pool, Config: s.cfg, Logger: slog.New(slog.DiscardHandler)})
	if _, err := eng.RouteBatch(ctx, 20); err != nil {
		s.t.Fatal(err)
	}
	states := []struct{ state, reason string }{
		{ledger.StateFailed, string(ledger.ObsRejected) + ": 422 amount is invalid"},
		{ledger.StateUncertain, "timed out after the request was sent"},
		{ledger.StateConfirmed, ""},
		{ledger.StateHeld, "destination disconnected"},
	}
	for n, st := range states {
		var id int64
		if err := s.pool.QueryRow(ctx, `UPDATE actions SET state = $1, reason = $2, state_since = now()
			WHERE client = $3 AND name = $4 AND business_key = $5 RETURNING id`,
			st.state, st.reason, c, "opportunity_"+c, fmt.Sprintf("enq_%s_%d", c, n)).Scan(&id); err != nil {
			s.t.Fatalf("put %s in %s: %v", c, st.state, err)
		}
		d.actions[st.state] = id
	}
	rows, err := s.pool.Query(ctx, `SELECT id FROM actions WHERE client = $1 ORDER BY id`, c)
	if err != nil {
		s.t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			s.t.Fatal(err)
		}
		d.all = append(d.all, id)
	}
	if err := rows.Err(); err != nil {
		s.t.Fatal(err)
	}
	d.actions[ledger.StatePending] = d.all[len(d.all)-1]
	admin := ledger.Actor{Name: adminEmail, Role: settings.RoleAdmin}
	if _, err := s.review.Do(ctx, admin, review.ActAssign, d.actions[ledger.StateUncertain],
		review.ActParams{Owner: "op-" + c + "@example.com"}); err != nil {
		s.t.Fatal(err)
	}
	op := ledger.Actor{Name: "op-" + c + "@example.com", Role: settings.RoleOperator, Clients: []string{c}}
	if _, err := s.review.Correct(ctx, op, d.actions[ledger.StateFailed],
		json.RawMessage(fmt.Sprintf(`{"enquiry_id":"enq_%s_0","amount":1,"email":"fixed-%s@example.com"}`, c, c)),
		"the amount "+c+" meant"); err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.review.ReplayEvent(ctx, admin, d.events[3], "replayed for "+c); err != nil {
		s.t.Fatal(err)
	}
	return d
}

// snapshot is every row of client c that an act could change.
func (s *scopeSite) snapshot(c string) string {
	s.t.Helper()
	var out string
	err := s.pool.QueryRow(context.Background(), `SELECT
		(SELECT coalesce(string_agg(id || ':' || state || ':' || owner || ':' || reason || ':' || params::text
			|| ':' || updated_at::text, ',' ORDER BY id), '') FROM actions WHERE client = $1) || '|' ||
		(SELECT coalesce(string_agg(id || ':' || status || ':' || coalesce(routed_at::text, ''), ',' ORDER BY id), '')
			FROM events WHERE client = $1) || '|' ||
		(SELECT count(*) FROM event_queue WHERE client = $1)::text || '|' ||
		(SELECT count(*) FROM audit WHERE client = $1)::text || '|' ||
		(SELECT count(*) FROM event_audit WHERE client = $1)::text || '|' ||
		(SELECT count(*) FROM attempts WHERE client = $1)::text || '|' ||
		(SELECT coalesce(string_agg(id || ':' || state, ',' ORDER BY id), '') FROM corrections WHERE client = $1)`,
		c).Scan(&out)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// counts are client c's actions by state, as the database has them.
func (s *scopeSite) counts(c string) map[string]int64 {
	s.t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT state, count(*) FROM actions WHERE client = $1 GROUP BY state`, c)
	if err != nil {
		s.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var st string
		var n int64
		if err := rows.Scan(&st, &n); err != nil {
			s.t.Fatal(err)
		}
		out[st] = n
	}
	return out
}

// leaks names what of client c's data body shows: the client's name (every
// source, rule, destination, business key, event id and email of its holds it,
// and so does every action or event the API shows), or a link to one of its
// actions or events. (Ids alone are not searched for: actions and events count
// their ids apart, so the same number names one of each.)
func (s *scopeSite) leaks(c, body string) []string {
	var out []string
	if strings.Contains(strings.ToLower(body), c) {
		i := strings.Index(strings.ToLower(body), c)
		out = append(out, fmt.Sprintf("the word %q: …%s…", c, body[max(0, i-80):min(len(body), i+80)]))
	}
	d := s.data[c]
	for _, id := range d.all {
		for _, p := range []string{fmt.Sprintf(`/actions/%d"`, id), fmt.Sprintf(`/actions/%d/`, id)} {
			if strings.Contains(body, p) {
				out = append(out, "action "+p)
			}
		}
	}
	for _, id := range d.events {
		for _, p := range []string{fmt.Sprintf(`/events/%d"`, id)} {
			if strings.Contains(body, p) {
				out = append(out, "event "+p)
			}
		}
	}
	return out
}

// scopeParams are the route parameters the walk knows how to fill. A route with
// any other parameter fails the test: a new route is walked, or the test says
// it does not know how.
var scopeParams = map[string]bool{":id": true, ":act": true, ":queue": true, ":name": true, "*": true, ":source": true}

// target is one request of the walk: a route filled with one client's ids.
type target struct {
	route  string // "METHOD /pattern" as the table has it
	method string
	path   string
	client string // whose ids fill it; "" when it takes none of a client's
	kind   string // "action", "event" or "" for what :id names
	admin  bool
	api    bool
}

func (t target) String() string { return t.method + " " + t.path }

// targets are every non-public route of the table filled with client c's ids
// (acts expanded one per act, a bulk route once per bulk act), and the routes
// that take no client's ids once.
func (s *scopeSite) targets(c string) []target {
	s.t.Helper()
	var out []target
	for _, rt := range s.routes {
		method := rt.Method
		if strings.HasPrefix(method, "echo_route") {
			method = http.MethodGet
		}
		key := method + " " + rt.Path
		if publicRoutes[key] {
			continue
		}
		tableKey := rt.Method + " " + rt.Path
		for _, part := range strings.Split(rt.Path, "/") {
			if (strings.HasPrefix(part, ":") || part == "*") && !scopeParams[part] {
				s.t.Errorf("%s: the scope walk does not know how to fill %s; teach it (scopeParams, fillFor)", key, part)
			}
		}
		tg := target{route: tableKey, method: method, admin: adminRoutes[key], api: strings.HasPrefix(rt.Path, "/api/")}
		tg.path, tg.kind = s.fillFor(rt.Path, c)
		if tg.kind != "" {
			tg.client = c
		}
		for _, p := range withActs(probe{route: key, method: method, path: tg.path, admin: tg.admin}, rt.Path) {
			x := tg
			x.path, x.admin = p.path, p.admin
			out = append(out, x)
			if method == http.MethodGet && strings.HasSuffix(rt.Path, "/bulk") {
				// The confirmation step of ticked rows, besides that of all that match.
				x.path += "&id=" + fmt.Sprint(s.data[c].actions[ledger.StateUncertain])
				x.client = c
				out = append(out, x)
			}
		}
	}
	return out
}

// fillFor fills pattern with client c's records: an action of it in a state the
// route acts on, or one of its events; users and tokens by the spare ones.
func (s *scopeSite) fillFor(pattern, c string) (string, string) {
	d := s.data[c]
	id, kind := d.actions[ledger.StateFailed], "action"
	switch {
	case strings.HasSuffix(pattern, "/retry"), strings.HasSuffix(pattern, "/reconcile"):
		id = d.actions[ledger.StateUncertain]
	case strings.HasSuffix(pattern, "/:act"):
		id = d.actions[ledger.StatePending]
	case strings.HasPrefix(pattern, "/users/"):
		id, kind = s.user, ""
	case strings.HasPrefix(pattern, "/tokens/"):
		id, kind = s.spare, ""
	case strings.HasPrefix(pattern, "/events/:id"), strings.HasPrefix(pattern, "/api/v1/events/:id"):
		id, kind = d.events[1], "event"
	case !strings.Contains(pattern, ":id"):
		kind = ""
	}
	path := strings.NewReplacer(":id", fmt.Sprint(id), ":name", "mail-"+c, ":queue", "failed",
		":source", "stripe-"+c, "*", "anything").Replace(pattern)
	if strings.Contains(pattern, ":name") || strings.Contains(pattern, ":source") {
		kind = "name"
	}
	return path, kind
}

// form is what every page act posts: the id of one of client c's actions, and an
// owner who sees c.
func (s *scopeSite) form(csrf, c string) url.Values {
	return url.Values{"csrf_token": {csrf}, "owner": {"op-" + c + "@example.com"},
		"assign_owner": {"op-" + c + "@example.com"}, "email": {"new-" + c + "@example.com"},
		"role": {settings.RoleViewer}, "clients": {c}, "password": {"a new password 123"}, "note": {"scope walk"},
		"id": {fmt.Sprint(s.data[c].actions[ledger.StateUncertain])}, "confirmed": {"1"}, "expected": {"0"},
		"disabled": {"false"}, "name": {"scope token"}, "expires_days": {"1"},
		"params": {`{"enquiry_id":"x","amount":2}`}, "checked_destination": {"1"},
		"confirm": {"1"}, "decision": {"refuse"}}
}

// send makes the request of t as persona p, filled with client c's ids, and
// returns the status and the body.
func (s *scopeSite) send(p *scopePersona, t target, c string) (int, string) {
	s.t.Helper()
	if !t.api {
		var form url.Values
		if t.method != http.MethodGet {
			form = s.form(p.p.token("/"), c)
			if strings.Contains(t.path, "/bulk") {
				form.Del("owner") // a bulk form's owner is the queue's filter, not whom to assign
			}
		}
		r := p.p.do(t.method, t.path, form, map[string]string{"Origin": s.url, "Sec-Fetch-Site": "same-origin"})
		return r.status, r.body
	}
	var body io.Reader
	if t.method != http.MethodGet {
		body = strings.NewReader(fmt.Sprintf(`{"owner":"op-%s@example.com","note":"scope walk","expected":0,`+
			`"params":{"enquiry_id":"x","amount":2},"checked_destination":true}`, c))
	}
	req, err := http.NewRequest(t.method, s.url+t.path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s: %v", t, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw)
}
