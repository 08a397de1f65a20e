package ledger_test

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/settings"
)

func TestAPIContract(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	for i := range 5 {
		w.deliver(checkout{eventID: fmt.Sprintf("evt_api_%d", i), enquiry: fmt.Sprintf("enq_api_%d", i)})
	}
	for i := range 5 {
		w.waitFor("send_welcome_email", fmt.Sprintf("enq_api_%d", i), "confirmed")
	}

	t.Run("ActionFieldsExactly", func(t *testing.T) {
		_, out := w.api(w.token, "GET", "/actions?limit=1", nil)
		a := out["actions"].([]any)[0].(map[string]any)
		var keys []string
		for k := range a {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		want := []string{"attempts", "business_key", "client", "created_at", "environment", "external_ref", "id",
			"name", "next_attempt_at", "operation_key", "owner", "reason", "source", "state", "updated_at"}
		if diff := cmp.Diff(want, keys); diff != "" {
			t.Errorf("action fields (-want +got):\n%s", diff)
		}
	})
	t.Run("KeysetPagination", func(t *testing.T) {
		seen := map[string]bool{}
		cursor := ""
		for pages := 0; pages < 20; pages++ {
			_, out := w.api(w.token, "GET", "/actions?limit=3&cursor="+cursor, nil)
			for _, a := range out["actions"].([]any) {
				id := a.(map[string]any)["id"].(string)
				if seen[id] {
					t.Fatalf("action %s on two pages", id)
				}
				seen[id] = true
			}
			cursor = out["next_cursor"].(string)
			if cursor == "" {
				break
			}
		}
		if len(seen) != 10 {
			t.Errorf("pages held %d actions, want 10", len(seen))
		}
	})
	t.Run("Filters", func(t *testing.T) {
		_, out := w.api(w.token, "GET", "/actions?state=confirmed&name=open_opportunity&source=stripe-live&owner=sales-ops@example.com", nil)
		if n := len(out["actions"].([]any)); n != 5 {
			t.Errorf("filtered list has %d actions, want 5", n)
		}
		_, out = w.api(w.token, "GET", "/actions?q=enq_api_3", nil)
		if n := len(out["actions"].([]any)); n != 2 {
			t.Errorf("search by business key found %d, want 2", n)
		}
		_, out = w.api(w.token, "GET", "/actions?q=evt_api_2", nil)
		if n := len(out["actions"].([]any)); n != 2 {
			t.Errorf("search by source event id found %d, want 2", n)
		}
	})
	t.Run("DetailHasEventsAttemptsAudit", func(t *testing.T) {
		id := w.actions("open_opportunity")[0].ID
		d := w.detail(id)
		for _, k := range []string{"events", "attempts", "audit"} {
			if _, ok := d[k].([]any); !ok {
				t.Errorf("detail lacks %s: %v", k, d)
			}
		}
	})
	t.Run("EventsAndSummary", func(t *testing.T) {
		_, out := w.api(w.token, "GET", "/events?source=stripe-live&status=routed", nil)
		evs := out["events"].([]any)
		if len(evs) != 5 {
			t.Fatalf("events: %d, want 5", len(evs))
		}
		e := evs[0].(map[string]any)
		for _, k := range []string{"id", "source", "source_event_id", "type", "status", "deliveries", "conflict", "received_at"} {
			if _, ok := e[k]; !ok {
				t.Errorf("event lacks %s", k)
			}
		}
		_, sum := w.api(w.token, "GET", "/summary", nil)
		if sum["states"].(map[string]any)["confirmed"] != float64(10) {
			t.Errorf("summary %v, want 10 confirmed", sum)
		}
	})
	t.Run("Refusals", func(t *testing.T) {
		if status, _ := w.request("GET", "/api/v1/actions", nil, nil); status != http.StatusUnauthorized {
			t.Errorf("no token: %d, want 401", status)
		}
		if status, _ := w.api("ohk_not_a_token", "GET", "/actions", nil); status != http.StatusUnauthorized {
			t.Errorf("bad token: %d, want 401", status)
		}
		if status, _ := w.api(w.token, "GET", "/actions/999999", nil); status != http.StatusNotFound {
			t.Errorf("unknown action: %d, want 404", status)
		}
		id := w.actions("open_opportunity")[0].ID
		if status, _ := w.api(w.token, "POST", "/actions/"+id+"/assign", map[string]any{"owner": "x@example.com"}); status != http.StatusForbidden {
			t.Errorf("operator assign: %d, want 403", status)
		}
		if status, out := w.api(w.admin, "POST", "/actions/"+id+"/assign", map[string]any{"owner": "x@example.com"}); status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(out["error"]), "cannot see") {
			t.Errorf("admin assign to someone without an account: %d %v, want 400", status, out)
		}
		if _, err := accounts.CreateUser(t.Context(), w.pool, "x@example.com", settings.RoleViewer, "a long password 1", w.cfg.Clients()...); err != nil {
			t.Fatal(err)
		}
		if status, out := w.api(w.admin, "POST", "/actions/"+id+"/assign", map[string]any{"owner": "x@example.com"}); status != 200 || out["owner"] != "x@example.com" {
			t.Errorf("admin assign: %d %v", status, out)
		}
		if status, out := w.api(w.token, "POST", "/actions/"+id+"/retry", nil); status != http.StatusConflict || !strings.Contains(out["error"].(string), "confirmed") {
			t.Errorf("retry of a confirmed action: %d %v, want 409 with the reason", status, out)
		}
	})
}

func TestManualRetryRaceOneWins(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	w.mail.FailNext(550, "no such mailbox")
	w.deliver(checkout{eventID: "evt_race", enquiry: "enq_race"})
	a := w.waitFor("send_welcome_email", "enq_race", "failed")
	w.stop() // hold the worker so both requests meet the same failed action
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	bodies := make([]map[string]any, 2)
	tokens := []string{w.token, w.admin}
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i], bodies[i] = w.api(tokens[i], "POST", "/actions/"+a.ID+"/retry",
				map[string]any{"note": "checked the mail log", "checked_destination": true})
		}()
	}
	wg.Wait()
	ok, refused := 0, -1
	for i, s := range statuses {
		if s == 200 {
			ok++
		} else if s == http.StatusConflict {
			refused = i
		}
	}
	if ok != 1 || refused < 0 {
		t.Fatalf("statuses %v, want one 200 and one 409", statuses)
	}
	if msg := bodies[refused]["error"].(string); !strings.Contains(msg, "already did it") {
		t.Errorf("the second person is not told who retried: %q", msg)
	}
	retries := 0
	for _, e := range w.detail(a.ID)["audit"].([]any) {
		if e.(map[string]any)["act"] == "retry" {
			retries++
		}
	}
	if retries != 1 {
		t.Errorf("%d retries in the audit trail, want 1", retries)
	}
}
