package web_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
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
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/web"
)

const accessMetricsToken = "metrics-token-access-4c2e"

// publicRoutes are the routes anyone may use: webhooks (signed instead), health,
// sign-in (with a password or through the identity provider) and the static files. /metrics needs its token here.
var publicRoutes = map[string]bool{
	"POST /hooks/:source": true, "GET /healthz": true, "GET /readyz": true,
	"GET /login": true, "POST /login": true, "GET /static/*": true, "GET /favicon.ico": true,
	"GET /login/oidc": true, "GET /login/oidc/callback": true, // the identity provider's sign-in
}

// adminRoutes are the routes only admins may use. The acts of POST
// /actions/:id/:act and of the bulk forms are admin-only when the ledger's act is.
var adminRoutes = map[string]bool{
	"GET /events/replay": true, "POST /events/replay": true,
	"POST /destinations/:name/reconnect": true, "GET /destinations/:name/oauth/callback": true,
	"GET /destinations/:name/breaker": true, "POST /destinations/:name/breaker": true,
	"POST /api/v1/destinations/:name/breaker": true, "POST /api/v1/erase": true,
	"GET /users": true, "POST /users": true, "POST /users/:id/role": true, "POST /users/:id/disabled": true,
	"POST /api/v1/events/replay": true, "POST /api/v1/destinations/:name/reconnect": true,
	"GET /tokens": true, "POST /tokens": true, "POST /tokens/:id/revoke": true,
}

// accessSite is the dashboard without its engine, so that only the requests under
// test change the database, with its route table, one pending action and its
// event, and an API token for each role.
type accessSite struct {
	*dashboard
	routes                  []*echo.Route
	action, event, operator int64
	spare                   int64             // a token no probe authenticates with, for revoking
	tokens                  map[string]string // by role
}

func newAccessSite(t *testing.T) *accessSite {
	t.Helper()
	d := &dashboard{t: t, logs: &lockedWriter{w: &strings.Builder{}}, pool: dbtest.New(t)}
	env := map[string]string{"STRIPE_SECRET": dashStripeSecret, "CRM_TOKEN": dashCRMToken}
	cfg, err := config.Parse("access.yaml", []byte(fmt.Sprintf(dashConfig, "http://127.0.0.1:1", "127.0.0.1:1")),
		func(k string) string { return env[k] })
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
	s := &accessSite{dashboard: d, routes: e.Routes(), tokens: map[string]string{}}
	ctx := context.Background()
	for email, role := range map[string]string{adminEmail: settings.RoleAdmin, opsEmail: settings.RoleOperator} {
		u, err := accounts.CreateUser(ctx, d.pool, email, role, password, scopeOf(cfg, role)...)
		if err != nil {
			t.Fatal(err)
		}
		if role == settings.RoleOperator {
			s.operator = u.ID
		}
		if s.tokens[role], err = accounts.CreateToken(ctx, d.pool, "access-"+role, role, scopeOf(cfg, role)...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := accounts.CreateToken(ctx, d.pool, "access-spare", settings.RoleOperator, cfg.Clients()...); err != nil {
		t.Fatal(err)
	}
	if err := d.pool.QueryRow(ctx, `SELECT id FROM api_tokens WHERE name = 'access-spare'`).Scan(&s.spare); err != nil {
		t.Fatal(err)
	}
	s.routeOne()
	return s
}

// routeOne delivers a checkout and routes it, performing nothing: one event and
// its pending actions.
func (s *accessSite) routeOne() {
	s.t.Helper()
	if _, err := fmt.Sscan(s.checkout("evt_access", "enq_access", "x"), &s.event); err != nil {
		s.t.Fatal(err)
	}
	eng := engine.New(engine.Params{Pool: s.pool, Config: s.cfg, Logger: slog.New(slog.DiscardHandler)})
	if _, err := eng.RouteBatch(context.Background(), 10); err != nil {
		s.t.Fatal(err)
	}
	if err := s.pool.QueryRow(context.Background(), `SELECT min(id) FROM actions`).Scan(&s.action); err != nil {
		s.t.Fatal(err)
	}
}

// snapshot is what a refused request must not have changed.
func (s *accessSite) snapshot() string {
	s.t.Helper()
	var out string
	err := s.pool.QueryRow(context.Background(), `SELECT
		(SELECT coalesce(string_agg(email || ':' || role || ':' || disabled::text, ',' ORDER BY id), '') FROM users) || '|' ||
		(SELECT coalesce(string_agg(id || ':' || state || ':' || owner, ',' ORDER BY id), '') FROM actions) || '|' ||
		(SELECT coalesce(string_agg(name || ':' || status, ',' ORDER BY name), '') FROM destinations) || '|' ||
		(SELECT count(*) FROM audit)::text || '|' || (SELECT count(*) FROM event_audit)::text || '|' ||
		(SELECT count(*) FROM events)::text || '|' || (SELECT count(*) FROM event_queue)::text || '|' ||
		(SELECT count(*) FROM attempts)::text || '|' || (SELECT count(*) FROM oauth_tokens)::text || '|' ||
		(SELECT count(*) FROM api_tokens)::text || '|' || (SELECT count(revoked_at) FROM api_tokens)::text || '|' ||
		(SELECT count(*) FROM token_audit)::text`).Scan(&out)
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

// probe is one request to one route of the table: a route with an act is probed
// once for each act.
type probe struct {
	route  string // "METHOD /pattern" as the table has it
	method string
	path   string // the pattern filled in, with ?act= for a bulk form
	admin  bool   // only admins may
	token  bool   // authenticated by a bearer token (the API, /metrics), not a session
}

func (p probe) String() string { return p.method + " " + p.path }

// probes are every route of Echo's table but the public ones, so a new route is
// probed without anyone listing it here.
func (s *accessSite) probes() []probe {
	s.t.Helper()
	var out []probe
	for _, rt := range s.routes {
		method := rt.Method
		if strings.HasPrefix(method, "echo_route") { // a group's catch-all: any method
			method = http.MethodGet
		}
		key := method + " " + rt.Path
		if publicRoutes[key] {
			continue
		}
		p := probe{route: key, method: method, path: s.fill(rt.Path), admin: adminRoutes[key],
			token: strings.HasPrefix(rt.Path, "/api/") || rt.Path == "/metrics"}
		out = append(out, withActs(p, rt.Path)...)
	}
	for key := range publicRoutes {
		s.requireRoute(key)
	}
	for key := range adminRoutes {
		s.requireRoute(key)
	}
	return out
}

// requireRoute fails the test for a listed route the table no longer has.
func (s *accessSite) requireRoute(key string) {
	s.t.Helper()
	if !slices.ContainsFunc(s.routes, func(rt *echo.Route) bool { return rt.Method+" "+rt.Path == key }) {
		s.t.Errorf("%s is listed in this test but not in the route table", key)
	}
}

// withActs expands a route that takes an act into one probe per act; an
// admin-only act makes its probe admin-only.
func withActs(p probe, pattern string) []probe {
	names := actNames()
	var out []probe
	switch {
	case strings.HasSuffix(pattern, "/:act"):
		for _, name := range names {
			x, _ := review.LookupAct(name)
			q := p
			q.path, q.admin = strings.TrimSuffix(p.path, "/:act")+"/"+name, p.admin || x.AdminOnly
			out = append(out, q)
		}
	case strings.HasSuffix(pattern, "/bulk"):
		for _, name := range names {
			if x, _ := review.LookupAct(name); x.Bulk {
				q := p
				q.path, q.admin = p.path+"?act="+name, p.admin || x.AdminOnly
				out = append(out, q)
			}
		}
	default:
		out = []probe{p}
	}
	return out
}

// actNames are the names of every manual act the ledger knows, sorted.
func actNames() []string {
	var names []string
	for name := range review.Allowed(ledger.Actor{Role: settings.RoleAdmin}, ledger.Action{}) {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// fill puts this site's ids and names in a route's parameters.
func (s *accessSite) fill(pattern string) string {
	id := s.action
	switch {
	case strings.HasPrefix(pattern, "/users/"):
		id = s.operator
	case strings.HasPrefix(pattern, "/events/"), strings.HasPrefix(pattern, "/api/v1/events/"):
		id = s.event
	case strings.HasPrefix(pattern, "/tokens/"):
		id = s.spare
	}
	return strings.NewReplacer(":id", fmt.Sprint(id), ":name", "crm", ":queue", "outstanding",
		":source", "stripe-live", "*", "anything").Replace(pattern)
}

// form is what every page probe posts: enough for each act to go through when
// the person may do it, and a valid CSRF token, so that a refusal comes from the
// route's own check.
func (s *accessSite) form(csrf string) url.Values {
	return url.Values{"csrf_token": {csrf}, "owner": {opsEmail}, "assign_owner": {opsEmail},
		"email": {"new@example.com"}, "role": {settings.RoleOperator}, "clients": s.cfg.Clients(), "password": {"a new password 123"},
		"note": {"access test"}, "id": {fmt.Sprint(s.action)}, "expected": {"0"}, "disabled": {"false"},
		"name": {"access test token"}, "expires_days": {"1"}}
}

// asPerson sends a page probe as p would from one of this site's pages, with csrf
// as its token. No Referer: a signed-out POST must reach the route's own check,
// not the keeping of an expired form.
func (s *accessSite) asPerson(p *person, pr probe, csrf string) reply {
	s.t.Helper()
	var form url.Values
	if pr.method != http.MethodGet {
		form = s.form(csrf)
	}
	return p.do(pr.method, pr.path, form, map[string]string{"Origin": s.url, "Sec-Fetch-Site": "same-origin"})
}

// withToken sends a token probe with the Authorization header auth ("" for none).
func (s *accessSite) withToken(pr probe, auth string) int {
	s.t.Helper()
	var body io.Reader
	if pr.method != http.MethodGet {
		body = strings.NewReader(`{"owner":"` + opsEmail + `","note":"access test","expected":0}`)
	}
	req, err := http.NewRequest(pr.method, s.url+pr.path, body)
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s: %v", pr, err)
	}
	res.Body.Close()
	return res.StatusCode
}
