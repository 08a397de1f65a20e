package web_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestScopesWalkEveryRoute walks every route of Echo's table, pages and API, GET
// and acts (with a valid CSRF token or bearer token), as a viewer of acme, an
// operator of acme, an operator of globex and the admin, over both clients' data.
// A scoped person is sent each route filled with the other client's ids and with
// their own: no body shows the other client's name (which every source, rule,
// destination, business key, event id and email of it holds) or links to its
// actions or events; the other client's action or event is 404, never 403; a
// viewer's every act is refused; the counts (API summary, navigation) are the
// person's clients' own; and after the walk the other client's rows (and, for a
// viewer, their own) are as they were. A route with a parameter the walk does not
// know fails it.
func TestScopesWalkEveryRoute(t *testing.T) {
	t.Parallel()
	s := newScopeSite(t)
	walked := map[string]bool{}
	for _, p := range s.personas {
		if p.client == "" {
			continue
		}
		s.checkCounts(p)
		before := map[string]string{p.client: s.snapshot(p.client), other(p.client): s.snapshot(other(p.client))}
		s.walkScoped(p, walked)
		if got := s.snapshot(other(p.client)); got != before[other(p.client)] {
			t.Errorf("%s changed %s's rows:\nbefore %s\nafter  %s", p.email, other(p.client), before[other(p.client)], got)
		}
		if p.role == settings.RoleViewer {
			if got := s.snapshot(p.client); got != before[p.client] {
				t.Errorf("viewer %s changed %s's rows:\nbefore %s\nafter  %s", p.email, p.client, before[p.client], got)
			}
		}
		s.logout(p)
	}
	s.walkAdmin(s.personas[0], walked)
	for _, rt := range s.routes {
		key := rt.Method + " " + rt.Path
		if !publicRoutes[key] && !walked[key] {
			t.Errorf("%s was not walked", key)
		}
	}
	keys := slices.Sorted(maps.Keys(walked))
	t.Logf("walked %d routes:\n%s", len(keys), strings.Join(keys, "\n"))
}

// walkScoped sends every route as p, first filled with the other client's ids,
// then with p's own.
func (s *scopeSite) walkScoped(p *scopePersona, walked map[string]bool) {
	s.t.Helper()
	theirs := other(p.client)
	for _, c := range []string{theirs, p.client} {
		for _, tg := range s.targets(c) {
			if tg.route == "POST /logout" || tg.client == "" && c == theirs && tg.method == http.MethodGet {
				continue // logout ends the walk; a page without ids is walked once (a form carries ids)
			}
			walked[tg.route] = true
			status, body := s.send(p, tg, c)
			if tg.route == "GET /metrics" && status != http.StatusUnauthorized {
				// Prometheus's, with a token of its own no person holds.
				s.t.Errorf("%s as %s: %d, want 401", tg, p.email, status)
			}
			if status >= 500 {
				s.t.Errorf("%s as %s: %d\n%s", tg, p.email, status, tailOf(body, 400))
			}
			for _, l := range s.leaks(theirs, body) {
				s.t.Errorf("%s as %s (%d) shows %s's data: %s", tg, p.email, status, theirs, l)
			}
			mayAct := p.role != settings.RoleViewer && !tg.admin
			switch {
			case c == theirs && (tg.kind == "action" || tg.kind == "event") && !tg.admin && status != http.StatusNotFound:
				s.t.Errorf("%s as %s, %s's %s: %d, want 404", tg, p.email, theirs, tg.kind, status)
			case tg.method != http.MethodGet && !mayAct && status != http.StatusForbidden && status != http.StatusNotFound:
				s.t.Errorf("%s as %s (%s): %d, want it refused", tg, p.email, p.role, status)
			}
		}
	}
}

// walkAdmin sends every route as the admin, filled with each client's ids: none
// fails, no record is hidden from them, and no route refuses them as a non-admin.
func (s *scopeSite) walkAdmin(p *scopePersona, walked map[string]bool) {
	s.t.Helper()
	if p.role != settings.RoleAdmin {
		s.t.Fatalf("the first persona is %s, not the admin", p.email)
	}
	s.checkCounts(p)
	for _, c := range scopeClients {
		for _, tg := range s.targets(c) {
			if tg.route == "POST /logout" {
				continue
			}
			walked[tg.route] = true
			status, body := s.send(p, tg, c)
			if tg.route == "GET /metrics" && status == http.StatusUnauthorized {
				continue // Prometheus's, with a token of its own
			}
			// A domain rule may refuse the admin too (approving a correction they
			// proposed); hiding a record from them may not.
			hidden := status == http.StatusNotFound && (tg.kind == "action" || tg.kind == "event")
			if status >= 500 || status == http.StatusUnauthorized || hidden || strings.Contains(body, adminOnlyRefusal) {
				s.t.Errorf("%s as the admin: %d\n%s", tg, status, tailOf(body, 400))
			}
		}
	}
	s.logout(p)
	walked["POST /logout"] = true
}

// logout sends POST /logout as p: it signs them out.
func (s *scopeSite) logout(p *scopePersona) {
	s.t.Helper()
	r := p.p.post("/", "/logout", nil)
	if r.status != http.StatusSeeOther || r.location != "/login" {
		s.t.Errorf("logout %s: %d to %q", p.email, r.status, r.location)
	}
}

// navCount reads one queue's count from a page's navigation.
var navCount = regexp.MustCompile(`id="nav-(failed|uncertain|outstanding)"[^>]*>[^<]*<span class="nav-count[^"]*">\s*<span class="visually-hidden">: </span>(\d+)`)

// checkCounts compares what p's API summary and the navigation of p's overview
// count with the database's counts of p's clients (every client for the admin).
func (s *scopeSite) checkCounts(p *scopePersona) {
	s.t.Helper()
	want := map[string]int64{}
	queues := map[string]int64{}
	for _, c := range scopeClients {
		if p.client != "" && c != p.client {
			continue
		}
		for st, n := range s.counts(c) {
			want[st] += n
			if q := ledger.QueueOf(st); q != "" {
				queues[q] += n
			}
		}
	}
	status, body := s.send(p, target{method: http.MethodGet, path: "/api/v1/summary", api: true}, "")
	var sum struct {
		States map[string]int64 `json:"states"`
		Queues map[string]int64 `json:"queues"`
	}
	if err := json.Unmarshal([]byte(body), &sum); status != http.StatusOK || err != nil {
		s.t.Fatalf("summary as %s: %d %v %s", p.email, status, err, body)
	}
	for st, n := range sum.States {
		if n != want[st] {
			s.t.Errorf("summary as %s: %d %s, want %d (of %v)", p.email, n, st, want[st], want)
		}
	}
	page := p.p.get("/")
	found := navCount.FindAllStringSubmatch(page.body, -1)
	if len(found) != 3 {
		s.t.Fatalf("overview as %s: %d queue counts in the navigation, want 3", p.email, len(found))
	}
	for _, m := range found {
		if n, _ := strconv.ParseInt(m[2], 10, 64); n != queues[m[1]] {
			s.t.Errorf("navigation as %s: %d %s, want %d", p.email, n, m[1], queues[m[1]])
		}
	}
	if p.client != "" && !strings.Contains(page.body, p.client) {
		s.t.Errorf("overview as %s shows nothing of %s", p.email, p.client)
	}
}
