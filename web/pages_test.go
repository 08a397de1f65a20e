package web_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/settings"
)

func TestPagesNeedSignIn(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	anon := d.person()
	for _, path := range []string{"/", "/queue/outstanding", "/queue/uncertain", "/queue/failed", "/mine",
		"/actions/1", "/events/1", "/sources", "/destinations", "/users"} {
		pg := anon.get(path)
		if pg.status != http.StatusSeeOther || !strings.HasPrefix(pg.location, "/login") {
			t.Errorf("GET %s signed out: %d to %q, want 303 to /login", path, pg.status, pg.location)
		}
	}
	t.Run("APIStaysJSON", func(t *testing.T) {
		pg := anon.get("/api/v1/actions")
		if pg.status != http.StatusUnauthorized || !strings.Contains(pg.body, `"code":"unauthorized"`) {
			t.Errorf("API without a token: %d %s", pg.status, pg.body)
		}
	})
	t.Run("UnknownPageIsHTML", func(t *testing.T) {
		pg := anon.get("/no/such/page")
		if pg.status != http.StatusNotFound || !strings.Contains(pg.body, "<h1>Not found</h1>") {
			t.Errorf("unknown page: %d %s", pg.status, tailOf(pg.body, 300))
		}
	})
}

func TestLoginRefusals(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	p := d.person()
	t.Run("WrongPasswordIsPlain", func(t *testing.T) {
		pg := p.post("/login", "/login", url.Values{"email": {adminEmail}, "password": {"not the password"}})
		if pg.status != http.StatusUnauthorized || !strings.Contains(pg.body, "The email or password is wrong.") {
			t.Fatalf("wrong password: %d %s", pg.status, tailOf(pg.body, 500))
		}
	})
	t.Run("UnknownEmailSaysTheSame", func(t *testing.T) {
		pg := p.post("/login", "/login", url.Values{"email": {"nobody@example.com"}, "password": {"whatever it is"}})
		if pg.status != http.StatusUnauthorized || !strings.Contains(pg.body, "The email or password is wrong.") {
			t.Fatalf("unknown email: %d", pg.status)
		}
	})
	t.Run("ThrottledPerAccountAndAddress", func(t *testing.T) {
		for range accounts.DefaultLoginLimits.PerAccount {
			p.post("/login", "/login", url.Values{"email": {opsEmail}, "password": {"guess guess guess"}})
		}
		// Even the right password is refused now: the guesser cannot tell.
		pg := p.post("/login", "/login", url.Values{"email": {opsEmail}, "password": {password}})
		if pg.status != http.StatusTooManyRequests || !strings.Contains(pg.body, "Too many failed sign-ins from here. Wait 15 minutes") {
			t.Fatalf("after %d failures: %d %s", accounts.DefaultLoginLimits.PerAccount, pg.status, tailOf(pg.body, 500))
		}
		// Another account from the same address still signs in.
		d.person().login(adminEmail)
	})
}

func TestSessionLifecycle(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	p := d.person()
	p.get("/login")
	before := p.sessionCookie()
	if before == "" {
		t.Fatal("no session cookie from the login form")
	}
	p.login(adminEmail)
	after := p.sessionCookie()
	if after == "" || after == before {
		t.Fatalf("session id at login: before %q, after %q; want a new one", before, after)
	}
	if pg := p.get("/"); pg.status != http.StatusOK {
		t.Fatalf("signed in: GET / = %d", pg.status)
	}
	if pg := p.post("/", "/logout", nil); pg.status != http.StatusSeeOther || pg.location != "/login" {
		t.Fatalf("logout: %d %q", pg.status, pg.location)
	}
	// The old id, replayed as a stolen cookie would be, is dead.
	thief := d.person()
	u, _ := url.Parse(d.url)
	thief.jar.SetCookies(u, []*http.Cookie{{Name: "oncehook_session", Value: after}})
	if pg := thief.get("/"); pg.status != http.StatusSeeOther || !strings.HasPrefix(pg.location, "/login") {
		t.Errorf("old session after logout: %d to %q, want a redirect to /login", pg.status, pg.location)
	}
	t.Run("CookieFlags", func(t *testing.T) {
		pg := d.person().get("/login")
		c := pg.header.Get("Set-Cookie")
		for _, want := range []string{"oncehook_session=", "HttpOnly", "SameSite=Lax", "Path=/"} {
			if !strings.Contains(c, want) {
				t.Errorf("Set-Cookie %q lacks %q", c, want)
			}
		}
	})
}

func TestCSRFRefusals(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	p := d.person()
	p.login(adminEmail)
	good := p.token("/users")
	base, err := url.Parse(d.cfg.BaseURL)
	if err != nil || base.Host == "" || base.Host == strings.TrimPrefix(d.url, "http://") {
		t.Fatalf("base_url %q must name another host than the server's %s for this test", d.cfg.BaseURL, d.url)
	}
	baseOrigin := base.Scheme + "://" + base.Host
	add := func(email string) url.Values {
		return url.Values{"email": {email}, "role": {"operator"}, "clients": {"acme"}, "password": {password}, "csrf_token": {good}}
	}
	cases := []struct {
		name string
		form url.Values
		hdr  map[string]string
		want int
	}{
		{"NoToken", url.Values{"email": {"a@example.com"}, "role": {"operator"}, "password": {password}}, nil, 403},
		{"WrongToken", func() url.Values { f := add("b@example.com"); f.Set("csrf_token", "forged"); return f }(), nil, 403},
		{"ForeignOrigin", add("c@example.com"), map[string]string{"Origin": "https://evil.example"}, 403},
		{"NullOrigin", add("d@example.com"), map[string]string{"Origin": "null"}, 403},
		{"CrossSiteFetch", add("e@example.com"), map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"SameSiteFetch", add("f@example.com"), map[string]string{"Sec-Fetch-Site": "same-site"}, 403},
		{"SameOrigin", add("g@example.com"), map[string]string{"Origin": d.url, "Sec-Fetch-Site": "same-origin"}, 303},
		// A browser without Fetch Metadata: its Origin matches the Host it reached.
		{"SameHostOrigin", add("h@example.com"), map[string]string{"Origin": d.url}, 303},
		// Behind a proxy the browser reached base_url, whatever Host oncehook sees.
		{"BaseURLOrigin", add("i@example.com"), map[string]string{"Origin": baseOrigin, "Sec-Fetch-Site": "cross-site"}, 303},
		{"ForeignOriginCrossSite", add("j@example.com"), map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}, 403},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pg := p.do(http.MethodPost, "/users", c.form, c.hdr)
			if pg.status != c.want {
				t.Fatalf("status %d, want %d: %s", pg.status, c.want, tailOf(pg.body, 400))
			}
			if c.want == 403 && !strings.Contains(pg.body, "This form was not sent from an oncehook page") {
				t.Errorf("refusal is not in plain words: %s", tailOf(pg.body, 400))
			}
		})
	}
	users, err := accounts.ListUsers(t.Context(), d.pool, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(users) != 5 {
		t.Errorf("%d users after the refusals, want 5 (only the three same-origin forms added one each)", len(users))
	}
	t.Run("HooksAndAPIExempt", func(t *testing.T) {
		d.checkout("evt_exempt", "enq-exempt", "")
		tok, _ := accounts.CreateToken(t.Context(), d.pool, "t", settings.RoleAdmin)
		pg := p.do(http.MethodPost, "/api/v1/destinations/crm/reconnect", nil,
			map[string]string{"Authorization": "Bearer " + tok, "Origin": "https://evil.example"})
		if pg.status != http.StatusOK {
			t.Errorf("API POST with a token: %d %s", pg.status, pg.body)
		}
	})
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	pg := d.person().get("/login")
	for k, want := range map[string]string{
		"Content-Security-Policy": "frame-ancestors 'none'", "X-Content-Type-Options": "nosniff",
		"Referrer-Policy": "same-origin", "Cache-Control": "no-store",
	} {
		if got := strings.Join(pg.header.Values(k), ", "); !strings.Contains(got, want) {
			t.Errorf("%s = %q, want it to contain %q", k, got, want)
		}
	}
	if csp := pg.header.Get("Content-Security-Policy"); strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
		t.Errorf("CSP allows inline code: %s", csp)
	}
	if strings.Contains(pg.body, "<script>") || strings.Contains(pg.body, " style=") || strings.Contains(pg.body, " onclick=") {
		t.Errorf("the login page has inline script or style")
	}
	t.Run("StaticIsHashedAndCached", func(t *testing.T) {
		m := regexp.MustCompile(`src="(/static/js/htmx\.min\.[0-9a-f]{12}\.js)"`).FindStringSubmatch(pg.body)
		if m == nil {
			t.Fatalf("no hashed htmx URL in the page")
		}
		res := d.person().get(m[1])
		if res.status != 200 || !strings.Contains(res.header.Get("Cache-Control"), "immutable") ||
			!strings.HasPrefix(res.header.Get("Content-Type"), "text/javascript") {
			t.Errorf("GET %s: %d %v", m[1], res.status, res.header)
		}
		if res := d.person().get("/static/js/htmx.min.js"); res.status != 404 {
			t.Errorf("unhashed URL: %d, want 404", res.status)
		}
	})
}

func TestRetryRace(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.crm.Fail(sandbox.Fault{Status: 422, Message: "amount missing"})
	d.checkout("evt_race", "enq-race", "")
	a := d.waitAction("open_opportunity", "enq-race", ledger.StateFailed)
	admin, ops := d.person(), d.person()
	admin.login(adminEmail)
	ops.login(opsEmail)
	path := "/actions/" + id64(a.ID)
	forms := []url.Values{{"csrf_token": {admin.token(path)}}, {"csrf_token": {ops.token(path)}}}
	results := make([]reply, 2)
	var wg sync.WaitGroup
	for i, p := range []*person{admin, ops} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = p.do(http.MethodPost, path+"/retry", forms[i], map[string]string{"Origin": d.url})
		}()
	}
	wg.Wait()
	var ok, refused int
	for _, r := range results {
		switch r.status {
		case http.StatusSeeOther:
			ok++
		case http.StatusConflict:
			refused++
			if !regexp.MustCompile(`(admin|ops)@example\.com already did it at`).MatchString(r.body) {
				t.Errorf("the second retry does not say who did it: %s", tailOf(r.body, 800))
			}
		default:
			t.Errorf("retry: %d %s", r.status, tailOf(r.body, 400))
		}
	}
	if ok != 1 || refused != 1 {
		t.Fatalf("%d retries accepted and %d refused, want 1 and 1", ok, refused)
	}
	d.waitAction("open_opportunity", "enq-race", ledger.StateConfirmed)
	if n := d.crm.CountByRef(a.OperationKey); n != 1 {
		t.Errorf("the CRM holds %d records for the key, want 1", n)
	}
}

func TestRetryNeedsCheckedDestination(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.mail.FailNext(550, "mailbox unavailable")
	d.checkout("evt_mail", "enq-mail", "")
	a := d.waitAction("send_welcome_email", "enq-mail", ledger.StateFailed)
	ops := d.person()
	ops.login(opsEmail)
	path := "/actions/" + id64(a.ID)
	confirm := ops.get(path + "/retry")
	for _, want := range []string{a.OperationKey, "I checked the destination", `name="checked_destination"`, "no lookup"} {
		if !strings.Contains(confirm.body, want) {
			t.Errorf("confirmation step lacks %q", want)
		}
	}
	pg := ops.post(path+"/retry", path+"/retry", url.Values{"note": {"looked"}})
	if pg.status != http.StatusConflict || !strings.Contains(pg.body, "could act twice") {
		t.Fatalf("retry without the check: %d %s", pg.status, tailOf(pg.body, 600))
	}
	pg = ops.post(path+"/retry", path+"/retry", url.Values{"checked_destination": {"1"}, "note": {"not in the mail log"}})
	if pg.status != http.StatusSeeOther {
		t.Fatalf("retry with the check: %d %s", pg.status, tailOf(pg.body, 600))
	}
	d.waitAction("send_welcome_email", "enq-mail", ledger.StateConfirmed)
	detail, err := d.review.GetAction(t.Context(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := detail.Audit[len(detail.Audit)-1]
	if last.Act != "retry" || last.Note != "not in the mail log" || !strings.Contains(string(last.Detail), `"checked_destination": true`) &&
		!strings.Contains(string(last.Detail), `"checked_destination":true`) {
		t.Errorf("audit = %+v %s, want the confirmation kept", last, last.Detail)
	}
}

func TestBulkRetryReportsRefusals(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.crm.Fail(sandbox.Fault{Status: 422})
	d.mail.FailNext(550, "mailbox unavailable")
	d.checkout("evt_bulk", "enq-bulk", "")
	crm := d.waitAction("open_opportunity", "enq-bulk", ledger.StateFailed)
	mail := d.waitAction("send_welcome_email", "enq-bulk", ledger.StateFailed)
	admin := d.person()
	admin.login(adminEmail)
	// "All that match" acts on nothing yet: it leads to the confirmation step.
	pg := admin.post("/queue/failed", "/queue/failed/bulk", url.Values{"act": {"retry"}, "all": {"1"}, "q": {"enq-bulk"}})
	if pg.status != http.StatusSeeOther || pg.location != "/queue/failed/bulk?act=retry&q=enq-bulk" {
		t.Fatalf("bulk retry of all that match: %d to %q, want the confirmation step", pg.status, pg.location)
	}
	for _, id := range []int64{crm.ID, mail.ID} {
		if got, _ := d.review.GetAction(t.Context(), id); got.Action.State != ledger.StateFailed || got.Action.Attempts != 1 {
			t.Fatalf("before confirming, action %d is %s after %d attempts: something was done", id, got.Action.State, got.Action.Attempts)
		}
	}
	confirm := admin.get(pg.location)
	if !strings.Contains(confirm.body, "This will retry 1 of 2 actions") || !strings.Contains(confirm.body, "1 will be refused") {
		t.Fatalf("the confirmation step does not say how many: %s", tailOf(confirm.body, 1500))
	}
	ids := regexp.MustCompile(`name="id" value="(\d+)"`).FindAllStringSubmatch(confirm.body, -1)
	form := url.Values{"act": {"retry"}, "q": {"enq-bulk"}, "confirmed": {"1"}}
	for _, m := range ids {
		form.Add("id", m[1])
	}
	if len(ids) != 2 {
		t.Fatalf("the confirmation step lists %d actions, want 2", len(ids))
	}
	pg = admin.post(pg.location, "/queue/failed/bulk", form)
	if pg.status != http.StatusSeeOther || pg.location != "/queue/failed/bulk/done" {
		t.Fatalf("confirmed bulk retry: %d to %q, want a redirect to the report", pg.status, pg.location)
	}
	report := admin.get(pg.location)
	if !strings.Contains(report.body, "retry: 1 done, 1 refused") || !strings.Contains(report.body, "could act twice") ||
		!strings.Contains(report.body, "send_welcome_email") {
		t.Errorf("bulk report: %s", tailOf(report.body, 1500))
	}
	d.waitAction("open_opportunity", "enq-bulk", ledger.StateConfirmed)
	if got, _ := d.review.GetAction(t.Context(), mail.ID); got.Action.State != ledger.StateFailed {
		t.Errorf("the guarded mail action is %s, want failed", got.Action.State)
	}
	t.Run("AssignSelected", func(t *testing.T) {
		// Ticked rows are confirmed first, like all that match.
		pg := admin.post("/queue/failed", "/queue/failed/bulk", url.Values{"act": {"assign"}, "id": {id64(mail.ID)},
			"assign_owner": {opsEmail}})
		if pg.status != http.StatusSeeOther || !strings.HasPrefix(pg.location, "/queue/failed/bulk?") {
			t.Fatalf("bulk assign of a ticked row: %d to %q, want the confirmation step", pg.status, pg.location)
		}
		if confirm := admin.get(pg.location); !strings.Contains(confirm.body, opsEmail) {
			t.Fatalf("the assign confirmation does not name the new owner: %s", tailOf(confirm.body, 800))
		}
		pg = admin.post(pg.location, "/queue/failed/bulk", url.Values{"act": {"assign"}, "id": {id64(mail.ID)},
			"assign_owner": {opsEmail}, "confirmed": {"1"}})
		if pg.status != http.StatusSeeOther {
			t.Fatalf("bulk assign: %d %s", pg.status, tailOf(pg.body, 500))
		}
		if report := admin.get(pg.location); !strings.Contains(report.body, "assign: 1 done, 0 refused") {
			t.Fatalf("bulk assign report: %s", tailOf(report.body, 500))
		}
		ops := d.person()
		ops.login(opsEmail)
		if mine := ops.get("/mine"); !strings.Contains(mine.body, "enq-bulk") {
			t.Errorf("/mine lacks the assigned action")
		}
		_ = crm
	})
}

func TestQueueFilterAndFragment(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.crm.Fail(sandbox.Fault{Status: 422})
	d.checkout("evt_f1", "enq-f1", "")
	d.waitAction("open_opportunity", "enq-f1", ledger.StateFailed)
	admin := d.person()
	admin.login(adminEmail)
	full := admin.get("/queue/failed?destination=crm&q=enq-f1")
	if full.status != 200 || !strings.Contains(full.body, "enq-f1") || !strings.Contains(full.body, `<option value="crm" selected`) {
		t.Fatalf("filtered queue: %d %s", full.status, tailOf(full.body, 500))
	}
	frag := admin.do(http.MethodGet, "/queue/failed?destination=mail", nil, map[string]string{"HX-Request": "true"})
	if strings.Contains(frag.body, "<html") || strings.Contains(frag.body, "enq-f1") {
		t.Errorf("fragment is a whole page or ignores the filter: %s", tailOf(frag.body, 500))
	}
	if !strings.Contains(frag.body, `hx-get="/queue/failed?destination=mail"`) {
		t.Errorf("the fragment's refresh loses the filter: %s", tailOf(frag.body, 500))
	}
}

func id64(n int64) string { return strconv.FormatInt(n, 10) }

func TestHTTPSCookie(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "base_url: https://oncehook.example.com\n"+testConfig, nil)
	res, err := http.Get(h.url + "/login")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	c := res.Header.Get("Set-Cookie")
	if !strings.HasPrefix(c, "__Host-oncehook_session=") || !strings.Contains(c, "; Secure") || strings.Contains(c, "Domain=") {
		t.Errorf("Set-Cookie behind https base_url = %q, want a Secure, host-only __Host- cookie", c)
	}
}

// TestItemLinksNameTheirClient: the queue links to an action by a URL that names
// its client, the action's page links to its events the same way and its forms
// keep it (GET forms as a field, which a browser sends in place of the action's
// query), the act sent through that URL is done, and it lands back on the URL.
func TestItemLinksNameTheirClient(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.mail.FailNext(550, "mailbox unavailable")
	d.checkout("evt_links", "enq-links", "")
	a := d.waitAction("send_welcome_email", "enq-links", ledger.StateFailed)
	admin := d.person()
	admin.login(adminEmail)
	page := "/actions/" + id64(a.ID) + "?client=" + url.QueryEscape(a.Client)
	if q := admin.get("/queue/failed"); !strings.Contains(q.body, `href="`+html.EscapeString(page)+`"`) {
		t.Fatalf("the queue does not link to %s: %s", page, tailOf(q.body, 800))
	}
	pg := admin.get(page)
	for _, want := range []string{
		`action="` + html.EscapeString("/actions/"+id64(a.ID)+"/resolve?client="+url.QueryEscape(a.Client)) + `"`,
		`<input type="hidden" name="client" value="` + html.EscapeString(a.Client) + `">`,
		`href="/events/`,
	} {
		if !strings.Contains(pg.body, want) {
			t.Errorf("the action's page lacks %s", want)
		}
	}
	if m := regexp.MustCompile(`href="/events/\d+([^"]*)"`).FindStringSubmatch(pg.body); m == nil || m[1] != html.EscapeString("?client="+url.QueryEscape(a.Client)) {
		t.Errorf("the action's page links to its event as %v, want the client named", m)
	}
	res := admin.post(page, "/actions/"+id64(a.ID)+"/resolve?client="+url.QueryEscape(a.Client),
		url.Values{"note": {"sent by hand"}, "external_ref": {"MSG-1"}})
	if res.status != http.StatusSeeOther || res.location != page {
		t.Fatalf("resolve: %d to %q, want back at %s", res.status, res.location, page)
	}
	if got, err := d.review.GetAction(t.Context(), a.ID); err != nil || got.Action.State != ledger.StateResolved {
		t.Fatalf("after resolve through the client's URL: %+v, %v", got.Action, err)
	}
	// A URL naming another client does not find it.
	if res := admin.get("/actions/" + id64(a.ID) + "?client=someone-else"); res.status != http.StatusNotFound {
		t.Errorf("the action through another client's URL: %d, want 404", res.status)
	}
}
