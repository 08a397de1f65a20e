package web_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/sender"
)

func stripeBody(id string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"type":"checkout.session.completed","created":1700000000,"data":{"object":{"metadata":{"enquiry_id":"enq_1"}}}}`, id))
}

func TestIngestAcceptsEachProvider(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig, nil)
	cases := []struct {
		source string
		d      sender.Delivery
	}{
		{"stripe-live", sender.Delivery{Body: stripeBody("evt_1")}},
		{"gh", sender.Delivery{ID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Type: "issues", Body: []byte(`{"action":"opened","issue":{"id":1}}`)}},
		{"shop", sender.Delivery{ID: "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", Type: "orders/create", Body: []byte(`{"id":820982911946154500}`)}},
		{"std", sender.Delivery{ID: "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", Body: []byte(`{"type":"invoice.paid","data":{"id":"in_1"}}`)}},
	}
	for _, c := range cases {
		t.Run(c.source, func(t *testing.T) {
			status, body := h.post(c.source, c.d)
			if status != http.StatusOK || body["duplicate"] != false || body["event_id"] == "" {
				t.Fatalf("first delivery: %d %v", status, body)
			}
			status, again := h.post(c.source, c.d)
			if status != http.StatusOK || again["duplicate"] != true || again["event_id"] != body["event_id"] {
				t.Fatalf("repeat: %d %v (first %v)", status, again, body)
			}
			if n := h.count(`SELECT deliveries FROM events WHERE source = $1`, c.source); n != 2 {
				t.Errorf("deliveries counted = %d, want 2", n)
			}
		})
	}
	t.Run("TypeAndTimeKept", func(t *testing.T) {
		var typ, ghType string
		var occurred time.Time
		if err := h.pool.QueryRow(context.Background(), `SELECT type, occurred_at FROM events WHERE source='stripe-live'`).Scan(&typ, &occurred); err != nil {
			t.Fatal(err)
		}
		if err := h.pool.QueryRow(context.Background(), `SELECT type FROM events WHERE source='gh'`).Scan(&ghType); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]any{"checkout.session.completed", int64(1700000000), "issues.opened"}, []any{typ, occurred.Unix(), ghType}); diff != "" {
			t.Errorf("stored identity (-want +got):\n%s", diff)
		}
	})
	t.Run("OnlyIdentityHeadersKept", func(t *testing.T) {
		var headers string
		if err := h.pool.QueryRow(context.Background(), `SELECT b.headers::text FROM events e
			JOIN event_bodies b ON b.client = e.client AND b.event_id = e.id AND b.day = e.body_day WHERE e.source='gh'`).Scan(&headers); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(headers, "Signature") || !strings.Contains(headers, "X-Github-Delivery") {
			t.Errorf("headers = %s, want identity headers only", headers)
		}
	})
}

func TestIngestStoresExactBody(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig, nil)
	body := []byte("{\"id\": \"evt_exact\",\n  \"type\":\"x\" , \"note\":\"caf\u00e9\"}  ")
	if status, _ := h.post("stripe-live", sender.Delivery{Body: body}); status != 200 {
		t.Fatalf("status %d", status)
	}
	// The bytes sit in event_bodies, in the partition of the day they came (UTC),
	// which the identity's body_day names; the identity's row holds none.
	// (On Citus the row's table is a shard of the partition: its name, then the shard's number.)
	var got, sum, inRow []byte
	var day, partition string
	if err := h.pool.QueryRow(context.Background(), `SELECT b.body, e.body_sha256, e.body, e.body_day::text, b.tableoid::regclass::text
		FROM events e JOIN event_bodies b ON b.client = e.client AND b.event_id = e.id AND b.day = e.body_day`).
		Scan(&got, &sum, &inRow, &day, &partition); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body) || len(sum) != 32 {
		t.Errorf("stored body %q (hash %d bytes), want %q", got, len(sum), body)
	}
	today := time.Now().UTC()
	inPartition := regexp.MustCompile(`^event_bodies_` + strings.ReplaceAll(day, "-", "") + `(_\d+)?$`)
	if inRow != nil || (day != today.Format(time.DateOnly) && day != today.Add(-time.Minute).Format(time.DateOnly)) ||
		!inPartition.MatchString(partition) {
		t.Errorf("the body was written in %s (day %s) with %d bytes left in the event's row, want today's partition (%s) and none",
			partition, day, len(inRow), today.Format(time.DateOnly))
	}
}

// TestIngestMakesTheMissingDay: a server down for longer than the partitions'
// lead comes back to a day without a partition for its bodies (here: today's
// dropped). The first delivery makes it and is stored with its body, answered 200;
// its repeat is a duplicate.
func TestIngestMakesTheMissingDay(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig, nil)
	day := time.Now().UTC()
	today := "event_bodies_" + day.Format("20060102")
	if _, err := h.pool.Exec(context.Background(), `DROP TABLE `+today); err != nil {
		t.Fatal(err)
	}
	d := sender.Delivery{Body: stripeBody("evt_after_downtime")}
	if status, reply := h.post("stripe-live", d); status != 200 || reply["duplicate"] != false {
		t.Fatalf("first delivery after the downtime: %d %v, want 200, stored", status, reply)
	}
	if n := h.count(`SELECT count(*) FROM events e JOIN event_bodies b ON b.client = e.client AND b.event_id = e.id
		AND b.day = e.body_day WHERE e.source_event_id = 'evt_after_downtime' AND b.body = $1 AND b.day = $2::date
		AND to_regclass($3) IS NOT NULL`, d.Body, day.Format(time.DateOnly), today); n != 1 {
		t.Errorf("%d events stored with their body in %s, made again, want 1", n, today)
	}
	if status, reply := h.post("stripe-live", d); status != 200 || reply["duplicate"] != true {
		t.Errorf("its repeat: %d %v, want a duplicate", status, reply)
	}
}

func TestIngestConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig, nil)
	d := sender.Delivery{Body: stripeBody("evt_concurrent")}
	const n = 50
	var wg sync.WaitGroup
	statuses := make([]int, n)
	dups := make([]any, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			statuses[i], dups[i] = func() (int, any) { s, b := h.post("stripe-live", d); return s, b["duplicate"] }()
		}()
	}
	close(start)
	wg.Wait()
	firsts := 0
	for i := range n {
		if statuses[i] != http.StatusOK {
			t.Errorf("request %d: status %d", i, statuses[i])
		}
		if dups[i] == false {
			firsts++
		}
	}
	if firsts != 1 {
		t.Errorf("%d replies said duplicate:false, want exactly 1", firsts)
	}
	if rows := h.count(`SELECT count(*) FROM events`); rows != 1 {
		t.Errorf("%d rows, want 1", rows)
	}
	if got := h.count(`SELECT deliveries FROM events`); got != n {
		t.Errorf("deliveries = %d, want %d", got, n)
	}
}

func TestIngestConflictingRepeat(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig, nil)
	h.post("stripe-live", sender.Delivery{Body: stripeBody("evt_c")})
	changed := []byte(`{"id":"evt_c","type":"checkout.session.completed","data":{"object":{"amount_total":999}}}`)
	status, body := h.post("stripe-live", sender.Delivery{Body: changed})
	if status != 200 || body["duplicate"] != true {
		t.Fatalf("conflicting repeat: %d %v", status, body)
	}
	if n := h.count(`SELECT count(*) FROM events WHERE conflict`); n != 1 {
		t.Errorf("conflict flagged on %d events, want 1", n)
	}
	if n := h.count(`SELECT count(*) FROM event_conflicts WHERE body = $1`, changed); n != 1 {
		t.Errorf("conflicting body kept %d times, want 1", n)
	}
	if n := h.count(`SELECT count(*) FROM `+eventsRead+` events WHERE body = $1`, stripeBody("evt_c")); n != 1 {
		t.Errorf("the original body was replaced")
	}
}

func TestIngestRefusals(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig, nil)
	good := stripeBody("evt_ok")
	signed, _ := sender.Headers("stripe", testEnv["STRIPE_SECRET"], sender.Delivery{Body: good})
	wrongKey, _ := sender.Headers("stripe", "whsec_wrong", sender.Delivery{Body: good})
	stale, _ := sender.Headers("stripe", testEnv["STRIPE_SECRET"], sender.Delivery{Body: good, At: time.Now().Add(-6 * time.Minute)})
	notJSON := []byte(`not json at all`)
	notJSONSigned, _ := sender.Headers("stripe", testEnv["STRIPE_SECRET"], sender.Delivery{Body: notJSON})
	ghNoID, _ := sender.Headers("github", testEnv["GITHUB_SECRET"], sender.Delivery{Type: "push", Body: []byte(`{}`)})
	ghNoID.Del("X-GitHub-Delivery")
	big := bytes.Repeat([]byte("a"), 5000)
	bigSigned, _ := sender.Headers("stripe", testEnv["STRIPE_SECRET"], sender.Delivery{Body: big})

	cases := []struct {
		name   string
		method string
		path   string
		hdr    http.Header
		body   []byte
		want   int
	}{
		{"UnknownSource", "POST", "/hooks/nope", signed, good, 404},
		{"MissingSignature", "POST", "/hooks/stripe-live", http.Header{}, good, 401},
		{"WrongSecret", "POST", "/hooks/stripe-live", wrongKey, good, 401},
		{"ExpiredTimestamp", "POST", "/hooks/stripe-live", stale, good, 401},
		{"BodyChangedAfterSigning", "POST", "/hooks/stripe-live", signed, stripeBody("evt_tampered"), 401},
		{"OverBodyLimit", "POST", "/hooks/stripe-live", bigSigned, big, 413},
		{"UnparsableBody", "POST", "/hooks/stripe-live", notJSONSigned, notJSON, 400},
		{"NoDeliveryID", "POST", "/hooks/gh", ghNoID, []byte(`{}`), 400},
		{"WrongMethod", "GET", "/hooks/stripe-live", nil, nil, 405},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body := h.do(c.method, c.path, c.hdr, c.body)
			if status != c.want {
				t.Fatalf("status = %d (%v), want %d", status, body, c.want)
			}
			if msg, _ := body["error"].(string); c.want != 405 && msg == "" {
				t.Errorf("no error message in %v", body)
			}
		})
	}
	if n := h.count(`SELECT count(*) FROM events`); n != 0 {
		t.Errorf("%d events stored for refused requests, want 0", n)
	}
}

func TestIngestBodyLimitWhileReading(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig, nil)
	// A chunked body declares no length: the limit must hold while reading.
	pr, pw := ioPipe()
	go func() {
		defer pw.Close()
		chunk := bytes.Repeat([]byte("x"), 1024)
		for range 64 {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
	}()
	req, _ := http.NewRequest(http.MethodPost, h.url+"/hooks/stripe-live", pr)
	req.Header.Set("Stripe-Signature", "t=1,v1=00")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status = %d, want 413", res.StatusCode)
	}
}

func TestIngestDatabaseDown(t *testing.T) {
	t.Parallel()
	cluster, dsn := dbtest.Cluster(t)
	pool := openPool(t, dsn)
	h := newHarness(t, testConfig, pool)
	if status, _ := h.post("stripe-live", sender.Delivery{Body: stripeBody("evt_before")}); status != 200 {
		t.Fatalf("before stop: %d", status)
	}
	if err := cluster.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	hdr, _ := sender.Headers("stripe", testEnv["STRIPE_SECRET"], sender.Delivery{Body: stripeBody("evt_during")})
	req, _ := http.NewRequest(http.MethodPost, h.url+"/hooks/stripe-live", bytes.NewReader(stripeBody("evt_during")))
	req.Header = hdr
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" {
		t.Fatalf("with the database down: status %d, Retry-After %q; want 503 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"))
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("503 took %s; it must come in bounded time", elapsed)
	}
	if status, _ := h.do("GET", "/readyz", nil, nil); status != 503 {
		t.Errorf("readyz with the database down = %d, want 503", status)
	}
	if status, _ := h.do("GET", "/healthz", nil, nil); status != 200 {
		t.Errorf("healthz = %d, want 200 (the process is alive)", status)
	}
	if err := cluster.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The sender retries, as providers do, until storage is back.
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body := h.post("stripe-live", sender.Delivery{Body: stripeBody("evt_during")})
		if status == 200 {
			if body["duplicate"] != false {
				t.Errorf("the retried delivery was stored before: %v", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("storage did not come back: %d", status)
		}
		time.Sleep(100 * time.Millisecond) // poll interval while the server restarts
	}
	if n := h.count(`SELECT count(*) FROM events`); n != 2 {
		t.Errorf("%d events after restart, want 2 (nothing acknowledged was lost)", n)
	}
}

// Svix keeps its own names for the Standard Webhooks headers; Shopify's event id is
// kept beside its webhook id, which is the delivery identity.
func TestIngestSendersAsTheyAre(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig, nil)
	body := []byte(`{"type":"invoice.paid","data":{"id":"in_svix"}}`)
	std, err := sender.Headers("standard-webhooks", testEnv["STANDARD_SECRET"], sender.Delivery{ID: "msg_svix_1", Body: body})
	if err != nil {
		t.Fatal(err)
	}
	svix := http.Header{"Content-Type": {"application/json"}}
	for _, k := range []string{"id", "timestamp", "signature"} {
		svix.Set("svix-"+k, std.Get("webhook-"+k))
	}
	if status, got := h.do("POST", "/hooks/std", svix, body); status != 200 || got["duplicate"] != false {
		t.Fatalf("svix headers: %d %v", status, got)
	}
	// The same message again under the standard names is the same delivery.
	if status, got := h.do("POST", "/hooks/std", std, body); status != 200 || got["duplicate"] != true {
		t.Fatalf("standard headers after svix: %d %v", status, got)
	}
	if n := h.count(`SELECT deliveries FROM events WHERE source = 'std' AND source_event_id = 'msg_svix_1'`); n != 2 {
		t.Errorf("deliveries = %d, want 2 on one event", n)
	}
	svix.Set("svix-signature", std.Get("webhook-signature")[:10]+"AAAA")
	if status, _ := h.do("POST", "/hooks/std", svix, body); status != 401 {
		t.Errorf("bad svix signature: %d, want 401", status)
	}

	if status, _ := h.post("shop", sender.Delivery{ID: "wh-1", Type: "orders/create", Body: []byte(`{"id":1}`)}); status != 200 {
		t.Fatalf("shopify: %d", status)
	}
	if n := h.count(`SELECT count(*) FROM ` + eventsRead + ` events WHERE source = 'shop' AND source_event_id = 'wh-1' AND headers->>'X-Shopify-Event-Id' = 'evt-wh-1'`); n != 1 {
		t.Errorf("shopify event id kept on %d events, want 1", n)
	}
}
