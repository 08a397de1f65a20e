package faults

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/oauthstore"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/sandbox/authserver"
	"github.com/oncehook/oncehook/internal/settings"
)

// oauthFaultConfig sends each checkout to a CRM reached with OAuth2 client
// credentials. %[1]d is the port, %[2]s the CRM, %[3]s the token URL.
const oauthFaultConfig = `
listen: 127.0.0.1:%[1]d
sources:
  - {name: stripe-live, client: acme, provider: stripe, account: acct_1, environment: live, secret_env: STRIPE_SECRET}
destinations:
  - name: oauth-crm
    type: http
    create: {method: POST, url: "%[2]s/opportunities"}
    auth:
      oauth2: {grant: client_credentials, token_url: "%[3]s", client_id_env: OAUTH_CLIENT_ID, client_secret_env: OAUTH_CLIENT_SECRET}
    reference_field: source_ref
    owner: oauth-admin@example.com
actions:
  - name: oauth_copy
    source: stripe-live
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    destination: oauth-crm
    params: {enquiry_id: /data/object/metadata/enquiry_id}
`

const (
	faultKeyA = "Vj0n3Yt4kq8m2X7cR5pW9sL1hB6dF3gA0zQ4uE8iO2M="
	faultKeyB = "ZmF1bHRzLXRlc3Qta2V5LWItMDEyMzQ1Njc4OWFiY2Q="
)

type oauthWorld struct {
	*world
	as   *authserver.Server
	crm  *sandbox.CRM
	path string
	port int
}

func newOAuthWorld(t *testing.T, ttl time.Duration) *oauthWorld {
	t.Helper()
	pool, dsn := dbtest.NewDSN(t)
	w := &oauthWorld{world: newWorld(t, pool, dsn, newSecrets("oauth"))}
	w.as = authserver.New(authserver.Params{ClientID: "oncehook-faults", ClientSecret: "faults-client-secret", AccessTTL: ttl})
	t.Cleanup(w.as.Close)
	w.crm = sandbox.NewCRM(sandbox.CRMParams{Authorize: w.as.Valid})
	srv := httptest.NewServer(w.crm.Handler())
	t.Cleanup(srv.Close)
	w.port = freePort(t)
	w.path = filepath.Join(w.dir, "oauth.yaml")
	if err := os.WriteFile(w.path, []byte(fmt.Sprintf(oauthFaultConfig, w.port, srv.URL, w.as.TokenURL())), 0o600); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *oauthWorld) env(extra ...string) []string {
	return w.world.env(append([]string{"OAUTH_CLIENT_ID=oncehook-faults", "OAUTH_CLIENT_SECRET=faults-client-secret"}, extra...)...)
}

// deliver posts checkouts for enquiries from..to-1 to the server, all at once.
func (w *oauthWorld) deliver(base string, from, to int) {
	w.t.Helper()
	var wg sync.WaitGroup
	for i := from; i < to; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := checkout(fmt.Sprintf("evt_oauth_%d", i), fmt.Sprintf("enq_oauth_%d", i))
			if r := post(base+"/hooks/stripe-live", w.signed("stripe", senderDelivery(body)), body); r.status != http.StatusOK {
				w.t.Errorf("deliver %d: %d %v", i, r.status, r.err)
			}
		}()
	}
	wg.Wait()
}

// TestOAuthTwoProcessesRefreshOnce runs serve and a worker, two processes on one
// database, calling one OAuth2 destination: when its token nears expiry, exactly
// one of them refreshes it, before any call meets a 401.
func TestOAuthTwoProcessesRefreshOnce(t *testing.T) {
	t.Parallel()
	// 20 s tokens are refreshed in their last 5 s (a quarter of their life).
	w := newOAuthWorld(t, 20*time.Second)
	env := w.env("ONCEHOOK_SECRET_KEY=" + faultKeyA)
	srv := startProcess(t, "serve", env, "serve", "--config", w.path)
	srv.waitOutput(`listening on http://`)
	worker := startProcess(t, "worker", env, "worker", "--config", w.path)
	worker.waitOutput(`workers started`)
	base := fmt.Sprintf("http://127.0.0.1:%d", w.port)

	w.deliver(base, 0, 8)
	eventually(t, 60*time.Second, "8 records", func() bool { return w.crm.Len() == 8 })
	if n := w.as.Grants("client_credentials"); n != 1 {
		t.Fatalf("%d token requests for the first calls, want 1", n)
	}
	eventually(t, 30*time.Second, "the token to be due for refresh", func() bool {
		return w.count(`SELECT count(*) FROM oauth_tokens WHERE expires_at - interval '5 seconds' <= now()`) == 1
	})
	w.deliver(base, 8, 40)
	eventually(t, 60*time.Second, "40 records", func() bool { return w.crm.Len() == 40 })
	if n := w.as.Grants("client_credentials"); n != 2 {
		t.Errorf("%d token requests in all, want 2 (one first, one refresh)", n)
	}
	if n := w.count(`SELECT refreshes::int FROM oauth_tokens`); n != 1 {
		t.Errorf("%d refreshes stored, want 1", n)
	}
	for _, r := range w.crm.Requests() {
		if r.Status == http.StatusUnauthorized {
			t.Errorf("a call met a 401: the refresh came too late")
			break
		}
	}
	if n := w.count(`SELECT count(DISTINCT worker) FROM attempts`); n != 2 {
		t.Errorf("calls came from %d processes, want both", n)
	}
	for ref, n := range w.crmRecords() {
		if n != 1 {
			t.Errorf("%s: %d records", ref, n)
		}
	}
}

func (w *oauthWorld) crmRecords() map[string]int {
	m := map[string]int{}
	for _, r := range w.crm.Records() {
		m[fmt.Sprint(r.Fields["source_ref"])]++
	}
	return m
}

// TestOAuthSecretKeyAtStart: a missing or wrong ONCEHOOK_SECRET_KEY stops the
// process at start with a plain reason; the previous key beside the new one
// rotates the stored grants.
func TestOAuthSecretKeyAtStart(t *testing.T) {
	t.Parallel()
	w := newOAuthWorld(t, time.Hour)
	keys, err := settings.ParseSecretKeys(faultKeyA, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := oauthstore.New(w.pool, keys).Save(context.Background(), "oauth-crm",
		ledger.OAuthToken{Access: "stored-access-token", Expiry: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, key, previous, want string }{
		{"Missing", "", "", "ONCEHOOK_SECRET_KEY is not set"},
		{"Malformed", "dG9vLXNob3J0", "", "ONCEHOOK_SECRET_KEY must be 32 random bytes"},
		{"Wrong", faultKeyB, "", "ONCEHOOK_SECRET_KEY does not open the stored OAuth2 tokens"},
	} {
		p := startProcess(t, "worker "+tc.name, w.env("ONCEHOOK_SECRET_KEY="+tc.key), "worker", "--config", w.path)
		p.wait(60 * time.Second)
		if p.err == nil || !strings.Contains(p.out.String(), tc.want) {
			t.Errorf("%s key: exit %v, output:\n%s", tc.name, p.err, tail(p.out.String(), 2000))
		}
	}
	// check says whether the tokens are there, and whether the key opens them.
	for _, tc := range []struct{ key, want string }{
		{faultKeyA, "oauth-crm            stored, access token expires"},
		{faultKeyB, "ONCEHOOK_SECRET_KEY does not open the stored OAuth2 tokens"},
	} {
		p := startProcess(t, "check", w.env("ONCEHOOK_SECRET_KEY="+tc.key), "check", "--config", w.path)
		p.wait(60 * time.Second)
		if !strings.Contains(p.out.String(), tc.want) {
			t.Errorf("check, want %q: %v\n%s", tc.want, p.err, p.out.String())
		}
	}
	for _, env := range [][]string{
		{"ONCEHOOK_SECRET_KEY=" + faultKeyB, "ONCEHOOK_SECRET_KEY_PREVIOUS=" + faultKeyA}, // rotation re-seals
		{"ONCEHOOK_SECRET_KEY=" + faultKeyB},                                              // then the new key alone opens them
	} {
		p := startProcess(t, "worker", w.env(env...), "worker", "--config", w.path)
		p.waitOutput(`workers started`)
		p.signal(sigterm)
		p.wait(60 * time.Second)
	}
}
