package faults

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/sender"
)

// secrets are the values a world's processes get through the environment. Every
// test uses its own, so that the secrets test can look for them in the output.
type secrets struct {
	stripe, github, shopify, standard string // provider signing secrets
	crmToken                          string // the CRM's bearer token
}

func newSecrets(tag string) secrets {
	return secrets{
		stripe:   "whsec_stripe_" + tag + "_3f9a1c",
		github:   "gh-secret-" + tag + "-77d2e0",
		shopify:  "shopify-secret-" + tag + "-a41b9f",
		standard: "whsec_" + base64.StdEncoding.EncodeToString([]byte("standard-"+tag+"-5e0c2d")),
		crmToken: "crm-token-" + tag + "-c0ffee42",
	}
}

func (s secrets) env() []string {
	return []string{"STRIPE_SECRET=" + s.stripe, "GH_SECRET=" + s.github, "SHOPIFY_SECRET=" + s.shopify,
		"STANDARD_SECRET=" + s.standard, "CRM_TOKEN=" + s.crmToken}
}

func (s secrets) of(provider string) string {
	return map[string]string{"stripe": s.stripe, "github": s.github, "shopify": s.shopify,
		"standard-webhooks": s.standard}[provider]
}

// faultConfig has one source per provider, each with a rule that opens a CRM
// opportunity per business key. %[1]d is the port, %[2]s the CRM's URL.
const faultConfig = `
listen: 127.0.0.1:%[1]d
sources:
  - {name: stripe-live, client: acme, provider: stripe, account: acct_1, environment: live, secret_env: STRIPE_SECRET}
  - {name: gh, client: acme, provider: github, account: org, environment: live, secret_env: GH_SECRET}
  - {name: shop, client: acme, provider: shopify, account: shop, environment: live, secret_env: SHOPIFY_SECRET}
  - {name: billing, client: acme, provider: standard-webhooks, environment: live, secret_env: STANDARD_SECRET}
destinations:
  - name: crm
    type: http
    create: {method: POST, url: "%[2]s/opportunities"}
    auth: {bearer_env: CRM_TOKEN}
    idempotency: {header: Idempotency-Key, ttl: 24h}
    reference_field: source_ref
    lookup: {url: "%[2]s/opportunities?source_ref={ref}", consistency: strong}
    result_id: /id
    timeout: 20s
    owner: crm-admin@example.com
actions:
  - name: open_opportunity
    source: stripe-live
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    resource: /data/object/id
    occurred_at: /created
    destination: crm
    params: {enquiry_id: /data/object/metadata/enquiry_id, amount: /data/object/amount_total}
    owner: sales-ops@example.com
  - name: github_issue
    source: gh
    on: [issues.opened]
    key: [/issue/id]
    destination: crm
    params: {title: /issue/title}
  - name: shopify_order
    source: shop
    on: [orders/create]
    key: [/id]
    destination: crm
    params: {email: /email}
  - name: billing_invoice
    source: billing
    on: [invoice.paid]
    key: [/data/invoice]
    destination: crm
    params: {amount: /data/amount}
`

// world is a database, a sandbox CRM and the config the oncehook processes share.
type world struct {
	t       *testing.T
	dsn     string
	pool    *pgxpool.Pool
	crm     *sandbox.CRM
	crmURL  string
	secrets secrets
	dir     string
	conf    string // the config's text, faultConfig unless a test sets another
	// down makes the CRM unreachable (an outage, in the way downMode says)
	// except for the requests let through (through), counting the calls made
	// to it meanwhile.
	down      atomic.Bool
	downMode  atomic.Int32 // outage503 (the default), outageDrop or outageHang
	through   atomic.Int32
	downCalls atomic.Int64
}

// How a CRM that is down answers.
const (
	outage503  = iota // 503 Service Unavailable
	outageDrop        // the connection closes without a reply
	outageHang        // no reply until the caller gives up (its timeout)
)

// gate stands before the CRM: while down it answers as downMode says without
// asking it.
func (w *world) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if w.down.Load() && r.URL.Path != sandbox.InspectPath {
			w.downCalls.Add(1)
			if w.through.Add(-1) < 0 {
				switch w.downMode.Load() {
				case outageDrop:
					panic(http.ErrAbortHandler)
				case outageHang:
					// The server notices a caller that hung up (and ends
					// the request's context) only once the body is read.
					io.Copy(io.Discard, r.Body) //nolint:errcheck // a caller that gave up mid-body ends the wait as well
					<-r.Context().Done()
					return
				}
				http.Error(rw, `{"message":"service unavailable"}`, http.StatusServiceUnavailable)
				return
			}
		}
		next.ServeHTTP(rw, r)
	})
}

// newWorld makes a world on dsn (a database of its own). pool queries it.
func newWorld(t *testing.T, pool *pgxpool.Pool, dsn string, sec secrets) *world {
	t.Helper()
	w := &world{t: t, dsn: dsn, pool: pool, secrets: sec, dir: t.TempDir(), conf: faultConfig}
	t.Cleanup(func() {
		if t.Failed() && w.pool != nil {
			w.logActions()
		}
	})
	w.crm = sandbox.NewCRM(sandbox.CRMParams{Token: sec.crmToken})
	srv := httptest.NewServer(w.gate(w.crm.Handler())) // 127.0.0.1 only
	t.Cleanup(srv.Close)
	w.crmURL = srv.URL
	return w
}

// config writes the config for a server listening on port and returns its path.
func (w *world) config(port int) string {
	w.t.Helper()
	path := filepath.Join(w.dir, fmt.Sprintf("oncehook-%d.yaml", port))
	if err := os.WriteFile(path, []byte(fmt.Sprintf(w.conf, port, w.crmURL)), 0o600); err != nil {
		w.t.Fatal(err)
	}
	return path
}

func (w *world) env(extra ...string) []string {
	return append(append([]string{"DATABASE_URL=" + w.dsn}, w.secrets.env()...), extra...)
}

// server is a running `oncehook serve`.
type server struct {
	*process
	url string
}

// serve starts `oncehook serve` on a free loopback port and waits until it listens.
func (w *world) serve(name string, extraEnv ...string) *server {
	w.t.Helper()
	port := freePort(w.t)
	p := startProcess(w.t, name, w.env(extraEnv...), "serve", "--config", w.config(port))
	p.waitOutput(`listening on http://`)
	return &server{process: p, url: fmt.Sprintf("http://127.0.0.1:%d", port)}
}

// worker starts `oncehook worker` and returns it with the name it writes into leases.
func (w *world) worker(name string, extraEnv ...string) (*process, string) {
	w.t.Helper()
	p := startProcess(w.t, name, w.env(extraEnv...), "worker", "--config", w.config(freePort(w.t)))
	return p, p.waitOutput(`workers started"? worker=(\S+)`)
}

func freePort(t testing.TB) int {
	t.Helper()
	// The server needs its port in the config file: take a free one and hand it
	// over. Another process grabbing it in between would fail the test loudly.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// checkout is a Stripe checkout.session.completed for one enquiry.
func checkout(eventID, enquiry string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"type":"checkout.session.completed","created":1700000000,`+
		`"data":{"object":{"id":"cs_%s","amount_total":4200,"metadata":{"enquiry_id":%q}}}}`, eventID, enquiry, enquiry))
}

// reply is one HTTP answer, or the error that stood in for it.
type reply struct {
	status int
	body   []byte
	err    error
}

var client = &http.Client{Timeout: 30 * time.Second}

// post sends body to url with hdr.
func post(url string, hdr http.Header, body []byte) reply {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return reply{err: err}
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	res, err := client.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return reply{status: res.StatusCode, body: b, err: err}
}

// signed returns the headers provider would send for body, signed with the world's secret.
func (w *world) signed(provider string, d sender.Delivery) http.Header {
	w.t.Helper()
	h, err := sender.Headers(provider, w.secrets.of(provider), d)
	if err != nil {
		w.t.Fatal(err)
	}
	return h
}

// deliverStripe posts a Stripe event as Stripe would, retrying what is not
// acknowledged (a 503, a refused connection) until limit, re-signing each try.
// It returns the acknowledging reply, and how many tries were refused first;
// onRefused, if not nil, hears of each refusal as it happens.
func (w *world) deliverStripe(ctx context.Context, url string, body []byte, limit time.Duration, onRefused func()) (reply, int) {
	deadline := time.Now().Add(limit)
	refused := 0
	for {
		r := post(url+"/hooks/stripe-live", w.signed("stripe", sender.Delivery{Body: body}), body)
		if r.err == nil && r.status == http.StatusOK {
			return r, refused
		}
		if r.err == nil && r.status != http.StatusServiceUnavailable {
			return r, refused // a verdict: the caller decides
		}
		refused++
		if onRefused != nil {
			onRefused()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return r, refused
		}
		select { // a provider's retry backoff, kept short
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// count runs a count query.
func (w *world) count(sql string, args ...any) int {
	w.t.Helper()
	var n int
	if err := w.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		w.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// recordsByRef counts the CRM's records per source_ref (the operation key).
func (w *world) recordsByRef() map[string]int {
	out := map[string]int{}
	for _, r := range w.crm.Records() {
		ref, _ := r.Fields["source_ref"].(string)
		out[ref]++
	}
	return out
}

// checkOneRecordPerOperation fails the test unless the CRM holds exactly one record
// for each action of the database, and no record for anything else.
func (w *world) checkOneRecordPerOperation(wantOperations int) {
	w.t.Helper()
	rows, err := w.pool.Query(context.Background(), `SELECT operation_key, state FROM actions`)
	if err != nil {
		w.t.Fatal(err)
	}
	keys := map[string]string{}
	for rows.Next() {
		var k, st string
		if err := rows.Scan(&k, &st); err != nil {
			w.t.Fatal(err)
		}
		keys[k] = st
	}
	if err := rows.Err(); err != nil {
		w.t.Fatal(err)
	}
	if len(keys) != wantOperations {
		w.t.Errorf("%d actions in the ledger, want %d", len(keys), wantOperations)
	}
	recs := w.recordsByRef()
	for k, st := range keys {
		if recs[k] != 1 {
			w.t.Errorf("operation %s (%s): %d CRM records, want exactly 1", k, st, recs[k])
		}
		if st != "confirmed" {
			w.t.Errorf("operation %s is %s, want confirmed", k, st)
		}
	}
	for ref, n := range recs {
		if _, ok := keys[ref]; !ok {
			w.t.Errorf("CRM record(s) %q (%d) belong to no action", ref, n)
		}
	}
	if got := len(w.crm.Records()); got != wantOperations {
		w.t.Errorf("CRM holds %d records, want %d", got, wantOperations)
	}
}

// waitAllConfirmed waits until n actions exist and every one is confirmed.
func (w *world) waitAllConfirmed(n int, limit time.Duration) {
	w.t.Helper()
	eventually(w.t, limit, fmt.Sprintf("%d confirmed actions", n), func() bool {
		return w.count(`SELECT count(*) FROM actions WHERE state = 'confirmed'`) == n &&
			w.count(`SELECT count(*) FROM actions`) == n
	})
}

func senderDelivery(body []byte) sender.Delivery { return sender.Delivery{Body: body} }

var stringsReplaceAll = strings.ReplaceAll

// logActions logs every action with its state and reason, to explain a failure.
func (w *world) logActions() {
	rows, err := w.pool.Query(context.Background(), `SELECT id, name, business_key, state, attempts,
		coalesce(lease_owner, ''), next_attempt_at, left(reason, 200) FROM actions ORDER BY id`)
	if err != nil {
		w.t.Logf("list actions: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var name, key, state, owner, reason string
		var attempts int
		var next time.Time
		if err := rows.Scan(&id, &name, &key, &state, &attempts, &owner, &next, &reason); err != nil {
			w.t.Logf("scan: %v", err)
			return
		}
		w.t.Logf("action %d %s %q: %s, %d attempts, lease %q, next %s: %s", id, name, key, state, attempts, owner,
			time.Until(next).Round(time.Millisecond), reason)
	}
}
