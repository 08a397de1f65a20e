package web_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/internal/ledger"
)

// TestBrowserNotesAreTheTeams: an operator of acme adds a note to a failed
// action in Chromium; it is stored in the action's audit trail and nothing else
// changes; a viewer of acme sees it on the action's page and its first words on
// the queue's row, as text; the API and the CSV carry it; an operator of globex
// finds neither the action nor the note, and a viewer cannot add one.
func TestBrowserNotesAreTheTeams(t *testing.T) {
	t.Parallel()
	s := newScopeSite(t)
	id := s.data["acme"].actions[ledger.StateFailed]
	before := s.state(id)
	path := fmt.Sprintf("/actions/%d?client=acme", id)
	const note = "Called the customer <b>Ada</b>, waiting for the corrected amount before anyone retries this one"

	op := newBrowser(t, s.url)
	op.login("op-acme@example.com", password)
	op.open(path, "#note-text")
	op.do("type the note", chromedp.SendKeys(chromedp.ID("note-text"), note))
	op.submit("#add-note")
	if msg := op.text(".flash"); msg != "Note added." {
		t.Errorf("after adding the note: %q", msg)
	}
	var stored, by string
	if err := s.pool.QueryRow(t.Context(), `SELECT note, actor FROM audit WHERE client = 'acme' AND action_id = $1 AND act = 'note'`,
		id).Scan(&stored, &by); err != nil || stored != note || by != "op-acme@example.com" {
		t.Fatalf("the audit trail holds %q by %q (%v), want the note by op-acme", stored, by, err)
	}
	if after := s.state(id); after.State != before.State || after.Reason != before.Reason || after.Owner != before.Owner {
		t.Errorf("the note changed the action: %+v, was %+v", after, before)
	}

	viewer := newBrowser(t, s.url)
	viewer.login("viewer-acme@example.com", password)
	viewer.open(path, "#audit-h")
	if audit := viewer.text("section[aria-labelledby=audit-h] table"); !strings.Contains(audit, note) || !strings.Contains(audit, "op-acme@example.com") {
		t.Errorf("the viewer's audit trail does not show the note:\n%s", audit)
	}
	if viewer.has("#add-note") {
		t.Errorf("a viewer is offered to add a note")
	}
	row := fmt.Sprintf(`#queue-table tr:has(a[href^="/actions/%d?"]) .row-note`, id)
	viewer.open("/queue/failed", row)
	if got := viewer.text(row); !strings.Contains(got, "Called the customer <b>Ada</b>, waiting") || strings.Contains(got, "retries this one") ||
		!strings.Contains(got, "op-acme@example.com") {
		t.Errorf("the row's note reads %q, want its first words and who wrote it", got)
	}
	viewer.screenshot("queue-note")
	if eval[bool](viewer, `document.querySelector('.row-note b') !== null`) {
		t.Errorf("the note's markup was rendered, not shown as text")
	}

	// The API and the CSV carry it, to the client's people.
	var viewerP, globexP *scopePersona
	for _, p := range s.personas {
		switch p.email {
		case "viewer-acme@example.com":
			viewerP = p
		case "op-globex@example.com":
			globexP = p
		}
	}
	viewerToken, globexToken := viewerP.token, globexP.token
	if status, body := apiRead(t, s.url+fmt.Sprintf("/api/v1/actions/%d?client=acme", id), viewerToken); status != 200 ||
		!strings.Contains(body, `"notes":[{"by":"op-acme@example.com","text":"Called the customer \u003cb\u003eAda\u003c/b\u003e`) {
		t.Errorf("the API's action: %d %s", status, body)
	}
	if csv := viewerP.p.get("/queue/failed?format=csv"); !strings.Contains(csv.body, "latest_note") || !strings.Contains(csv.body, note) {
		t.Errorf("the CSV lacks the note: %s", csv.body)
	}
	if r := viewerP.p.post(path, fmt.Sprintf("/actions/%d/note?client=acme", id), url.Values{"note": {"viewers cannot"}}); r.status != http.StatusForbidden {
		t.Errorf("a viewer's note: %d, want 403", r.status)
	}

	// Another client's operator: no such action, no note anywhere.
	globex := newBrowser(t, s.url)
	globex.login("op-globex@example.com", password)
	if r := globexP.p.get(path); r.status != http.StatusNotFound || strings.Contains(r.body, "Called the customer") {
		t.Errorf("globex's operator opening acme's action: %d", r.status)
	}
	globex.open("/queue/failed", "main h1")
	if body := eval[string](globex, `document.querySelector('main').innerText`); strings.Contains(body, "Called the customer") {
		t.Errorf("globex's queue shows acme's note")
	}
	if status, body := apiRead(t, s.url+fmt.Sprintf("/api/v1/actions/%d", id), globexToken); status != http.StatusNotFound || strings.Contains(body, "Called") {
		t.Errorf("globex's token reading acme's action: %d %s", status, body)
	}
	if r := globexP.p.post("/queue/failed", fmt.Sprintf("/actions/%d/note", id), url.Values{"note": {"not mine"}}); r.status != http.StatusNotFound {
		t.Errorf("globex's operator noting acme's action: %d, want 404", r.status)
	}
}

// apiRead reads u with an API token, whatever the status.
func apiRead(t *testing.T, u, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}
