package faults

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/sender"
)

// hostileBodies are bodies no provider sends. None of them may get more than a 4xx
// unsigned, nor anything but 200 or 400 signed.
var hostileBodies = map[string]string{
	"empty":             "",
	"not JSON":          "this is not json",
	"nested 50000 deep": strings.Repeat("[", 50_000) + strings.Repeat("]", 50_000),
	"object 50000 deep": `{"id":"evt_deep","type":"t","data":` + strings.Repeat(`{"a":`, 50_000) + "1" + strings.Repeat("}", 50_000) + "}",
	"invalid UTF-8":     "{\"id\":\"evt_\xff\xfe\",\"type\":\"t\xc3\x28\"}",
	"lone surrogates":   `{"id":"\ud800","type":"\udfff","data":{"object":{"metadata":{"enquiry_id":"\udc00"}}}}`,
	"raw NUL":           "{\"id\":\"evt_\x00\",\"type\":\"t\"}\x00",
	"escaped NUL":       `{"id":"evt_\u0000","type":"\u0000","action":"\u0000"}`,
	"JSON array":        `[{"id":"evt_array"}]`,
	"JSON null":         `null`,
}

// badSignatures are signature headers that are wrong, malformed or huge.
func badSignatures(provider string) map[string]http.Header {
	big := strings.Repeat("a", 10<<10)
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	switch provider {
	case "stripe":
		return map[string]http.Header{
			"missing":          {},
			"wrong":            {"Stripe-Signature": {"t=" + ts + ",v1=" + strings.Repeat("ab", 32)}},
			"malformed":        {"Stripe-Signature": {",,=,t,v1"}},
			"10 KB":            {"Stripe-Signature": {"t=" + ts + ",v1=" + big}},
			"10 KB of entries": {"Stripe-Signature": {"t=" + ts + strings.Repeat(",v1=00", 10<<10/6)}},
		}
	case "github":
		id := http.Header{"X-Github-Delivery": {"d-1"}, "X-Github-Event": {"issues"}}
		return map[string]http.Header{
			"missing":        id,
			"wrong":          with(id, "X-Hub-Signature-256", "sha256="+strings.Repeat("00", 32)),
			"malformed":      with(id, "X-Hub-Signature-256", "sha256=zz"),
			"10 KB":          with(id, "X-Hub-Signature-256", "sha256="+big),
			"10 KB delivery": with(with(id, "X-Hub-Signature-256", "sha256="+strings.Repeat("00", 32)), "X-Github-Delivery", big),
		}
	case "shopify":
		id := http.Header{"X-Shopify-Webhook-Id": {"w-1"}, "X-Shopify-Topic": {"orders/create"}}
		return map[string]http.Header{
			"missing":   id,
			"wrong":     with(id, "X-Shopify-Hmac-Sha256", strings.Repeat("A", 43)+"="),
			"malformed": with(id, "X-Shopify-Hmac-Sha256", "not base64!"),
			"10 KB":     with(id, "X-Shopify-Hmac-Sha256", big),
			"10 KB id":  with(with(id, "X-Shopify-Hmac-Sha256", strings.Repeat("A", 43)+"="), "X-Shopify-Webhook-Id", big),
		}
	default: // standard-webhooks
		id := http.Header{"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {ts}}
		return map[string]http.Header{
			"missing":     id,
			"wrong":       with(id, "Webhook-Signature", "v1,"+strings.Repeat("A", 43)+"="),
			"malformed":   with(id, "Webhook-Signature", "v1"),
			"10 KB":       with(id, "Webhook-Signature", "v1,"+big),
			"10 KB list":  with(id, "Webhook-Signature", strings.Repeat("v1,AAAA ", 10<<10/8)),
			"10 KB stamp": with(with(id, "Webhook-Signature", "v1,AAAA"), "Webhook-Timestamp", strings.Repeat("9", 10<<10)),
		}
	}
}

// incompressible returns n hex digits that do not repeat.
func incompressible(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		sum := sha256.Sum256([]byte(strconv.Itoa(i)))
		b.WriteString(hex.EncodeToString(sum[:]))
	}
	return b.String()[:n]
}

func with(h http.Header, k, v string) http.Header {
	h = h.Clone()
	h.Set(k, v)
	return h
}

var sourceOf = map[string]string{"stripe": "stripe-live", "github": "gh", "shopify": "shop", "standard-webhooks": "billing"}

// signedHostile is a validly signed delivery whose content is hostile.
type signedHostile struct {
	name     string
	provider string
	d        sender.Delivery
	header   http.Header // set over the signed headers
}

func signedHostiles() []signedHostile {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	bigRes := incompressible(10 << 10) // a repeated letter would compress under the index limit
	var out []signedHostile
	add := func(name, provider, id, typ, body string, hdr http.Header) {
		out = append(out, signedHostile{name: name, provider: provider, d: sender.Delivery{ID: id, Type: typ, Body: []byte(body)}, header: hdr})
	}
	for name, body := range hostileBodies {
		for _, p := range []string{"stripe", "github", "shopify", "standard-webhooks"} {
			add(name, p, "sig-"+strings.ReplaceAll(name, " ", "-"), "issues", body, nil)
		}
	}
	stripe := func(id, enquiry, extra string) string {
		return `{"id":"` + id + `","type":"checkout.session.completed","created":1700000000,"data":{"object":{"id":"cs_` + id +
			`","amount_total":4200,"metadata":{"enquiry_id":"` + enquiry + `"}` + extra + `}}}`
	}
	add("NUL in the business key", "stripe", "", "", stripe("evt_h1", `enq\u0000nul`, ""), nil)
	add("lone surrogate business key", "stripe", "", "", stripe("evt_h2", `\ud800enq\udfff`, ""), nil)
	add("NUL in a param", "stripe", "", "", `{"id":"evt_h3","type":"checkout.session.completed","created":1700000000,"data":{"object":{"id":"cs_h3","amount_total":"\u0000","metadata":{"enquiry_id":"enq_h3"}}}}`, nil)
	add("number beyond numeric", "stripe", "", "", `{"id":"evt_h4","type":"checkout.session.completed","created":1700000000,"data":{"object":{"id":"cs_h4","amount_total":1e999999,"metadata":{"enquiry_id":"enq_h4"}}}}`, nil)
	add("10 KB resource", "stripe", "", "", `{"id":"evt_h5","type":"checkout.session.completed","created":1700000000,"data":{"object":{"id":"`+bigRes+`","amount_total":1,"metadata":{"enquiry_id":"enq_h5"}}}}`, nil)
	add("NUL in the resource", "stripe", "", "", `{"id":"evt_h6","type":"checkout.session.completed","created":1700000000,"data":{"object":{"id":"cs\u0000","amount_total":1,"metadata":{"enquiry_id":"enq_h6"}}}}`, nil)
	add("absurd created", "stripe", "", "", `{"id":"evt_h7","type":"checkout.session.completed","created":99999999999999999999,"data":{"object":{"id":"cs_h7","amount_total":1,"metadata":{"enquiry_id":"enq_h7"}}}}`, nil)
	// Deep but within encoding/json's limit of 10,000: stored, routed and shown.
	add("4000 deep inside", "stripe", "", "", `{"id":"evt_h8","type":"checkout.session.completed","created":1700000000,"data":{"object":{"id":"cs_h8","metadata":{"enquiry_id":"enq_h8"},"junk":`+deep(4000)+`}}}`, nil)
	add("NUL in the id", "stripe", "", "", `{"id":"evt_\u0000","type":"checkout.session.completed"}`, nil)
	add("NUL in the type", "stripe", "", "", `{"id":"evt_h9","type":"checkout\u0000"}`, nil)
	add("10 KB id", "stripe", "", "", `{"id":"`+bigRes+`","type":"t"}`, nil)
	add("NUL in the key", "github", "gh-h1", "issues", `{"action":"opened","issue":{"id":"gh\u0000","title":"x"}}`, nil)
	add("huge number key", "github", "gh-h2", "issues", `{"action":"opened","issue":{"id":123456789012345678901234567890,"title":"\ud800"}}`, nil)
	add("key is an object", "github", "gh-h3", "issues", `{"action":"opened","issue":{"id":{"a":1},"title":"x"}}`, nil)
	add("NUL in the action", "github", "gh-h4", "issues", `{"action":"op\u0000ened","issue":{"id":4}}`, nil)
	add("invalid UTF-8 delivery id", "github", "gh-h5", "issues", `{"action":"opened","issue":{"id":5}}`, http.Header{"X-Github-Delivery": {"gh-\xff\xfe"}})
	add("invalid UTF-8 event", "github", "gh-h6", "issues", `{"action":"opened","issue":{"id":6}}`, http.Header{"X-Github-Event": {"iss\xc3\x28ues"}})
	add("10 KB delivery id", "github", strings.Repeat("g", 10<<10), "issues", `{"action":"opened","issue":{"id":7}}`, nil)
	add("NUL in the key", "shopify", "sh-h1", "orders/create", `{"id":"\u0000","email":"\ud800"}`, nil)
	add("invalid UTF-8 topic", "shopify", "sh-h2", "orders/\xff", `{"id":2}`, nil)
	add("NUL in the key", "standard-webhooks", "msg_h1", "", `{"type":"invoice.paid","data":{"invoice":"inv\u0000","amount":1e999999}}`, nil)
	add("surrogate id", "standard-webhooks", "msg_\xed\xa0\x80", "", `{"type":"invoice.paid","data":{"invoice":"inv_2","amount":1}}`, nil)
	return out
}

// otherSpelling sets the unused low bits of a padded base64 signature's last
// character (keeping any "v1," before it): the same bytes, spelled another way.
func otherSpelling(sig string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	i := strings.LastIndexFunc(sig, func(r rune) bool { return r != '=' })
	v := strings.IndexByte(alphabet, sig[i])
	return sig[:i] + string(alphabet[v|1]) + sig[i+1:]
}

// TestHostileInput sends what no provider sends to a running `oncehook serve`:
// unsigned and validly signed hostile bodies and headers on every source, and
// malformed HTTP. It never answers 5xx, never 2xx without a valid signature, and a
// signed hostile body gets 200 (stored) or 400. What was stored must not break the
// router, the JSON API or the pages, and the server stays ready.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewDSN(t)
	w := newWorld(t, pool, dsn, newSecrets("hostile"))
	srv := w.serve("serve")
	token := apiToken(t, pool, "hostile-test", "operator")
	person(t, pool, "ops@example.com", "operator", "correct horse battery staple")

	t.Run("Unsigned", func(t *testing.T) {
		for provider, source := range sourceOf {
			for sig, hdr := range badSignatures(provider) {
				for name, body := range hostileBodies {
					r := post(srv.url+"/hooks/"+source, hdr, []byte(body))
					if r.err != nil || r.status < 400 || r.status >= 500 {
						t.Errorf("%s, %s signature, %s body: %d %v %s", provider, sig, name, r.status, r.err, tail(string(r.body), 200))
					}
				}
			}
		}
		// A valid signature of another source's secret is no signature here.
		body := checkout("evt_cross", "enq_cross")
		hdr, _ := sender.Headers("stripe", "whsec_someone_else", sender.Delivery{Body: body})
		if r := post(srv.url+"/hooks/stripe-live", hdr, body); r.status != http.StatusUnauthorized {
			t.Errorf("signed with another secret: %d %v", r.status, r.err)
		}
	})

	// The right signature spelled another way (its unused bits set) decodes to the
	// same bytes under a lenient decoder: it is refused, and nothing is stored.
	t.Run("OtherSpellingOfTheRightSignature", func(t *testing.T) {
		for provider, header := range map[string]string{"shopify": "X-Shopify-Hmac-Sha256", "standard-webhooks": "Webhook-Signature"} {
			d := sender.Delivery{ID: "spelled-" + provider, Type: "orders/create", Body: []byte(`{"type":"invoice.paid","id":1}`)}
			hdr := w.signed(provider, d)
			hdr.Set(header, otherSpelling(hdr.Get(header)))
			r := post(srv.url+"/hooks/"+sourceOf[provider], hdr, d.Body)
			if r.status != http.StatusUnauthorized || !strings.Contains(string(r.body), "malformed") && !strings.Contains(string(r.body), "signature") {
				t.Errorf("%s, the signature spelled %q: %d %v %s, want 401 saying why", provider, hdr.Get(header), r.status, r.err, tail(string(r.body), 200))
			}
			if n := w.count(`SELECT count(*) FROM events WHERE source_event_id = $1`, d.ID); n != 0 {
				t.Errorf("%s: %d events stored for a refused delivery", provider, n)
			}
		}
	})

	t.Run("MalformedHTTP", func(t *testing.T) {
		sig := w.signed("github", sender.Delivery{ID: "raw-1", Type: "issues", Body: []byte(`{"action":"opened","issue":{"id":1}}`)})
		for name, req := range map[string]string{
			"NUL in a header":       "POST /hooks/gh HTTP/1.1\r\nHost: x\r\nX-Github-Delivery: a\x00b\r\nContent-Length: 0\r\n\r\n",
			"10 KB header line":     "POST /hooks/gh HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X", 10<<10) + "\r\nContent-Length: 0\r\n\r\n",
			"10 KB header value":    "POST /hooks/gh HTTP/1.1\r\nHost: x\r\nX-Junk: " + strings.Repeat("j", 10<<10) + "\r\nContent-Length: 0\r\n\r\n",
			"garbage request line":  "\xff\xfe\x00 / HTTP/9.9\r\n\r\n",
			"bad content length":    "POST /hooks/gh HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
			"signed, NUL in the id": "POST /hooks/gh HTTP/1.1\r\nHost: x\r\nX-Github-Event: issues\r\nX-Hub-Signature-256: " + sig.Get("X-Hub-Signature-256") + "\r\nX-Github-Delivery: raw\x00\r\nContent-Length: 36\r\n\r\n{\"action\":\"opened\",\"issue\":{\"id\":1}}",
			"path with NUL":         "GET /events/%00 HTTP/1.1\r\nHost: x\r\n\r\n",
			"chunked garbage":       "POST /hooks/gh HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		} {
			status := rawRequest(t, srv.url, req)
			if status == 0 || (status >= 200 && status < 300) || (status >= 500) {
				t.Errorf("%s: status %d", name, status)
			}
		}
	})

	var stored []string // event ids of signed hostile deliveries that were stored
	t.Run("SignedHostile", func(t *testing.T) {
		for _, h := range signedHostiles() {
			hdr := w.signed(h.provider, h.d)
			for k, v := range h.header {
				hdr[k] = v
			}
			r := post(srv.url+"/hooks/"+sourceOf[h.provider], hdr, h.d.Body)
			switch {
			case r.err != nil:
				t.Errorf("%s (%s): %v", h.name, h.provider, r.err)
			case r.status == http.StatusOK:
				var ack struct {
					EventID string `json:"event_id"`
				}
				if err := json.Unmarshal(r.body, &ack); err != nil || ack.EventID == "" {
					t.Errorf("%s (%s): 200 without an event id: %s", h.name, h.provider, r.body)
				}
				stored = append(stored, ack.EventID)
			case r.status != http.StatusBadRequest:
				t.Errorf("%s (%s): %d %s, want 200 or 400", h.name, h.provider, r.status, tail(string(r.body), 300))
			}
		}
		t.Logf("%d signed hostile deliveries stored", len(stored))
	})

	t.Run("RoutingCarriesOn", func(t *testing.T) {
		// Whatever was stored above, good events behind it are still performed.
		for i := range 3 {
			enq := fmt.Sprintf("enq_good_%d", i)
			if r := post(srv.url+"/hooks/stripe-live", w.signed("stripe", senderDelivery(checkout("evt_"+enq, enq))), checkout("evt_"+enq, enq)); r.status != 200 {
				t.Fatalf("good delivery: %d %v %s", r.status, r.err, r.body)
			}
		}
		eventually(t, 60*time.Second, "the good events' actions to be confirmed", func() bool {
			return w.count(`SELECT count(*) FROM actions WHERE business_key LIKE 'enq_good_%' AND state = 'confirmed'`) == 3
		})
		eventually(t, 30*time.Second, "every stored event to be routed", func() bool {
			return w.count(`SELECT count(*) FROM events WHERE status = 'received'`) == 0
		})
		rows, err := pool.Query(t.Context(), `SELECT source, left(source_event_id, 20), status, left(reason, 120) FROM events ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var src, id, st, reason string
			_ = rows.Scan(&src, &id, &st, &reason)
			t.Logf("%-12s %-22q %-8s %s", src, id, st, reason)
		}
		rows.Close()
	})

	t.Run("APIShowsThem", func(t *testing.T) {
		for _, id := range stored {
			r := apiGet(srv.url, token, "/api/v1/events/"+id)
			if r.status != http.StatusOK || !json.Valid(r.body) {
				t.Errorf("GET /api/v1/events/%s: %d %v %s", id, r.status, r.err, tail(string(r.body), 300))
			}
		}
		for _, path := range []string{"/api/v1/events?limit=500", "/api/v1/actions?limit=500", "/api/v1/summary",
			"/api/v1/actions?q=%00", "/api/v1/actions?q=%ff%fe", "/api/v1/events?source=%00&status=%ff",
			"/api/v1/events/%00", "/api/v1/actions/99999999999999999999", "/api/v1/actions?cursor=%ff%00",
			"/api/v1/actions?limit=99999999999999999999"} {
			if r := apiGet(srv.url, token, path); r.err != nil || r.status >= 500 {
				t.Errorf("GET %s: %d %v %s", path, r.status, r.err, tail(string(r.body), 300))
			}
		}
		r := apiGet(srv.url, token, "/api/v1/actions?limit=500")
		var list struct {
			Actions []struct{ ID string } `json:"actions"`
		}
		if err := json.Unmarshal(r.body, &list); err != nil {
			t.Fatalf("list actions: %v %s", err, r.body)
		}
		for _, a := range list.Actions {
			if r := apiGet(srv.url, token, "/api/v1/actions/"+a.ID); r.status != http.StatusOK || !json.Valid(r.body) {
				t.Errorf("GET /api/v1/actions/%s: %d %s", a.ID, r.status, tail(string(r.body), 300))
			}
		}
	})

	t.Run("PagesShowThem", func(t *testing.T) {
		b := newBrowser(t, srv.url)
		if res := b.login("ops@example.com", "correct horse battery staple"); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("login: %d", res.StatusCode)
		}
		paths := []string{"/", "/queue/outstanding", "/queue/uncertain", "/queue/failed", "/mine", "/sources",
			"/destinations", "/queue/failed?q=%00", "/queue/outstanding?q=%ff%fe&source=%00", "/events/%00",
			"/actions/99999999999999999999"}
		for _, id := range stored {
			paths = append(paths, "/events/"+id)
		}
		rows, err := pool.Query(t.Context(), `SELECT id FROM actions`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id int64
			_ = rows.Scan(&id)
			paths = append(paths, fmt.Sprintf("/actions/%d", id), fmt.Sprintf("/actions/%d/retry", id))
		}
		rows.Close()
		var oversize []string
		for _, p := range paths {
			res, body := b.do(http.MethodGet, p, nil)
			if res.StatusCode >= 500 || res.StatusCode == http.StatusSeeOther {
				t.Errorf("GET %s: %d %s", p, res.StatusCode, tail(body, 300))
			}
			if len(body) > maxPage {
				oversize = append(oversize, p)
			}
		}
		t.Run("PagesBounded", func(t *testing.T) {
			var events []string
			for _, p := range oversize {
				if !strings.HasPrefix(p, "/events/") {
					t.Errorf("GET %s: over %d bytes for a body of at most 64 KB", p, maxPage)
				}
				events = append(events, p)
			}
			if len(events) > 0 {
				// Indenting without bound made an 8 KB body nested 4,000 deep a page
				// of some 32 MB; prettyJSON now shows deep payloads as sent.
				t.Errorf("event pages %v render over %d bytes", events, maxPage)
			}
		})
		// Hostile form posts are refused or handled, never a 500.
		token := b.csrf("/")
		for _, p := range []string{"/actions/1/resolve", "/actions/%00/retry", "/queue/failed/bulk", "/users"} {
			res, body := b.do(http.MethodPost, p, url.Values{"csrf_token": {token}, "note": {"\x00\xff\xfe"},
				"ids": {"1", "x", "\x00"}, "owner": {strings.Repeat("o", 10<<10)}})
			if res.StatusCode >= 500 {
				t.Errorf("POST %s: %d %s", p, res.StatusCode, tail(body, 300))
			}
		}
	})

	if r := get(srv.url + "/readyz"); r.status != http.StatusOK {
		t.Errorf("readyz after hostile input: %d %v", r.status, r.err)
	}
	if srv.exited() {
		t.Fatalf("the server exited: %v", srv.err)
	}
	out := srv.out.String()
	for _, bad := range []string{"panic", "status=500", "goroutine "} {
		if strings.Contains(out, bad) {
			t.Errorf("server output contains %q:\n%s", bad, excerpt(out, bad))
		}
	}
}

// rawRequest writes req as it is to the server and returns the reply's status, or
// 0 when none came.
func rawRequest(t *testing.T, base, req string) int {
	t.Helper()
	u, _ := url.Parse(base)
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return 0
	}
	f := strings.Fields(line)
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// excerpt shows the lines around the first occurrence of s.
func excerpt(out, s string) string {
	i := strings.Index(out, s)
	if i < 0 {
		return ""
	}
	return out[max(0, i-1500):min(len(out), i+1500)]
}
