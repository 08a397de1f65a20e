package ledger_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/web"
)

// scrape reads /metrics and returns each sample line's value by its full name.
func (w *world) scrape() map[string]float64 {
	w.t.Helper()
	res, err := http.Get(w.url + "/metrics")
	if err != nil {
		w.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		w.t.Fatalf("/metrics: %d %s", res.StatusCode, body)
	}
	out := map[string]float64{}
	line := regexp.MustCompile(`^(oncehook_\S+) (\S+)$`)
	for _, l := range strings.Split(string(body), "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			out[m[1]] = v
		}
	}
	return out
}

func TestMetricsAfterKnownSequence(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{lookup: "strong"})
	// One at a time, so each fault meets the call it is meant for.
	w.deliver(checkout{eventID: "evt_m1", enquiry: "enq_m1"})
	w.deliver(checkout{eventID: "evt_m1", enquiry: "enq_m1"})
	w.waitFor("send_welcome_email", "enq_m1", "confirmed")
	w.crm.Fail(sandbox.Fault{Status: 500})
	w.deliver(checkout{eventID: "evt_m2", enquiry: "enq_m2"})
	w.waitFor("send_welcome_email", "enq_m2", "confirmed")
	w.crm.Fail(sandbox.Fault{Status: 422})
	w.deliver(checkout{eventID: "evt_m3", enquiry: "enq_m3"})
	w.waitFor("open_opportunity", "enq_m3", "failed")
	if status, _ := w.request("POST", "/hooks/stripe-live", http.Header{"Stripe-Signature": {"t=1,v1=00"}},
		checkout{eventID: "evt_forged", enquiry: "x"}.body()); status != 401 {
		t.Fatalf("forged delivery: %d", status)
	}

	m := w.scrape()
	want := map[string]float64{
		`oncehook_attempts_total{destination="crm",outcome="success"}`:  2,
		`oncehook_attempts_total{destination="crm",outcome="unsure"}`:   1,
		`oncehook_attempts_total{destination="crm",outcome="rejected"}`: 1,
		`oncehook_attempts_total{destination="mail",outcome="success"}`: 2,
		`oncehook_reconcile_total{outcome="absent_strong"}`:             1,
		`oncehook_actions{queue="failed",state="failed"}`:               1,
		`oncehook_actions{queue="outstanding",state="pending"}`:         1, // enq_m3's email waits for its predecessor
		`oncehook_actions{queue="uncertain",state="uncertain"}`:         0,
		`oncehook_database_up`: 1,
		`oncehook_deliveries_total{outcome="new",reason="",source="stripe-live"}`:               1 + 2,
		`oncehook_deliveries_total{outcome="duplicate",reason="",source="stripe-live"}`:         1,
		`oncehook_deliveries_total{outcome="rejected",reason="signature",source="stripe-live"}`: 1,
		`oncehook_ingest_duration_seconds_count`:                                                4,
		`oncehook_ingest_batch_size_count`:                                                      4, // one at a time: a commit each
		`oncehook_ingest_batch_size_sum`:                                                        4,
	}
	for k, v := range want {
		if got, ok := m[k]; !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
		}
	}
	if m[`oncehook_attempt_duration_seconds_count{destination="crm"}`] != 4 {
		t.Errorf("attempt latency observed %v times, want 4", m[`oncehook_attempt_duration_seconds_count{destination="crm"}`])
	}
}

func TestMetricsBearerToken(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{noEngine: true})
	srv := httptest.NewServer(web.MetricsHandler(w.metrics, "metrics-secret"))
	t.Cleanup(srv.Close)
	for _, c := range []struct {
		name, auth string
		want       int
	}{
		{"NoToken", "", 401},
		{"WrongToken", "Bearer nope", 401},
		{"RightToken", "Bearer metrics-secret", 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != c.want {
				t.Fatalf("status %d, want %d", res.StatusCode, c.want)
			}
			if c.want == 200 && !strings.Contains(string(body), "oncehook_database_up 1") {
				t.Errorf("metrics body lacks oncehook_database_up")
			}
			if strings.Contains(string(body), "metrics-secret") {
				t.Errorf("the token appears in the reply")
			}
		})
	}
}
