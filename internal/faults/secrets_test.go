package faults

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/sandbox/authserver"
	"github.com/oncehook/oncehook/internal/sender"
)

// recorder keeps every response (status line, headers, body) a client received.
type recorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return res, err
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(&r.buf, "%s %s -> %s\n", req.Method, req.URL.Path, res.Status)
	_ = res.Header.Write(&r.buf)
	r.buf.Write(body)
	r.buf.WriteString("\n")
	return res, nil
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

// TestSecretsStayOut runs serve and worker at debug level with known secrets of
// every kind — the four providers' signing secrets, the CRM's bearer token, SMTP
// credentials, the database password, the metrics token, a person's password and
// an API token — and drives them through their paths: deliveries good and badly
// signed, a CRM that refuses the token and one that echoes it back, a failed
// sign-in and a good one, reconnecting, the commands that print. Then it searches
// every line the binaries wrote and every response the test received: none of the
// secrets appears, except the API token once where `token create` prints it. It runs
// once with each log format; in JSON, every line also parses and every line about an
// action carries its ids.
func TestSecretsStayOut(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			secretsStayOut(t, format)
		})
	}
}

// secretsStayOut is TestSecretsStayOut with ONCEHOOK_LOG_FORMAT=format.
func secretsStayOut(t *testing.T, format string) {
	pool, dsn := dbtest.NewDSN(t)
	sec := newSecrets("secrets")
	w := newWorld(t, pool, dsn+" password=db-password-7c1e9a", sec)
	const (
		smtpUser     = "smtp-user-5b2f10"
		smtpPassword = "smtp-password-e4d8a3"
		metricsToken = "metrics-token-0a9f66"
		password     = "person-password-91c3d7"
	)
	mail, err := sandbox.StartMail("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mail.Close)
	mail.RequireAuth(smtpUser, smtpPassword)

	// The CRM, behind a switch that makes it echo the request's credentials in an
	// error, as a careless API might.
	var echoAuth atomic.Bool
	crm := w.crm.Handler()
	echoing := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && echoAuth.CompareAndSwap(true, false) {
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprintf(rw, `{"error":"cannot accept request with %s"}`, r.Header.Get("Authorization"))
			return
		}
		crm.ServeHTTP(rw, r)
	}))
	t.Cleanup(echoing.Close)
	w.crmURL = echoing.URL

	// An OAuth2 destination: an authorization server and a CRM that accepts only
	// its live access tokens.
	const (
		oauthClientSecret = "oauth-client-secret-6d1f20"
		secretKey         = "Vj0n3Yt4kq8m2X7cR5pW9sL1hB6dF3gA0zQ4uE8iO2M=" // 32 bytes
	)
	as := authserver.New(authserver.Params{ClientID: "oncehook-secrets", ClientSecret: oauthClientSecret})
	t.Cleanup(as.Close)
	oauthCRM := sandbox.NewCRM(sandbox.CRMParams{Authorize: as.Valid})
	oauthSrv := httptest.NewServer(oauthCRM.Handler())
	t.Cleanup(oauthSrv.Close)

	env := []string{"ONCEHOOK_LOG_LEVEL=debug", "ONCEHOOK_LOG_FORMAT=" + format, "ONCEHOOK_METRICS_TOKEN=" + metricsToken,
		"SMTP_USER=" + smtpUser, "SMTP_PASSWORD=" + smtpPassword,
		"OAUTH_CLIENT_ID=oncehook-secrets", "OAUTH_CLIENT_SECRET=" + oauthClientSecret, "ONCEHOOK_SECRET_KEY=" + secretKey}
	port := freePort(t)
	cfgPath := filepath.Join(w.dir, "secrets.yaml")
	cfg := fmt.Sprintf(faultConfig, port, w.crmURL)
	cfg = strings.Replace(cfg, "destinations:\n", fmt.Sprintf(`destinations:
  - {name: mail, type: smtp, addr: %q, from: hello@example.com, username_env: SMTP_USER, password_env: SMTP_PASSWORD, owner: mail@example.com}
  - name: oauth-crm
    type: http
    create: {method: POST, url: "%s/opportunities"}
    auth:
      oauth2: {grant: client_credentials, token_url: "%s", client_id_env: OAUTH_CLIENT_ID, client_secret_env: OAUTH_CLIENT_SECRET, scopes: [crm]}
    reference_field: source_ref
    owner: oauth-admin@example.com
`, mail.Addr(), oauthSrv.URL, as.TokenURL()), 1)
	cfg += `  - name: welcome
    source: stripe-live
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    after: open_opportunity
    destination: mail
    params: {to: {const: "ada@example.com"}, subject: {const: Welcome}, text: {result: open_opportunity}}
  - name: oauth_copy
    source: stripe-live
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    destination: oauth-crm
    params: {enquiry_id: /data/object/metadata/enquiry_id}
`
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var outputs []*syncBuffer
	run := func(stdin string, args ...string) (stdout string) {
		t.Helper()
		cmd := exec.Command(binary(t), args...)
		cmd.Env = append(os.Environ(), w.env(env...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var so, se syncBuffer
		cmd.Stdout, cmd.Stderr = &so, &se
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("oncehook %v did not finish", args)
		}
		outputs = append(outputs, &se)
		return so.String()
	}

	srvProc := startProcess(t, "serve", w.env(env...), "serve", "--config", cfgPath)
	srvProc.waitOutput(`listening on http://`)
	worker := startProcess(t, "worker", w.env(env...), "worker", "--config", cfgPath)
	worker.waitOutput(`workers started`)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	rec := &recorder{}
	hc := &http.Client{Transport: rec, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, path string, hdr http.Header, body []byte) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(body))
		for k, v := range hdr {
			req.Header[k] = v
		}
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}

	// Commands that print: the token once on stdout, the rest on stderr.
	apiTok := strings.TrimSpace(run("", "token", "create", "--name", "secrets-test", "--role", "admin"))
	if !strings.HasPrefix(apiTok, "ohk_") {
		t.Fatalf("token create printed %q", apiTok)
	}
	run(password+"\n", "user", "add", "--email", "ada@example.com", "--role", "admin")
	run("", "check", "--config", cfgPath)
	bad := strings.Replace(cfg, "provider: stripe", "provider: stripy", 1)
	badPath := filepath.Join(w.dir, "bad.yaml")
	_ = os.WriteFile(badPath, []byte(bad), 0o600)
	run("", "check", "--config", badPath)
	runEnvFail := exec.Command(binary(t), "migrate")
	runEnvFail.Env = append(os.Environ(), "DATABASE_URL=host=/nonexistent-socket-dir port=5432 user=postgres password=db-password-7c1e9a dbname=x")
	failOut, _ := runEnvFail.CombinedOutput()

	// Deliveries on every source, good and badly signed.
	auth := http.Header{"Authorization": {"Bearer " + apiTok}}
	for i, p := range []string{"stripe", "github", "shopify", "standard-webhooks"} {
		body := map[string]string{
			"stripe":            string(checkout("evt_sec_1", "enq_sec_1")),
			"github":            `{"action":"opened","issue":{"id":11,"title":"t"}}`,
			"shopify":           `{"id":12,"email":"a@example.com"}`,
			"standard-webhooks": `{"type":"invoice.paid","data":{"invoice":"inv_13","amount":1}}`,
		}[p]
		d := sender.Delivery{ID: fmt.Sprintf("sec-%d", i), Type: map[string]string{"github": "issues", "shopify": "orders/create"}[p], Body: []byte(body)}
		hdr, err := sender.Headers(p, sec.of(p), d)
		if err != nil {
			t.Fatal(err)
		}
		send(http.MethodPost, "/hooks/"+sourceOf[p], hdr, []byte(body))
		wrong, _ := sender.Headers(p, sec.of(p)+"x", d)
		send(http.MethodPost, "/hooks/"+sourceOf[p], wrong, []byte(body))
	}
	// The OAuth2 destination's token ends early: the next call refreshes and retries.
	eventually(t, 60*time.Second, "the OAuth2 destination's first record", func() bool { return oauthCRM.Len() == 1 })
	as.ExpireAccess()
	// The CRM refuses the token once (the destination is held, then reconnected),
	// and echoes it in an error once.
	w.crm.Fail(sandbox.Fault{Status: http.StatusUnauthorized, Message: "token rejected"})
	body := checkout("evt_sec_2", "enq_sec_2")
	send(http.MethodPost, "/hooks/stripe-live", w.signed("stripe", senderDelivery(body)), body)
	eventually(t, 60*time.Second, "the CRM destination to be held", func() bool {
		return w.count(`SELECT count(*) FROM destinations WHERE name = 'crm' AND status = 'disconnected'`) == 1
	})
	echoAuth.Store(true)
	send(http.MethodPost, "/api/v1/destinations/crm/reconnect", auth, nil)
	eventually(t, 60*time.Second, "the echoing reply to be recorded", func() bool { return !echoAuth.Load() })
	eventually(t, 90*time.Second, "the actions to settle", func() bool {
		// (A successor of the action the echoing reply failed waits for it for good.)
		return w.count(`SELECT count(*) FROM actions WHERE state IN ('processing', 'retrying', 'held')
			OR (state = 'pending' AND next_attempt_at < now() + interval '1 day')`) == 0
	})

	// The API shows everything it has; the metrics; the pages, after a wrong and a right password.
	send(http.MethodGet, "/metrics", http.Header{"Authorization": {"Bearer " + metricsToken}}, nil)
	send(http.MethodGet, "/metrics", nil, nil)
	send(http.MethodGet, "/api/v1/destinations", auth, nil)
	send(http.MethodGet, "/api/v1/summary", auth, nil)
	for _, path := range []string{"/api/v1/actions?limit=500", "/api/v1/events?limit=500"} {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header = auth
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Actions []struct{ ID string } `json:"actions"`
			Events  []struct{ ID string } `json:"events"`
		}
		_ = json.NewDecoder(res.Body).Decode(&list)
		res.Body.Close()
		for _, a := range list.Actions {
			send(http.MethodGet, "/api/v1/actions/"+a.ID, auth, nil)
			send(http.MethodGet, "/actions/"+a.ID, nil, nil)
		}
		for _, e := range list.Events {
			send(http.MethodGet, "/api/v1/events/"+e.ID, auth, nil)
		}
	}
	b := newBrowser(t, base)
	b.c.Transport = rec
	b.login("ada@example.com", "not the password")
	if res := b.login("ada@example.com", password); res.StatusCode != http.StatusSeeOther {
		t.Errorf("login: %d", res.StatusCode)
	}
	for _, p := range []string{"/", "/queue/outstanding", "/queue/uncertain", "/queue/failed", "/sources", "/destinations", "/users", "/mine"} {
		b.do(http.MethodGet, p, nil)
	}
	rows, err := pool.Query(context.Background(), `SELECT id FROM actions UNION ALL SELECT -id FROM events`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		_ = rows.Scan(&id)
		if id > 0 {
			b.do(http.MethodGet, fmt.Sprintf("/actions/%d", id), nil)
		} else {
			b.do(http.MethodGet, fmt.Sprintf("/events/%d", -id), nil)
		}
	}
	rows.Close()
	b.do(http.MethodPost, "/destinations/crm/reconnect", url.Values{"csrf_token": {b.csrf("/destinations")}})

	if oauthCRM.Len() != 2 || as.Grants("client_credentials") != 2 {
		t.Errorf("the OAuth2 destination has %d records after %d token requests, want 2 and 2",
			oauthCRM.Len(), as.Grants("client_credentials"))
	}
	// Stop both processes so their last lines are written too.
	srvProc.signal(sigterm)
	worker.signal(sigterm)
	srvProc.wait(60 * time.Second)
	worker.wait(60 * time.Second)

	if len(mail.Messages()) == 0 {
		t.Errorf("no mail was sent: the SMTP credentials were never used")
	}
	// Either process may have made the calls, whose lines are the debug ones.
	debug := map[string]string{"text": "level=DEBUG", "json": `"level":"DEBUG"`}[format]
	if !strings.Contains(srvProc.out.String()+worker.out.String(), debug) {
		t.Errorf("no debug lines: the run did not log at the most verbose level")
	}
	if format == "json" {
		checkJSONLines(t, srvProc.out.String()+worker.out.String())
	}
	logs := srvProc.out.String() + worker.out.String() + string(failOut)
	for _, o := range outputs {
		logs += o.String()
	}
	responses := rec.String()
	named := map[string]string{
		"Stripe secret": sec.stripe, "GitHub secret": sec.github, "Shopify secret": sec.shopify,
		"Standard Webhooks secret": sec.standard, "Standard Webhooks key": strings.TrimPrefix(sec.standard, "whsec_"),
		"CRM token": sec.crmToken, "SMTP user": smtpUser, "SMTP password": smtpPassword,
		"database password": "db-password-7c1e9a", "metrics token": metricsToken, "password": password, "API token": apiTok,
		"OAuth2 client secret": oauthClientSecret, "secret key": secretKey,
		"OAuth2 client credentials (basic)": base64.StdEncoding.EncodeToString([]byte("oncehook-secrets:" + oauthClientSecret)),
	}
	access, refresh := as.Issued()
	for i, tok := range append(access, refresh...) {
		named[fmt.Sprintf("OAuth2 token %d", i)] = tok
	}
	for name, v := range named {
		if strings.Contains(logs, v) {
			t.Errorf("the %s appears in the output of the binaries:\n%s", name, excerpt(logs, v))
		}
		if strings.Contains(responses, v) {
			t.Errorf("the %s appears in a response:\n%s", name, excerpt(responses, v))
		}
	}
	t.Logf("searched %d bytes of output and %d bytes of responses", len(logs), len(responses))
	states, err := pool.Query(context.Background(), `SELECT name || ': ' || state || ' ' || left(reason, 100) FROM actions ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for states.Next() {
		var line string
		_ = states.Scan(&line)
		t.Log(line)
	}
	states.Close()
}

// checkJSONLines checks that every log line is a JSON object and that every line
// about an action carries its operation key's hash beside its id.
func checkJSONLines(t *testing.T, out string) {
	t.Helper()
	actionLines := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "oncehook listening on ") {
			continue // serve's one line on stdout, for people and scripts
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("a log line is not JSON (%v): %s", err, line)
			continue
		}
		if _, ok := v["action_id"]; ok {
			actionLines++
			if h, _ := v["op_key_hash"].(string); len(h) != 16 {
				t.Errorf("a line about an action has no operation key hash: %s", line)
			}
		}
	}
	if actionLines == 0 {
		t.Error("no log line about an action: the JSON form of their ids went unchecked")
	}
}
