package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestExpiredFormKept: without a script, the page offers the kept form itself; a
// form from another site is refused as before, and nothing of it is kept.
func TestExpiredFormKept(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	p := d.person()
	form := url.Values{"note": {"typed before the session ended"}, "csrf_token": {"stale"},
		"checked_destination": {"1"}, "confirm": {"1"}}.Encode()
	send := func(hdr map[string]string) reply {
		req, _ := http.NewRequest(http.MethodPost, d.url+"/actions/1/resolve", strings.NewReader(form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := p.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		return reply{status: res.StatusCode, location: res.Header.Get("Location")}
	}
	if r := send(map[string]string{"Origin": "http://evil.example", "Referer": "http://evil.example/x"}); r.status != http.StatusForbidden {
		t.Errorf("a cross-site form with no session: %d to %q, want 403", r.status, r.location)
	}
	r := send(map[string]string{"Origin": d.url, "Sec-Fetch-Site": "same-origin", "Referer": d.url + "/actions/1"})
	if r.status != http.StatusSeeOther || r.location != "/login?next=%2Factions%2F1" {
		t.Fatalf("an expired form: %d to %q, want the sign-in form", r.status, r.location)
	}
	p.login(adminEmail)
	pg := p.get("/actions/1")
	if !strings.Contains(pg.body, `id="kept-form"`) || !strings.Contains(pg.body, "typed before the session ended") ||
		!strings.Contains(pg.body, `action="/actions/1/resolve"`) {
		t.Errorf("the page does not offer the kept form: %s", tailOf(pg.body, 1500))
	}
	if strings.Contains(pg.body, "stale") {
		t.Errorf("the old CSRF token was kept")
	}
	// Confirmations given before the session expired are asked again, not re-sent.
	for _, name := range []string{"checked_destination", "confirm"} {
		if strings.Contains(pg.body, `name="`+name+`" value="1"`) || strings.Contains(pg.body, `name="`+name+`" type="hidden"`) {
			t.Errorf("the kept form re-sends the confirmation %s", name)
		}
	}
}
