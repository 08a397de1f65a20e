package web_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/inbox"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sender"
	"github.com/oncehook/oncehook/web"
)

// slowSite serves the dashboard's config through web.NewHTTPServer on a
// listener that allows perAddr connections an address.
func slowSite(t *testing.T, perAddr int) *dashboard {
	t.Helper()
	d := &dashboard{t: t, logs: &lockedWriter{w: &strings.Builder{}}, pool: dbtest.New(t)}
	env := map[string]string{"STRIPE_SECRET": dashStripeSecret, "CRM_TOKEN": dashCRMToken}
	cfg, err := config.Parse("slow.yaml", []byte(fmt.Sprintf(dashConfig, "http://127.0.0.1:1", "127.0.0.1:1")),
		func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	d.cfg = cfg
	logger := slog.New(slog.NewTextHandler(d.logs, nil))
	e := web.New(web.Params{Config: cfg, Pool: d.pool, Inbox: inbox.New(d.pool, logger, nil),
		Review: review.New(d.pool, cfg, nil), Logger: logger, Metrics: metrics.New(d.pool)})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := web.NewHTTPServer(e)
	go srv.Serve(web.LimitListener(ln, perAddr, nil)) //nolint:errcheck // closed below
	t.Cleanup(func() { srv.Close() })
	d.url = "http://" + ln.Addr().String()
	return d
}

// TestSlowBodyIsCut: a webhook whose body trickles in a byte every 100 ms is
// answered 408 once HookBodyGrace has passed, and counted; a large body sent at
// the same time at an ordinary pace is stored whole.
func TestSlowBodyIsCut(t *testing.T) {
	t.Parallel()
	d := slowSite(t, 8)
	body := []byte(`{"id":"evt_slow","type":"checkout.session.completed","created":1700000000,"data":{}}`)
	hdr, err := sender.Headers("stripe", dashStripeSecret, sender.Delivery{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(d.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	fmt.Fprintf(conn, "POST /hooks/stripe-live HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
		"Stripe-Signature: %s\r\nContent-Length: %d\r\n\r\n", hdr.Get("Stripe-Signature"), len(body))
	answered := make(chan string, 1)
	go func() {
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			answered <- "no reply: " + err.Error()
			return
		}
		res.Body.Close()
		answered <- res.Status
	}()
	trickle := time.NewTicker(100 * time.Millisecond) // the slow sender's own pace
	defer trickle.Stop()
	large := make(chan string, 1)
	go func() { large <- d.deliverLarge(200 << 10) }()

	limit := time.NewTimer(web.HookBodyGrace + 3*time.Second)
	defer limit.Stop()
	var status string
	for sent := 0; status == ""; {
		select {
		case status = <-answered:
		case <-trickle.C:
			if sent < len(body) {
				_, _ = conn.Write(body[sent : sent+1])
				sent++
			}
		case <-limit.C:
			t.Fatalf("the trickling body was still being read after %s", time.Since(start))
		}
	}
	took := time.Since(start)
	if status != "408 Request Timeout" {
		t.Errorf("trickling body: %q, want 408", status)
	}
	if took < web.HookBodyGrace-time.Second {
		t.Errorf("cut after %s, before the grace of %s", took, web.HookBodyGrace)
	}
	if got := <-large; got != "" {
		t.Error(got)
	}
	var stored, large200 int
	if err := d.pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE source_event_id = 'evt_slow'),
		count(*) FILTER (WHERE length(body::text) > 200000) FROM `+eventsRead+` events`).Scan(&stored, &large200); err != nil {
		t.Fatal(err)
	}
	if stored != 0 || large200 != 1 {
		t.Errorf("events: %d slow ones stored (want 0), %d large ones (want 1)", stored, large200)
	}
	if m := d.metricsText(); !strings.Contains(m, `oncehook_deliveries_total{outcome="rejected",reason="slow_body",source="stripe-live"} 1`) {
		t.Errorf("the cut is not counted:\n%s", grepLines(m, "oncehook_deliveries_total"))
	}
	t.Logf("trickling body cut after %s", took.Round(time.Millisecond))
}

// deliverLarge posts a signed checkout of about n bytes; "" when it is stored.
func (d *dashboard) deliverLarge(n int) string {
	body := []byte(`{"id":"evt_large","type":"checkout.session.completed","created":1700000000,` +
		`"data":{"object":{"metadata":{"enquiry_id":"enq_large","note":"` + strings.Repeat("a", n) + `"}}}}`)
	hdr, err := sender.Headers("stripe", dashStripeSecret, sender.Delivery{Body: body})
	if err != nil {
		return err.Error()
	}
	req, _ := http.NewRequest(http.MethodPost, d.url+"/hooks/stripe-live", strings.NewReader(string(body)))
	req.Header = hdr
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "large body: " + err.Error()
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Sprintf("large body: %d %s", res.StatusCode, raw)
	}
	return ""
}

func (d *dashboard) metricsText() string {
	d.t.Helper()
	res, err := http.Get(d.url + "/metrics")
	if err != nil {
		d.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return string(raw)
}

func grepLines(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestConnectionsPerAddress: an address holding its share of connections has
// the next one closed at once; once one of its connections closes, it may open
// another.
func TestConnectionsPerAddress(t *testing.T) {
	t.Parallel()
	d := slowSite(t, 3)
	addr := strings.TrimPrefix(d.url, "http://")
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	// A request on each proves the server holds all three.
	for i, c := range held {
		if st := getOn(t, c); st != "200 OK" {
			t.Fatalf("connection %d: %q, want 200", i, st)
		}
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	if st := getOn(t, extra); st != "" {
		t.Errorf("a fourth connection was served: %q", st)
	}
	held[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		st := getOn(t, c)
		c.Close()
		if st == "200 OK" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection served after one of three closed")
		}
	}
}

// getOn sends GET /healthz on c and returns the reply's status, "" when the
// connection was closed without one.
func getOn(t *testing.T, c net.Conn) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return ""
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return ""
	}
	res.Body.Close()
	return res.Status
}
