package faults

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/destination"
	"github.com/oncehook/oncehook/internal/engine"
	"github.com/oncehook/oncehook/internal/inbox"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sender"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/web"
)

// site is the HTTP layer built in-process with web.New, the way serve builds it,
// so the test can read its route table.
type site struct {
	e    *echo.Echo
	url  string
	pool *pgxpool.Pool
	cfg  *settings.Config
	sec  secrets
}

func newSite(t *testing.T, metricsToken string) *site {
	t.Helper()
	pool := dbtest.New(t)
	sec := newSecrets("access")
	env := map[string]string{}
	for _, kv := range sec.env() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	cfg, err := config.Parse("access.yaml", []byte(fmt.Sprintf(faultConfig, 1, "http://127.0.0.1:9")),
		func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	e := web.New(web.Params{Config: cfg, Pool: pool, Inbox: inbox.New(pool, logger, nil),
		Review: review.New(pool, cfg, destination.NewClients(cfg)), Logger: logger,
		Metrics: metrics.New(pool), MetricsToken: metricsToken})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &site{e: e, url: srv.URL, pool: pool, cfg: cfg, sec: sec}
}

// action makes one pending action (an event routed, nothing performed) and returns its id.
func (s *site) action(t *testing.T) int64 {
	t.Helper()
	body := checkout("evt_access", "enq_access")
	hdr, _ := sender.Headers("stripe", s.sec.stripe, sender.Delivery{Body: body})
	if r := post(s.url+"/hooks/stripe-live", hdr, body); r.status != http.StatusOK {
		t.Fatalf("deliver: %d %v %s", r.status, r.err, r.body)
	}
	eng := engine.New(engine.Params{Pool: s.pool, Config: s.cfg, Logger: slog.New(slog.DiscardHandler)})
	if _, err := eng.RouteBatch(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := s.pool.QueryRow(context.Background(), `SELECT id FROM actions`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// snapshot is what a refused request must not have changed.
func (s *site) snapshot(t *testing.T) string {
	t.Helper()
	var out string
	err := s.pool.QueryRow(context.Background(), `SELECT
		(SELECT coalesce(string_agg(email || ':' || role || ':' || disabled::text, ',' ORDER BY id), '') FROM users) || '|' ||
		(SELECT coalesce(string_agg(id || ':' || state || ':' || owner, ',' ORDER BY id), '') FROM actions) || '|' ||
		(SELECT coalesce(string_agg(name || ':' || status, ',' ORDER BY name), '') FROM destinations) || '|' ||
		(SELECT count(*) FROM audit)::text || '|' || (SELECT count(*) FROM events)::text`).Scan(&out)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// concrete fills a route's parameters.
func concrete(path string, actionID int64) string {
	r := strings.NewReplacer(":id", fmt.Sprint(actionID), ":act", "assign", ":name", "crm",
		":queue", "outstanding", ":source", "stripe-live", "*", "anything")
	return r.Replace(path)
}

// public are the routes anyone may reach: webhooks (signed instead), health,
// sign-in (the identity provider's too: anyone may start one, and its callback
// signs in only the session that started it; without a provider configured both
// are 404), static assets and the favicon browsers ask for. /metrics joins them
// only without a metrics token.
func public(method, path string, metricsOpen bool) bool {
	switch {
	case strings.HasPrefix(path, "/hooks/"), path == "/healthz", path == "/readyz", path == "/login",
		path == "/login/oidc", path == settings.OIDCCallbackPath,
		strings.HasPrefix(path, "/static/"), path == "/favicon.ico":
		return true
	case path == "/metrics":
		return metricsOpen
	}
	return false
}

// TestEveryRouteNeedsCredentials walks Echo's route table and sends every route
// but the public ones a request without credentials, then with false ones: the
// API answers 401, pages send the person to /login or refuse (401/403), and
// nothing changes in the database.
func TestEveryRouteNeedsCredentials(t *testing.T) {
	t.Parallel()
	for _, metricsToken := range []string{"", "metrics-token-access-9b1d"} {
		t.Run(fmt.Sprintf("MetricsToken=%v", metricsToken != ""), func(t *testing.T) {
			s := newSite(t, metricsToken)
			id := s.action(t)
			before := s.snapshot(t)
			checked := 0
			for _, rt := range s.e.Routes() {
				method := rt.Method
				if strings.HasPrefix(method, "echo_route") { // a group's catch-all: any method
					method = http.MethodGet
				}
				if public(method, rt.Path, metricsToken == "") {
					continue
				}
				path := concrete(rt.Path, id)
				for _, cred := range []struct {
					name string
					set  func(*http.Request)
				}{
					{"none", func(*http.Request) {}},
					{"false bearer token", func(r *http.Request) { r.Header.Set("Authorization", "Bearer ohk_forged") }},
					{"false session", func(r *http.Request) {
						r.AddCookie(&http.Cookie{Name: "oncehook_session", Value: "forged-session-id"})
					}},
				} {
					req, _ := http.NewRequest(method, s.url+path, strings.NewReader(url.Values{
						"owner": {"mallory@example.com"}, "email": {"mallory@example.com"}, "role": {"admin"},
						"password": {"mallory's password 123"}, "note": {"mallory"}, "ids": {fmt.Sprint(id)},
						"csrf_token": {"forged"}}.Encode()))
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
					cred.set(req)
					res, err := noRedirects.Do(req)
					if err != nil {
						t.Fatalf("%s %s: %v", method, path, err)
					}
					res.Body.Close()
					loc := res.Header.Get("Location")
					api := strings.HasPrefix(path, "/api/") || path == "/metrics"
					switch {
					case api && res.StatusCode != http.StatusUnauthorized:
						t.Errorf("%s %s with %s credentials: %d, want 401", method, path, cred.name, res.StatusCode)
					case !api && res.StatusCode != http.StatusUnauthorized && res.StatusCode != http.StatusForbidden &&
						!(res.StatusCode == http.StatusSeeOther && strings.HasPrefix(loc, "/login")):
						t.Errorf("%s %s with %s credentials: %d (Location %q), want /login, 401 or 403", method, path, cred.name, res.StatusCode, loc)
					}
					checked++
				}
			}
			if after := s.snapshot(t); after != before {
				t.Errorf("refused requests changed the database:\nbefore %s\nafter  %s", before, after)
			}
			t.Logf("%d refused requests over %d routes", checked, len(s.e.Routes()))
			// The public routes stay public.
			for _, p := range []string{"/healthz", "/readyz", "/login"} {
				if r := get(s.url + p); r.status != http.StatusOK {
					t.Errorf("GET %s: %d", p, r.status)
				}
			}
			if r := get(s.url + "/metrics"); (r.status == http.StatusOK) != (metricsToken == "") {
				t.Errorf("GET /metrics without a token: %d", r.status)
			}
			if metricsToken != "" {
				if r := apiGet(s.url, metricsToken, "/metrics"); r.status != http.StatusOK {
					t.Errorf("GET /metrics with the token: %d", r.status)
				}
			}
		})
	}
}

var noRedirects = &http.Client{Timeout: client.Timeout,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// TestOperatorsCannotAdminister checks that operators, signed in or with an API
// token, cannot assign actions, reconnect destinations or manage users, while an
// admin can: the refusals come from the role, not from a broken route.
func TestOperatorsCannotAdminister(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	id := s.action(t)
	person(t, s.pool, "op@example.com", settings.RoleOperator, "operator password 1")
	person(t, s.pool, "boss@example.com", settings.RoleAdmin, "admin password 12")
	opToken := apiToken(t, s.pool, "op", settings.RoleOperator)
	adminToken := apiToken(t, s.pool, "boss", settings.RoleAdmin)
	var bossID int64
	if err := s.pool.QueryRow(context.Background(), `SELECT id FROM users WHERE email = 'boss@example.com'`).Scan(&bossID); err != nil {
		t.Fatal(err)
	}
	before := s.snapshot(t)

	apiPost := func(token, path, body string) int {
		req, _ := http.NewRequest(http.MethodPost, s.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for path, body := range map[string]string{
		fmt.Sprintf("/api/v1/actions/%d/assign", id): `{"owner":"op@example.com"}`,
		"/api/v1/destinations/crm/reconnect":         `{}`,
	} {
		if st := apiPost(opToken, path, body); st != http.StatusForbidden {
			t.Errorf("operator token POST %s: %d, want 403", path, st)
		}
	}

	op := newBrowser(t, s.url)
	if res := op.login("op@example.com", "operator password 1"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("operator login: %d", res.StatusCode)
	}
	token := op.csrf("/")
	for _, p := range []struct {
		method, path string
		form         url.Values
	}{
		{http.MethodPost, fmt.Sprintf("/actions/%d/assign", id), url.Values{"owner": {"op@example.com"}}},
		{http.MethodPost, "/destinations/crm/reconnect", nil},
		{http.MethodGet, "/users", nil},
		{http.MethodPost, "/users", url.Values{"email": {"new@example.com"}, "role": {"admin"}, "password": {"a new password 1"}}},
		{http.MethodPost, fmt.Sprintf("/users/%d/role", bossID), url.Values{"role": {"operator"}}},
		{http.MethodPost, fmt.Sprintf("/users/%d/disabled", bossID), url.Values{"disabled": {"true"}}},
	} {
		form := p.form
		if p.method == http.MethodPost {
			if form == nil {
				form = url.Values{}
			}
			form.Set("csrf_token", token)
		}
		if res, body := op.do(p.method, p.path, form); res.StatusCode != http.StatusForbidden {
			t.Errorf("operator %s %s: %d, want 403\n%s", p.method, p.path, res.StatusCode, tail(body, 300))
		}
	}
	if after := s.snapshot(t); after != before {
		t.Errorf("operators changed what only admins may:\nbefore %s\nafter  %s", before, after)
	}

	// Positive controls: an admin may.
	if st := apiPost(adminToken, fmt.Sprintf("/api/v1/actions/%d/assign", id), `{"owner":"op@example.com"}`); st != http.StatusOK {
		t.Errorf("admin token assign: %d", st)
	}
	boss := newBrowser(t, s.url)
	if res := boss.login("boss@example.com", "admin password 12"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("admin login: %d", res.StatusCode)
	}
	if res, _ := boss.do(http.MethodGet, "/users", nil); res.StatusCode != http.StatusOK {
		t.Errorf("admin GET /users: %d", res.StatusCode)
	}
}

// TestSessionRenewedAtLogin checks that signing in issues a new session id: the
// id a visitor had before (which someone may have planted or seen) is worth
// nothing afterwards.
func TestSessionRenewedAtLogin(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	person(t, s.pool, "ada@example.com", settings.RoleOperator, "ada's password 12")
	b := newBrowser(t, s.url)
	b.csrf("/login")
	before := b.session()
	if before == "" {
		t.Fatal("no session cookie before signing in (the login form needs one for its CSRF token)")
	}
	if res := b.login("ada@example.com", "ada's password 12"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", res.StatusCode)
	}
	after := b.session()
	if after == "" || after == before {
		t.Fatalf("session id before login %q, after %q: want a new one", before, after)
	}
	if res, _ := b.do(http.MethodGet, "/", nil); res.StatusCode != http.StatusOK {
		t.Errorf("GET / with the new session: %d", res.StatusCode)
	}
	planted := newBrowser(t, s.url)
	u, _ := url.Parse(s.url)
	planted.c.Jar.SetCookies(u, []*http.Cookie{{Name: "oncehook_session", Value: before, Path: "/"}})
	if res, _ := planted.do(http.MethodGet, "/", nil); res.StatusCode != http.StatusSeeOther ||
		!strings.HasPrefix(res.Header.Get("Location"), "/login") {
		t.Errorf("GET / with the session id from before the login: %d %q, want a redirect to /login",
			res.StatusCode, res.Header.Get("Location"))
	}
}

// TestLoginThrottleHoldsUnderBurst sends thirty wrong passwords for one account at
// once from one address. Every answer is a refusal, no more guesses are checked
// than the limit allows (five per account and address), and afterwards even the
// right password is refused from that address until the window has passed.
func TestLoginThrottleHoldsUnderBurst(t *testing.T) {
	t.Parallel()
	s := newSite(t, "")
	person(t, s.pool, "target@example.com", settings.RoleAdmin, "the right password")
	const burst = 30
	b := newBrowser(t, s.url)
	token := b.csrf("/login")
	statuses := make(chan int, burst)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, _ := b.do(http.MethodPost, "/login", url.Values{"email": {"target@example.com"},
				"password": {fmt.Sprintf("guess number %d", i)}, "csrf_token": {token}})
			statuses <- res.StatusCode
		}()
	}
	close(start)
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for st := range statuses {
		counts[st]++
	}
	t.Logf("burst of %d wrong passwords: %v", burst, counts)
	for st, n := range counts {
		if st != http.StatusUnauthorized && st != http.StatusTooManyRequests {
			t.Errorf("%d answers with status %d, want 401 or 429", n, st)
		}
	}
	other := newBrowser(t, s.url)
	if res := other.login("target@example.com", "the right password"); res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the right password after the burst: %d, want 429 until the window passes", res.StatusCode)
	}
	if n := counts[http.StatusUnauthorized]; n > accounts.DefaultLoginLimits.PerAccount {
		// Authenticate counts each try before the (slow on purpose) password check,
		// so a burst cannot pass the limit all at once.
		t.Errorf("%d guesses were checked in a burst, limit %d", n, accounts.DefaultLoginLimits.PerAccount)
	}
}
