package ledger_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// eventIDs lists the provider's ids of every page of GET /api/v1/events?query,
// following next_cursor, pageSize at a time.
func (w *world) eventIDs(query url.Values, pageSize int) []string {
	w.t.Helper()
	var ids []string
	query.Set("limit", fmt.Sprint(pageSize))
	for {
		status, out := w.api(w.token, "GET", "/events?"+query.Encode(), nil)
		if status != http.StatusOK {
			w.t.Fatalf("list events %s: %d %v", query.Encode(), status, out)
		}
		for _, e := range out["events"].([]any) {
			ids = append(ids, e.(map[string]any)["source_event_id"].(string))
		}
		next, _ := out["next_cursor"].(string)
		if next == "" {
			return ids
		}
		query.Set("cursor", next)
	}
}

func TestEventListFilters(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{noEngine: true})
	for i := range 5 {
		w.deliverTo("stripe-simple", fmt.Sprintf("evt_l%d", i), "invoice.paid", fmt.Sprintf("enq_l%d", i))
	}
	w.deliverTo("stripe-simple", "evt_c0", "checkout.session.completed", "enq_c0")
	w.route()
	w.deliverTo("stripe-simple", "evt_late", "invoice.paid", "enq_late") // still received
	w.exec(`UPDATE events SET via = 'backfill', received_at = now() - interval '2 hours' WHERE source_event_id IN ('evt_l1', 'evt_l3')`)
	hourAgo := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)

	cases := []struct {
		name  string
		query url.Values
		want  []string
	}{
		{"AllNewestFirstInPages", url.Values{}, []string{"evt_late", "evt_c0", "evt_l4", "evt_l3", "evt_l2", "evt_l1", "evt_l0"}},
		{"Status", url.Values{"status": {"ignored"}}, []string{"evt_l4", "evt_l3", "evt_l2", "evt_l1", "evt_l0"}},
		{"StatusReceived", url.Values{"status": {"received"}}, []string{"evt_late"}},
		{"StatusRouted", url.Values{"status": {"routed"}}, []string{"evt_c0"}},
		{"Type", url.Values{"type": {"checkout.session.completed"}}, []string{"evt_c0"}},
		{"Via", url.Values{"via": {"backfill"}}, []string{"evt_l3", "evt_l1"}},
		{"ReceivedBefore", url.Values{"to": {hourAgo}}, []string{"evt_l3", "evt_l1"}},
		{"ReceivedFrom", url.Values{"from": {hourAgo}, "status": {"ignored"}}, []string{"evt_l4", "evt_l2", "evt_l0"}},
		{"SearchByEventID", url.Values{"q": {"evt_l2"}}, []string{"evt_l2"}},
		{"SearchWithOtherFilter", url.Values{"q": {"evt_l2"}, "via": {"backfill"}}, nil},
		{"Source", url.Values{"source": {"stripe-live"}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, w.eventIDs(tc.query, 2)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
	for _, bad := range []string{"status=lost", "via=carrier", "from=yesterday", "from=2026-02-01&to=2026-01-01"} {
		if status, _ := w.api(w.token, "GET", "/events?"+bad, nil); status != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", bad, status)
		}
	}
}
