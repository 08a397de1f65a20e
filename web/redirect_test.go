package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestLoginNextStaysOnSite sends hostile ?next= targets as a browser would send
// them, percent-encoded: to the sign-in form of a signed-in person (which
// redirects at once) and with the sign-in itself. Each lands on "/"; paths on
// this site are kept.
func TestLoginNextStaysOnSite(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	p := d.person()
	p.login(opsEmail)
	for raw, want := range map[string]string{
		"/%09/other.host/x":                  "/",
		"/%0D/other.host/x":                  "/",
		"/%0A/other.host/x":                  "/",
		"/%0D%0ASet-Cookie:x=1":              "/",
		"%2F%2Fother.host/x":                 "/",
		"/%5Cother.host/x":                   "/",
		"/%252F%252Fother.host":              "/",
		"///other.host/x":                    "/",
		"%09//other.host/x":                  "/",
		"https:%2F%2Fother.host":             "/",
		"javascript:alert(1)":                "/",
		"/actions/12":                        "/actions/12",
		"%2Fqueue%2Ffailed%3Fstate%3Dfailed": "/queue/failed?state=failed",
	} {
		status, loc := p.rawRedirect(http.MethodGet, "/login?next="+raw, nil)
		if status != http.StatusSeeOther || loc != want {
			t.Errorf("GET /login?next=%s signed in: %d to %q, want %q", raw, status, loc, want)
		}
	}
	for next, want := range map[string]string{
		"/\t/other.host/x":           "/",
		"/\\other.host/x":            "/",
		"/queue/failed?state=failed": "/queue/failed?state=failed",
	} {
		form := url.Values{"email": {opsEmail}, "password": {password}, "next": {next}, "csrf_token": {p.token("/")}}
		status, loc := p.rawRedirect(http.MethodPost, "/login", form)
		if status != http.StatusSeeOther || loc != want {
			t.Errorf("POST /login next=%q: %d to %q, want %q", next, status, loc, want)
		}
	}
}

// rawRedirect sends a request with the person's cookies straight to the
// transport, so a Location the client would refuse to parse is still seen as it
// was sent. A form is sent from this site, as a browser would.
func (p *person) rawRedirect(method, path string, form url.Values) (int, string) {
	p.d.t.Helper()
	req, err := http.NewRequest(method, p.d.url+path, strings.NewReader(form.Encode()))
	if err != nil {
		p.d.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", p.d.url)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for _, c := range p.jar.Cookies(req.URL) {
		req.AddCookie(c)
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		p.d.t.Fatalf("%s %s: %v", method, path, err)
	}
	res.Body.Close()
	p.jar.SetCookies(req.URL, res.Cookies()) // sign-in renews the session
	return res.StatusCode, res.Header.Get("Location")
}

// TestExpiredFormNextStaysOnSite: a form kept after its session expired sends the
// person back to the page it came from (its Referer) after signing in; a Referer
// path that one more decode would turn into another site sends them to "/".
func TestExpiredFormNextStaysOnSite(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	for _, page := range []string{"/%2F%2Fother.host/x", "/%5Cother.host/x", "/%09/other.host/x"} {
		p := d.person()
		req, _ := http.NewRequest(http.MethodPost, d.url+"/actions/1/resolve",
			strings.NewReader(url.Values{"note": {"typed"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", d.url)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("Referer", d.url+page)
		res, err := p.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || loc != "/login?next=%2F" {
			t.Errorf("expired form from %s: %d to %q, want /login?next=%%2F", page, res.StatusCode, loc)
		}
	}
}
