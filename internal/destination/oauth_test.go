package destination

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/oauthstore"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/sandbox/authserver"
	"github.com/oncehook/oncehook/internal/settings"
)

// The OAuth store is what the wiring hands the clients as their Tokens.
var _ Tokens = (*oauthstore.TokenStore)(nil)

const (
	oauthClientID     = "oncehook-test-client"
	oauthClientSecret = "client-secret-3d9a7c"
	oauthRedirect     = "http://127.0.0.1:1/destinations/crm/oauth/callback"
)

// oauthEnv is an authorization server, a CRM that accepts only its live access
// tokens, and one database shared by the "processes" a test opens on it.
type oauthEnv struct {
	as   *authserver.Server
	crm  *sandbox.CRM
	dest settings.Destination
	keys settings.SecretKeys
	dsn  string
	yaml string            // the config, for a child process
	env  map[string]string // its environment
}

func newOAuthEnv(t *testing.T, grant string, p authserver.Params) *oauthEnv {
	t.Helper()
	p.ClientID, p.ClientSecret, p.RedirectDomain = oauthClientID, oauthClientSecret, "http://127.0.0.1:1"
	as := authserver.New(p)
	t.Cleanup(as.Close)
	crm := sandbox.NewCRM(sandbox.CRMParams{Authorize: as.Valid})
	srv := httptest.NewServer(crm.Handler())
	t.Cleanup(srv.Close)
	authorize := ""
	if grant == settings.GrantAuthorizationCode {
		authorize = ", authorize_url: " + as.AuthorizeURL()
	}
	yaml := fmt.Sprintf(`
sources:
  - {name: s, client: c, provider: github, environment: live, secret_env: GH_SECRET}
destinations:
  - name: crm
    type: http
    create: {method: POST, url: "%[1]s/opportunities"}
    auth:
      oauth2: {grant: %[2]s, token_url: %[3]s%[4]s, client_id_env: CLIENT_ID, client_secret_env: CLIENT_SECRET, scopes: [crm]}
    reference_field: source_ref
    lookup: {url: "%[1]s/opportunities?source_ref={ref}", consistency: strong}
    timeout: 5s
actions: []
`, srv.URL, grant, as.TokenURL(), authorize)
	key := newKey()
	env := map[string]string{"GH_SECRET": "gh", "CLIENT_ID": oauthClientID, "CLIENT_SECRET": oauthClientSecret,
		settings.SecretKeyEnv: key}
	cfg, err := config.Parse("oauth.yaml", []byte(yaml), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	_, dsn := dbtest.NewDSN(t)
	return &oauthEnv{as: as, crm: crm, keys: cfg.SecretKeys, dsn: dsn, dest: cfg.Destinations[0], yaml: yaml, env: env}
}

func newKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

func testKeys(t *testing.T, current, previous string) settings.SecretKeys {
	t.Helper()
	k, err := settings.ParseSecretKeys(current, previous)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// process is what one oncehook process holds: its own pool, token store and client.
type process struct {
	pool   *pgxpool.Pool
	tokens *oauthstore.TokenStore
	h      *HTTP
}

func (e *oauthEnv) process(t *testing.T) *process {
	t.Helper()
	pool, err := db.Open(context.Background(), e.dsn, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	tokens := oauthstore.New(pool, e.keys)
	h := NewHTTP(e.dest, nil)
	h.oauth = NewOAuth(e.dest, tokens, http.DefaultClient, nil)
	return &process{pool: pool, tokens: tokens, h: h}
}

// stopAfterRefresh is a process's token store that stops the process right after
// a refreshed grant is committed, before the new access token is used: stop's
// error is returned in place of the token, as if the process had ended there.
type stopAfterRefresh struct {
	*oauthstore.TokenStore
	stop func() error
}

func (s stopAfterRefresh) Refresh(ctx context.Context, destination string, due func(ledger.OAuthToken) bool,
	fetch func(context.Context, ledger.OAuthToken) (ledger.OAuthToken, error)) (ledger.OAuthToken, bool, error) {
	t, refreshed, err := s.TokenStore.Refresh(ctx, destination, due, fetch)
	if err == nil && refreshed {
		if err := s.stop(); err != nil {
			return ledger.OAuthToken{}, false, err
		}
	}
	return t, refreshed, err
}

func perform(t *testing.T, p *process, key string) ledger.Outcome {
	t.Helper()
	return p.h.Perform(context.Background(), ledger.Call{OperationKey: key, Params: []byte(`{"amount": 1}`)})
}

func wantObserved(t *testing.T, out ledger.Outcome, want ledger.Observation) {
	t.Helper()
	if out.Observed != want {
		t.Fatalf("observed %q (%s), want %q", out.Observed, out.Detail, want)
	}
}

// statuses counts the CRM's replies by status.
func statuses(crm *sandbox.CRM) map[int]int {
	m := map[int]int{}
	for _, r := range crm.Requests() {
		m[r.Status]++
	}
	return m
}

// connectByHand runs the authorization-code flow as a browser would, without one:
// the approval page's form is posted and the redirect's code exchanged.
func connectByHand(t *testing.T, e *oauthEnv, p *process) {
	t.Helper()
	verifier, state := randomString(), randomString()
	authURL := p.h.AuthorizeURL(oauthRedirect, state, verifier)
	u, err := url.Parse(authURL)
	if err != nil {
		t.Fatal(err)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(e.as.URL+"/authorize?"+u.RawQuery, url.Values{"approve": {"yes"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || back.Query().Get("state") != state || back.Query().Get("code") == "" {
		t.Fatalf("authorize answered %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if err := p.h.Exchange(context.Background(), oauthRedirect, back.Query().Get("code"), verifier); err != nil {
		t.Fatal(err)
	}
}

func randomString() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestOAuthRefreshBeforeExpiryByOneProcess(t *testing.T) {
	e := newOAuthEnv(t, settings.GrantClientCredentials, authserver.Params{AccessTTL: time.Hour})
	a, b := e.process(t), e.process(t)
	wantObserved(t, perform(t, a, "op-first"), ledger.ObsSuccess)
	if n := e.as.Grants("client_credentials"); n != 1 {
		t.Fatalf("first call: %d token requests, want 1", n)
	}
	// Both processes now live 59m30s later: the token is due (refreshed in its last
	// minute) but still valid at the provider, so no call may meet a 401.
	later := func() time.Time { return time.Now().Add(59*time.Minute + 30*time.Second) }
	a.h.oauth.now, b.h.oauth.now = later, later
	var wg sync.WaitGroup
	outs := make([]ledger.Outcome, 12)
	for i := range outs {
		p := a
		if i%2 == 1 {
			p = b
		}
		wg.Add(1)
		go func() { defer wg.Done(); outs[i] = perform(t, p, fmt.Sprintf("op-%d", i)) }()
	}
	wg.Wait()
	for i, out := range outs {
		if out.Observed != ledger.ObsSuccess {
			t.Errorf("call %d: %q (%s)", i, out.Observed, out.Detail)
		}
		if n := e.crm.CountByRef(fmt.Sprintf("op-%d", i)); n != 1 {
			t.Errorf("call %d: %d records, want 1", i, n)
		}
	}
	if n := e.as.Grants("client_credentials"); n != 2 {
		t.Errorf("%d token requests in all, want 2: one first, one refresh", n)
	}
	if n := statuses(e.crm)[http.StatusUnauthorized]; n != 0 {
		t.Errorf("%d calls met a 401; the refresh came before expiry", n)
	}
	var refreshes int64
	if err := a.pool.QueryRow(context.Background(), "SELECT refreshes FROM oauth_tokens WHERE destination = 'crm'").Scan(&refreshes); err != nil || refreshes != 1 {
		t.Errorf("stored refreshes %d (%v), want 1", refreshes, err)
	}
	if n := e.crm.Len(); n != 13 {
		t.Errorf("%d records, want 13", n)
	}
}

func TestOAuthUnauthorizedRefreshesOnceAndRetries(t *testing.T) {
	e := newOAuthEnv(t, settings.GrantAuthorizationCode, authserver.Params{NoExpiry: true})
	p := e.process(t)
	connectByHand(t, e, p)
	wantObserved(t, perform(t, p, "op-1"), ledger.ObsSuccess)
	e.as.ExpireAccess() // the session ends without notice, as Salesforce's do
	out := perform(t, p, "op-2")
	wantObserved(t, out, ledger.ObsSuccess)
	if n := e.crm.CountByRef("op-2"); n != 1 {
		t.Errorf("op-2: %d records, want 1", n)
	}
	if n := statuses(e.crm)[http.StatusUnauthorized]; n != 1 {
		t.Errorf("%d replies were 401, want 1", n)
	}
	if n := e.as.Grants("refresh_token"); n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}
	if n := e.crm.Len(); n != 2 {
		t.Errorf("%d records, want 2", n)
	}
}

func TestOAuthRotatedRefreshTokenSurvivesACrash(t *testing.T) {
	e := newOAuthEnv(t, settings.GrantAuthorizationCode, authserver.Params{NoExpiry: true})
	a := e.process(t)
	connectByHand(t, e, a)
	_, before := e.as.Issued()
	e.as.ExpireAccess()
	requests := len(e.crm.Requests())
	// Process a stops right after committing the refreshed grant, before it sends
	// the new access token anywhere.
	a.h.oauth.tokens = stopAfterRefresh{TokenStore: a.tokens, stop: func() error { return errors.New("process stopped") }}
	wantObserved(t, perform(t, a, "op-1"), ledger.ObsThrottled)
	if n := len(e.crm.Requests()) - requests; n != 1 {
		t.Fatalf("%d requests reached the CRM, want only the 401 before the refresh", n)
	}
	// The provider rotated the refresh token: the old one is worthless now.
	oc := NewOAuth(e.dest, a.tokens, http.DefaultClient, nil)
	if _, err := oc.fetch(context.Background(), ledger.OAuthToken{Refresh: before[0]}); err == nil ||
		!strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("the old refresh token still works (%v): rotation is not being tested", err)
	}
	// A new process finds the rotated grant: it uses it, and refreshes with it.
	b := e.process(t)
	wantObserved(t, perform(t, b, "op-1"), ledger.ObsSuccess)
	e.as.ExpireAccess()
	wantObserved(t, perform(t, b, "op-2"), ledger.ObsSuccess)
	for _, ref := range []string{"op-1", "op-2"} {
		if n := e.crm.CountByRef(ref); n != 1 {
			t.Errorf("%s: %d records, want 1", ref, n)
		}
	}
	if n := e.as.Grants("refresh_token"); n != 2 {
		t.Errorf("%d refreshes, want 2", n)
	}
}

func TestOAuthRefreshFailures(t *testing.T) {
	t.Run("RevokedIsCredentialsRefused", func(t *testing.T) {
		e := newOAuthEnv(t, settings.GrantAuthorizationCode, authserver.Params{NoExpiry: true})
		p := e.process(t)
		connectByHand(t, e, p)
		e.as.Revoke()
		out := perform(t, p, "op-1")
		wantObserved(t, out, ledger.ObsUnauthorized)
		if !strings.Contains(out.Detail, "invalid_grant") || !strings.Contains(out.Detail, "cannot recover") {
			t.Errorf("detail %q does not say the refresh was refused", out.Detail)
		}
		if n := e.crm.Len(); n != 0 {
			t.Errorf("%d records, want 0", n)
		}
	})
	t.Run("TokenEndpointDownIsTemporary", func(t *testing.T) {
		e := newOAuthEnv(t, settings.GrantClientCredentials, authserver.Params{})
		p := e.process(t)
		e.as.SetDown(true)
		wantObserved(t, perform(t, p, "op-1"), ledger.ObsThrottled)
		e.as.SetDown(false)
		wantObserved(t, perform(t, p, "op-1"), ledger.ObsSuccess)
		if n := e.crm.CountByRef("op-1"); n != 1 {
			t.Errorf("%d records, want 1", n)
		}
	})
	t.Run("WrongClientSecretIsRefused", func(t *testing.T) {
		e := newOAuthEnv(t, settings.GrantClientCredentials, authserver.Params{})
		o := *e.dest.Auth.OAuth2
		o.ClientSecret = "not-the-secret"
		e.dest.Auth.OAuth2 = &o
		wantObserved(t, perform(t, e.process(t), "op-1"), ledger.ObsUnauthorized)
	})
}

func TestOAuthSecretKeys(t *testing.T) {
	e := newOAuthEnv(t, settings.GrantClientCredentials, authserver.Params{})
	oldKey := newKey()
	e.keys = testKeys(t, oldKey, "")
	p := e.process(t)
	wantObserved(t, perform(t, p, "op-1"), ledger.ObsSuccess)
	ctx := context.Background()
	newK := newKey()
	if _, err := oauthstore.New(p.pool, testKeys(t, newK, "")).Open(ctx); !errors.Is(err, settings.ErrWrongSecretKey) {
		t.Fatalf("a wrong key opened the grants: %v", err)
	}
	// Rotation: the new key with the old one as previous opens and re-seals.
	st, err := oauthstore.New(p.pool, testKeys(t, newK, oldKey)).Open(ctx)
	if err != nil || !st["crm"].Connected {
		t.Fatalf("rotation: %v %+v", err, st)
	}
	if _, err := oauthstore.New(p.pool, testKeys(t, newK, "")).Open(ctx); err != nil {
		t.Fatalf("after rotation the new key alone: %v", err)
	}
	var sealed []byte
	if err := p.pool.QueryRow(ctx, "SELECT sealed FROM oauth_tokens").Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	access, _ := e.as.Issued()
	if strings.Contains(string(sealed), access[0]) {
		t.Error("the access token is stored in the clear")
	}
	for _, bad := range []string{"short", base64.StdEncoding.EncodeToString([]byte("sixteen bytes!!!"))} {
		if _, err := settings.ParseSecretKeys(bad, ""); err == nil || strings.Contains(err.Error(), bad) {
			t.Errorf("key %q: %v", bad, err)
		}
	}
}
