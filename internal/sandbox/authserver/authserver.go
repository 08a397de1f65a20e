// Package authserver is an OAuth2 authorization server for tests (RFC 6749 with
// PKCE, RFC 7636), built on github.com/go-oauth2/oauth2/v4: client credentials,
// authorization code with an approval page a browser clicks through, expiring
// access tokens, refresh-token rotation and revocation. It counts what it issues so
// tests can assert exactly one refresh. Only tests import it.
package authserver

import (
	"bytes"
	"context"
	"encoding/json"
	"html/template"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-oauth2/oauth2/v4"
	"github.com/go-oauth2/oauth2/v4/manage"
	"github.com/go-oauth2/oauth2/v4/models"
	"github.com/go-oauth2/oauth2/v4/server"
	"github.com/go-oauth2/oauth2/v4/store"
)

// Params configures a Server. AccessTTL 0 means an hour. NoExpiry leaves
// expires_in out of token replies, as Salesforce does (tokens still end when
// ExpireAccess is called). RedirectDomain is the client's registered redirect base.
// RequireScopes are scopes every authorize request must ask for (HubSpot refuses a
// public app's request without oauth). SecretInBody accepts the client's
// credentials only as client_id and client_secret in the token request's form, as
// Salesforce documents them; otherwise Basic or the form.
type Params struct {
	ClientID, ClientSecret string
	RedirectDomain         string
	AccessTTL              time.Duration
	NoExpiry               bool
	RequireScopes          []string
	SecretInBody           bool
}

// Server is a running authorization server.
type Server struct {
	*httptest.Server
	p       Params
	srv     *server.Server
	mgr     *manage.Manager
	clients *store.ClientStore

	mu       sync.Mutex
	grants   map[string]int // token requests answered 200, by grant_type
	refused  int            // token requests answered with an error
	access   []string       // every access token issued
	refresh  []string       // every refresh token issued
	down     bool           // token endpoint answers 503
	approved int            // authorize requests approved
	lastBack string         // the last redirect back to the client
}

// New starts a server; Close stops it.
func New(p Params) *Server {
	if p.AccessTTL <= 0 {
		p.AccessTTL = time.Hour
	}
	mgr := manage.NewDefaultManager()
	mgr.MustTokenStorage(store.NewMemoryTokenStore())
	clients := store.NewClientStore()
	_ = clients.Set(p.ClientID, &models.Client{ID: p.ClientID, Secret: p.ClientSecret, Domain: p.RedirectDomain})
	mgr.MapClientStorage(clients)
	ttl := p.AccessTTL
	if p.NoExpiry {
		ttl = 24 * time.Hour // the session lasts until ExpireAccess ends it
	}
	mgr.SetClientTokenCfg(&manage.Config{AccessTokenExp: ttl})
	mgr.SetAuthorizeCodeTokenCfg(&manage.Config{AccessTokenExp: ttl, RefreshTokenExp: 30 * 24 * time.Hour, IsGenerateRefresh: true})
	mgr.SetRefreshTokenCfg(&manage.RefreshingConfig{AccessTokenExp: ttl, IsGenerateRefresh: true, IsRemoveAccess: true, IsRemoveRefreshing: true})
	cfg := server.NewConfig()
	cfg.ForcePKCE = true
	cfg.AllowedCodeChallengeMethods = []oauth2.CodeChallengeMethod{oauth2.CodeChallengeS256}
	cfg.AllowedGrantTypes = []oauth2.GrantType{oauth2.AuthorizationCode, oauth2.ClientCredentials, oauth2.Refreshing}
	cfg.AllowedResponseTypes = []oauth2.ResponseType{oauth2.Code}
	srv := server.NewServer(cfg, mgr)
	srv.SetClientInfoHandler(func(r *http.Request) (string, string, error) { // Basic, or the form body
		if id, secret, err := server.ClientBasicHandler(r); err == nil && !p.SecretInBody {
			return id, secret, nil
		}
		return server.ClientFormHandler(r)
	})
	s := &Server{p: p, srv: srv, mgr: mgr, clients: clients, grants: map[string]int{}}
	srv.SetUserAuthorizationHandler(func(w http.ResponseWriter, r *http.Request) (string, error) {
		if r.Method != http.MethodPost || r.PostFormValue("approve") != "yes" {
			return "", nil // not approved yet: the handler shows the page
		}
		s.mu.Lock()
		s.approved++
		s.mu.Unlock()
		return "owner@example.com", nil
	})
	mux := http.NewServeMux()
	mux.HandleFunc("/authorize", s.authorize)
	mux.HandleFunc("POST /token", s.token)
	s.Server = httptest.NewServer(mux)
	return s
}

// TokenURL and AuthorizeURL are the endpoints to configure.
func (s *Server) TokenURL() string     { return s.URL + "/token" }
func (s *Server) AuthorizeURL() string { return s.URL + "/authorize" }

var approvalPage = template.Must(template.New("approve").Parse(`<!doctype html>
<title>Authorize</title><h1>Allow {{.Client}} to act for you?</h1>
<form method="post" action="/authorize?{{.Query}}"><input type="hidden" name="approve" value="yes">
<button type="submit" id="approve">Allow</button></form>`))

// authorize shows the approval page, then redirects with a code once approved.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	asked := strings.Fields(r.URL.Query().Get("scope"))
	for _, want := range s.p.RequireScopes {
		if !slices.Contains(asked, want) {
			http.Error(w, "invalid_scope: the request must ask for "+want, http.StatusBadRequest)
			return
		}
	}
	if r.Method == http.MethodGet {
		if _, err := s.srv.ValidationAuthorizeRequest(r); err != nil {
			http.Error(w, "invalid authorization request: "+err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = approvalPage.Execute(w, map[string]any{"Client": s.p.ClientID, "Query": template.URL(r.URL.RawQuery)})
		return
	}
	_ = r.ParseForm()
	rec := httptest.NewRecorder()
	if err := s.srv.HandleAuthorizeRequest(rec, r); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if loc := rec.Header().Get("Location"); loc != "" {
		s.mu.Lock()
		s.lastBack = loc
		s.mu.Unlock()
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// SetRedirectDomain registers the client's redirect base, for a client whose
// address is known only once it runs.
func (s *Server) SetRedirectDomain(domain string) {
	_ = s.clients.Set(s.p.ClientID, &models.Client{ID: s.p.ClientID, Secret: s.p.ClientSecret, Domain: domain})
}

// LastRedirect is the last callback URL (with code and state) sent back to the client.
func (s *Server) LastRedirect() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastBack
}

// token answers the token endpoint, recording what it issued.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down {
		http.Error(w, `{"error":"temporarily_unavailable"}`, http.StatusServiceUnavailable)
		return
	}
	rec := httptest.NewRecorder()
	_ = s.srv.HandleTokenRequest(rec, r)
	body := rec.Body.Bytes()
	var doc map[string]any
	_ = json.Unmarshal(body, &doc)
	s.mu.Lock()
	if rec.Code == http.StatusOK {
		s.grants[r.PostFormValue("grant_type")]++
		if a, ok := doc["access_token"].(string); ok {
			s.access = append(s.access, a)
		}
		if rt, ok := doc["refresh_token"].(string); ok {
			s.refresh = append(s.refresh, rt)
		}
		if s.p.NoExpiry {
			delete(doc, "expires_in")
			body, _ = json.Marshal(doc)
		}
	} else {
		s.refused++
	}
	s.mu.Unlock()
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(rec.Code)
	_, _ = w.Write(bytes.TrimSpace(body))
}

// Valid reports whether r carries a live access token: what a protected API asks.
func (s *Server) Valid(r *http.Request) bool {
	_, err := s.srv.ValidationBearerToken(r)
	return err == nil
}

// Grants returns how many tokens were issued for grant_type (client_credentials,
// authorization_code, refresh_token).
func (s *Server) Grants(grantType string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grants[grantType]
}

// Refused returns how many token requests were answered with an error.
func (s *Server) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Approved returns how many authorization requests a person approved.
func (s *Server) Approved() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.approved
}

// Issued returns every access and refresh token issued so far.
func (s *Server) Issued() (access, refresh []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.access...), append([]string(nil), s.refresh...)
}

// ExpireAccess ends every access token issued so far (a session timing out).
func (s *Server) ExpireAccess() {
	access, _ := s.Issued()
	for _, a := range access {
		_ = s.mgr.RemoveAccessToken(context.Background(), a)
	}
}

// Revoke ends every access and refresh token issued so far, as a user revoking the
// app's access would: the next refresh gets invalid_grant.
func (s *Server) Revoke() {
	access, refresh := s.Issued()
	for _, a := range access {
		_ = s.mgr.RemoveAccessToken(context.Background(), a)
	}
	for _, rt := range refresh {
		_ = s.mgr.RemoveRefreshToken(context.Background(), rt)
	}
}

// SetDown makes the token endpoint answer 503 (down) or work again.
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}
