package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestEveryRouteNeedsCredentials sends every route of Echo's table but the public
// ones a request from a signed-out visitor holding a valid CSRF token (from the
// sign-in form), so the CSRF check lets it through and the route's own check must
// refuse it: pages redirect to /login, the API and /metrics answer 401. False
// credentials are refused too, and nothing changes in the database.
func TestEveryRouteNeedsCredentials(t *testing.T) {
	t.Parallel()
	s := newAccessSite(t)
	before := s.snapshot()
	anon := s.person()
	csrf := anon.token("/login")
	forged := s.person()
	u, _ := url.Parse(s.url)
	forged.jar.SetCookies(u, []*http.Cookie{{Name: "oncehook_session", Value: "forged-session-id", Path: "/"}})
	probes := s.probes()
	for _, pr := range probes {
		if pr.token {
			for _, auth := range []string{"", "Bearer ohk_forged", "Bearer " + accessMetricsToken + "x"} {
				if st := s.withToken(pr, auth); st != http.StatusUnauthorized {
					t.Errorf("%s with Authorization %q: %d, want 401", pr, auth, st)
				}
			}
			continue
		}
		r := s.asPerson(anon, pr, csrf)
		if !signInAsked(pr, r) {
			t.Errorf("%s signed out, with a valid CSRF token: %d to %q, want 303 to /login", pr, r.status, r.location)
		}
		if pr.method == http.MethodGet {
			if r := s.asPerson(forged, pr, ""); !signInAsked(pr, r) {
				t.Errorf("%s with a forged session: %d to %q, want 303 to /login", pr, r.status, r.location)
			}
		}
	}
	if after := s.snapshot(); after != before {
		t.Errorf("refused requests changed the database:\nbefore %s\nafter  %s", before, after)
	}
	t.Logf("%d probes over %d routes", len(probes), len(s.routes))
}

// signInAsked reports whether r is requireUser sending a person to sign in: a GET
// is sent to /login remembering the page, a POST to /login alone (the keeping of
// an expired form adds ?next=, the CSRF check answers 403).
func signInAsked(pr probe, r reply) bool {
	if r.status != http.StatusSeeOther {
		return false
	}
	if pr.method == http.MethodGet {
		return r.location == "/login" || strings.HasPrefix(r.location, "/login?next=")
	}
	return r.location == "/login"
}

// TestOperatorsCannotAdminister sends every admin-only route and act (from Echo's
// table, acts from the ledger's) as a signed-in operator with a valid CSRF token
// and with an operator's API token: each answers 403 and nothing changes. The
// controls: the operator reaches every other page and API read, and an admin,
// sending the same requests, is refused none of them.
func TestOperatorsCannotAdminister(t *testing.T) {
	t.Parallel()
	s := newAccessSite(t)
	before := s.snapshot()
	op := s.person()
	op.login(opsEmail)
	csrf := op.token("/")
	probes := s.probes()
	admin := 0
	for _, pr := range probes {
		switch {
		case pr.route == "GET /metrics":
		case pr.admin && pr.token:
			admin++
			if st := s.withToken(pr, "Bearer "+s.tokens["operator"]); st != http.StatusForbidden {
				t.Errorf("%s with an operator's token: %d, want 403", pr, st)
			}
		case pr.admin:
			admin++
			r := s.asPerson(op, pr, csrf)
			if r.status != http.StatusForbidden {
				t.Errorf("%s as an operator: %d to %q, want 403\n%s", pr, r.status, r.location, tailOf(r.body, 300))
			} else if adminRoutes[pr.route] && !strings.Contains(r.body, adminOnlyRefusal) {
				// The handler's domain may refuse too; the route's own check must come first.
				t.Errorf("%s as an operator: refused, but not by the route's admin check\n%s", pr, tailOf(r.body, 300))
			}
		case pr.method == http.MethodGet:
			s.checkAllowed(op, "operator", pr, csrf)
		}
	}
	if after := s.snapshot(); after != before {
		t.Errorf("operators changed what only admins may:\nbefore %s\nafter  %s", before, after)
	}
	boss := s.person()
	boss.login(adminEmail)
	csrf = boss.token("/")
	for _, pr := range probes {
		if pr.admin {
			s.checkAllowed(boss, "admin", pr, csrf)
		}
	}
	t.Logf("%d admin-only probes of %d", admin, len(probes))
}

// adminOnlyRefusal is what requireAdmin answers, so the test can tell the route's
// own check from a later refusal by the domain.
const adminOnlyRefusal = "Only admins can do that."

// checkAllowed fails the test when p, whose role is role, is refused pr or sent
// to sign in: the request reached the handler.
func (s *accessSite) checkAllowed(p *person, role string, pr probe, csrf string) {
	s.t.Helper()
	if pr.token {
		if st := s.withToken(pr, "Bearer "+s.tokens[role]); st == http.StatusUnauthorized || st == http.StatusForbidden {
			s.t.Errorf("%s with an %s's token: %d, want it allowed", pr, role, st)
		}
		return
	}
	r := s.asPerson(p, pr, csrf)
	if r.status == http.StatusForbidden || r.status == http.StatusUnauthorized || strings.HasPrefix(r.location, "/login") {
		s.t.Errorf("%s as an %s: %d to %q, want it allowed\n%s", pr, role, r.status, r.location, tailOf(r.body, 300))
	}
}
