package ledger_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/internal/destination"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/oauthstore"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/sandbox/authserver"
	"github.com/oncehook/oncehook/internal/settings"
)

// clients are the world's destination clients, OAuth2 wired as serve wires it.
func (w *world) clients() map[string]ledger.DestinationClient {
	w.t.Helper()
	c := destination.NewClients(w.cfg)
	if w.cfg.SecretKeys.Set() {
		tokens, err := oauthstore.OpenTokens(context.Background(), w.pool, w.cfg)
		if err != nil {
			w.t.Fatal(err)
		}
		destination.UseOAuth(c, w.cfg, tokens, w.metrics)
	}
	return c
}

type oauthRecipe struct {
	recipe
	tokenURL, authorizeURL string // the provider's, replaced by the test server's
	clientEnv              string // prefix of the _CLIENT_ID and _CLIENT_SECRET variables
	noExpiry               bool   // the provider gives no expires_in (Salesforce)
	requireScopes          []string
	secretInBody           bool // the token endpoint reads the client secret from the form only
}

var oauthRecipes = []oauthRecipe{
	{recipe: recipe{file: "salesforce-oauth.yaml", origin: "https://acme.my.salesforce.com",
		newSandbox: func(string) apiSandbox { return sandbox.NewSalesforce("") }},
		tokenURL:     "https://login.salesforce.com/services/oauth2/token",
		authorizeURL: "https://login.salesforce.com/services/oauth2/authorize", clientEnv: "SALESFORCE", noExpiry: true,
		secretInBody: true},
	{recipe: recipe{file: "hubspot-oauth.yaml", origin: "https://api.hubapi.com",
		newSandbox: func(string) apiSandbox { return sandbox.NewHubSpot("", "oncehook_ref", true) }},
		tokenURL: "https://api.hubapi.com/oauth/v1/token", authorizeURL: "https://app.hubspot.com/oauth/authorize", clientEnv: "HUBSPOT",
		requireScopes: []string{"oauth"}}, // every authorize request of a public app
}

// TestRecipesOAuth runs the OAuth2 recipes against their API's sandbox and an
// authorization server: the first connection, a create, an access token that ends
// (refreshed before or after the provider's 401), and a revoked grant that holds
// the work until the next connection. One record per operation throughout.
func TestRecipesOAuth(t *testing.T) {
	t.Parallel()
	for _, rc := range oauthRecipes {
		t.Run(strings.TrimSuffix(rc.file, ".yaml"), func(t *testing.T) {
			t.Parallel()
			testOAuthRecipe(t, rc)
		})
	}
}

func testOAuthRecipe(t *testing.T, rc oauthRecipe) {
	const clientID, secret = "recipe-client", "recipe-client-secret-41ad"
	as := authserver.New(authserver.Params{ClientID: clientID, ClientSecret: secret, NoExpiry: rc.noExpiry,
		RedirectDomain: "http://127.0.0.1:8080", RequireScopes: rc.requireScopes, SecretInBody: rc.secretInBody})
	t.Cleanup(as.Close)
	api := rc.newSandbox("")
	api.(interface {
		SetAuthorize(func(*http.Request) bool)
	}).SetAuthorize(as.Valid)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	yaml := recipeYAML(t, rc.recipe, srv.URL)
	// (recipeYAML pointed every URL of the API's origin at its sandbox already.)
	for from, to := range map[string]string{rc.tokenURL: as.TokenURL(), rc.authorizeURL: as.AuthorizeURL()} {
		yaml = strings.ReplaceAll(yaml, strings.ReplaceAll(from, rc.origin, srv.URL), to)
	}
	env := map[string]string{rc.clientEnv + "_CLIENT_ID": clientID, rc.clientEnv + "_CLIENT_SECRET": secret,
		settings.SecretKeyEnv: "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}
	w := newConfigWorld(t, rc.file, yaml, env, true, nil)
	name, dest := w.cfg.Actions[0].Name, w.cfg.Destinations[0].Name

	// Before the first connection the work is held.
	w.deliver(checkout{eventID: "evt_1", enquiry: "enq_1", amount: 4200})
	w.waitFor(name, "enq_1", ledger.StateHeld)
	connect := func() {
		t.Helper()
		h := w.clients()[dest].(*destination.HTTP)
		redirect := "http://127.0.0.1:8080/destinations/" + dest + "/oauth/callback"
		u, _ := url.Parse(h.AuthorizeURL(redirect, "state-1", "verifier-0123456789-0123456789-0123456789-abc"))
		noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := noRedirect.PostForm(as.URL+"/authorize?"+u.RawQuery, url.Values{"approve": {"yes"}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusFound {
			t.Fatalf("authorize answered %d, want a redirect back with a code", res.StatusCode)
		}
		back, _ := url.Parse(res.Header.Get("Location"))
		if err := h.Exchange(context.Background(), redirect, back.Query().Get("code"), "verifier-0123456789-0123456789-0123456789-abc"); err != nil {
			t.Fatalf("exchange: %v", err)
		}
		if status, body := w.api(w.admin, "POST", "/destinations/"+dest+"/reconnect", nil); status != http.StatusOK {
			t.Fatalf("reconnect: %d %v", status, body)
		}
	}
	connect()
	first := w.waitFor(name, "enq_1", ledger.StateConfirmed)
	if n := api.CountRef(first.OperationKey); n != 1 {
		t.Fatalf("enq_1: %d records, want 1", n)
	}

	// The access token ends early; the next call refreshes it once and goes through.
	as.ExpireAccess()
	w.deliver(checkout{eventID: "evt_2", enquiry: "enq_2", amount: 100})
	second := w.waitFor(name, "enq_2", ledger.StateConfirmed)
	if n := api.CountRef(second.OperationKey); n != 1 {
		t.Errorf("enq_2: %d records, want 1", n)
	}
	if n := as.Grants("refresh_token"); n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}
	if d := w.detail(second.ID); len(d["attempts"].([]any)) != 1 {
		t.Errorf("the refreshed call has attempts %v, want one", d["attempts"])
	}

	// The grant is revoked: held until the next connection, then released.
	as.Revoke()
	w.deliver(checkout{eventID: "evt_3", enquiry: "enq_3", amount: 100})
	held := w.waitFor(name, "enq_3", ledger.StateHeld)
	if !strings.Contains(held.Reason, "credential refresh cannot recover access") {
		t.Errorf("held with %q", held.Reason)
	}
	connect()
	third := w.waitFor(name, "enq_3", ledger.StateConfirmed)
	if n := api.CountRef(third.OperationKey); n != 1 {
		t.Errorf("enq_3: %d records, want 1", n)
	}
	if n := api.Len(); n != 3 {
		t.Errorf("%d records for 3 operations", n)
	}
}
