package faults

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/settings"
)

// browser is a person at the dashboard: a cookie jar that does not follow
// redirects, so each answer can be checked as it is.
type browser struct {
	t    testing.TB
	base string
	c    *http.Client
}

func newBrowser(t testing.TB, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, Timeout: client.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, path string, form url.Values) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, maxPage+1)) // closing the rest unread drops the connection
	return res, string(raw)
}

// maxPage is the most a test reads of one page; a larger one is a bug of its own.
const maxPage = 4 << 20

var csrfRe = regexp.MustCompile(`name="csrf_token" value="([^"]*)"`)

// csrf reads the form token from a page.
func (b *browser) csrf(path string) string {
	b.t.Helper()
	_, page := b.do(http.MethodGet, path, nil)
	m := csrfRe.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("no csrf_token on %s:\n%s", path, tail(page, 2000))
	}
	return html.UnescapeString(m[1])
}

// login signs in and returns the answer to the form.
func (b *browser) login(email, password string) *http.Response {
	b.t.Helper()
	token := b.csrf("/login")
	res, _ := b.do(http.MethodPost, "/login", url.Values{"email": {email}, "password": {password}, "csrf_token": {token}})
	return res
}

// session is the value of the session cookie the browser holds.
func (b *browser) session() string {
	u, _ := url.Parse(b.base)
	for _, c := range b.c.Jar.Cookies(u) {
		if strings.HasSuffix(c.Name, "oncehook_session") {
			return c.Value
		}
	}
	return ""
}

// person creates a dashboard user.
func person(t testing.TB, pool *pgxpool.Pool, email, role, password string) {
	t.Helper()
	if _, err := accounts.CreateUser(context.Background(), pool, email, role, password, acmeUnlessAdmin(role)...); err != nil {
		t.Fatal(err)
	}
}

func apiToken(t testing.TB, pool *pgxpool.Pool, name, role string) string {
	t.Helper()
	tok, err := accounts.CreateToken(context.Background(), pool, name, role, acmeUnlessAdmin(role)...)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// acmeUnlessAdmin is the clients of a person or token of role: the tests' one
// client, acme, for an operator or a viewer; none (every one) for an admin.
func acmeUnlessAdmin(role string) []string {
	if role == settings.RoleAdmin {
		return nil
	}
	return []string{"acme"}
}

// apiGet calls the JSON API with a bearer token.
func apiGet(base, token, path string) reply {
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		return reply{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := client.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return reply{status: res.StatusCode, body: b, err: err}
}
