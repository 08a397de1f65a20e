package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/labstack/echo/v4"
	"golang.org/x/oauth2"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/views"
)

// Session keys of a sign-in through the identity provider in progress, taken
// (and so spent) by the first callback that arrives.
const (
	sessOIDCState    = "oidc_state"
	sessOIDCNonce    = "oidc_nonce"
	sessOIDCVerifier = "oidc_verifier"
	sessOIDCNext     = "oidc_next"
)

// oidcTimeout bounds each call to the identity provider (discovery, keys, token).
const oidcTimeout = 15 * time.Second

// oidcClient is the relying party of the configured identity provider. Its
// discovery document is read at the first sign-in, not at start, so oncehook
// starts while the provider is down; a failed discovery is tried again next time.
type oidcClient struct {
	cfg      *settings.OIDC
	redirect string
	http     *http.Client

	mu       sync.Mutex
	oauth    *oauth2.Config
	verifier *oidc.IDTokenVerifier
}

func newOIDCClient(cfg *settings.OIDC, baseURL string) *oidcClient {
	if cfg == nil {
		return nil
	}
	return &oidcClient{cfg: cfg, redirect: baseURL + settings.OIDCCallbackPath, http: &http.Client{Timeout: oidcTimeout}}
}

// context carries the client with a timeout to go-oidc and x/oauth2.
func (o *oidcClient) context(ctx context.Context) context.Context {
	return context.WithValue(oidc.ClientContext(ctx, o.http), oauth2.HTTPClient, o.http)
}

// discover returns the flow's settings and the ID token verifier: issuer,
// audience (the client id), expiry and signature against the provider's keys.
func (o *oidcClient) discover(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.oauth != nil {
		return o.oauth, o.verifier, nil
	}
	// The key set lives past this request: it must not end with it.
	p, err := oidc.NewProvider(o.context(context.WithoutCancel(ctx)), o.cfg.Issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("discover %s: %w", o.cfg.Issuer, err)
	}
	o.oauth = &oauth2.Config{ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: o.redirect, Scopes: append([]string{oidc.ScopeOpenID, "email", "profile"}, o.cfg.Scopes...)}
	o.verifier = p.Verifier(&oidc.Config{ClientID: o.cfg.ClientID})
	return o.oauth, o.verifier, nil
}

// oidcStart serves GET /login/oidc: it sends the browser to the identity
// provider with a fresh state, nonce and PKCE challenge, kept in the session.
func (s *Server) oidcStart(c echo.Context) error {
	if s.oidc == nil {
		return ledger.Errorf(ledger.ENOTFOUND, "Sign-in through an identity provider is not set up here.")
	}
	ctx := c.Request().Context()
	flow, _, err := s.oidc.discover(ctx)
	if err != nil {
		s.logger.ErrorContext(ctx, "oidc discovery", "err", err)
		return s.refuseSignIn(c, http.StatusServiceUnavailable,
			fmt.Sprintf("%s cannot be reached just now; try again shortly.", s.oidc.cfg.Name))
	}
	state, nonce, verifier := rand.Text(), rand.Text(), oauth2.GenerateVerifier()
	s.sessions.Put(ctx, sessOIDCState, state)
	s.sessions.Put(ctx, sessOIDCNonce, nonce)
	s.sessions.Put(ctx, sessOIDCVerifier, verifier)
	s.sessions.Put(ctx, sessOIDCNext, safeNext(c.QueryParam("next")))
	return c.Redirect(http.StatusSeeOther, flow.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)))
}

// refuseSignIn shows the sign-in page with why the sign-in was refused.
func (s *Server) refuseSignIn(c echo.Context, status int, msg string) error {
	return s.render(c, status, views.Login(s.layout(c, "Sign in", ""), s.loginPage(views.LoginPage{Error: msg})))
}

// loginPage adds the sign-in choices the config allows.
func (s *Server) loginPage(p views.LoginPage) views.LoginPage {
	p.NoPasswords = s.cfg.SignIn.PasswordsOff
	if s.oidc != nil {
		p.Provider = s.oidc.cfg.Name
	}
	return p
}

// signInError turns a failed sign-in into its status and plain words.
func signInError(err error) (int, string, bool) {
	switch code := ledger.ErrorCode(err); code {
	case ledger.EUNAUTHORIZED, ledger.EFORBIDDEN, ledger.ECONFLICT, ledger.ETHROTTLED:
		return statusOf[code], ledger.ErrorMessage(err), true
	}
	return 0, "", false
}

// startSession signs u in: the session token is renewed, so a token planted or
// seen before signing in is worth nothing after it, and so is the CSRF token.
func (s *Server) startSession(c echo.Context, u ledger.User, next string) error {
	ctx := c.Request().Context()
	if err := s.sessions.RenewToken(ctx); err != nil {
		return err
	}
	s.sessions.Put(ctx, sessUserID, u.ID)
	s.sessions.Put(ctx, sessCSRF, newCSRFToken())
	if _, err := accounts.DeleteExpiredSessions(ctx, s.pool); err != nil {
		s.logger.WarnContext(ctx, "sweep sessions", "err", err) // housekeeping only
	}
	return c.Redirect(http.StatusSeeOther, safeNext(next))
}

// tokenRefusal words a refused ID token for the person; the log gets the detail.
func tokenRefusal(name string, err error) string {
	if expired := (*oidc.TokenExpiredError)(nil); errors.As(err, &expired) {
		return fmt.Sprintf("%s's answer had expired before it arrived. Sign in again.", name)
	}
	return fmt.Sprintf("%s's answer did not pass the checks (issuer, audience, signature), so nobody was signed in. Sign in again, or ask an admin to check the sign-in settings.", name)
}

// oidcCallback serves GET /login/oidc/callback. Only the state this session was
// given is accepted, and only once; the code is exchanged with the PKCE
// verifier; the ID token is verified and must carry this session's nonce.
// Nobody is stored or signed in unless all of that holds.
func (s *Server) oidcCallback(c echo.Context) error {
	if s.oidc == nil {
		return ledger.Errorf(ledger.ENOTFOUND, "Sign-in through an identity provider is not set up here.")
	}
	ctx := c.Request().Context()
	state, nonce := s.sessions.PopString(ctx, sessOIDCState), s.sessions.PopString(ctx, sessOIDCNonce)
	verifier, next := s.sessions.PopString(ctx, sessOIDCVerifier), s.sessions.PopString(ctx, sessOIDCNext)
	if state == "" || subtle.ConstantTimeCompare([]byte(c.QueryParam("state")), []byte(state)) != 1 {
		return s.refuseSignIn(c, http.StatusBadRequest,
			"This sign-in was not started here, or was already used, so nobody was signed in. Sign in again.")
	}
	if e := c.QueryParam("error"); e != "" {
		return s.refuseSignIn(c, http.StatusUnauthorized,
			fmt.Sprintf("%s did not sign you in (%s).", s.oidc.cfg.Name, firstWords(e)))
	}
	id, err := s.oidcIdentity(ctx, c.QueryParam("code"), verifier, nonce)
	var u ledger.User
	if err == nil {
		u, err = accounts.SignInOIDC(ctx, s.pool, s.oidc.cfg, id)
	}
	if status, msg, ok := signInError(err); ok {
		s.logger.WarnContext(ctx, "identity provider sign-in refused", "err", err, "subject", id.Subject)
		return s.refuseSignIn(c, status, msg)
	}
	if err != nil {
		return err
	}
	return s.startSession(c, u, next)
}

// refused is a sign-in refused in words for the person, with the cause for the log.
func refused(msg string, err error) (accounts.Identity, error) {
	return accounts.Identity{}, &ledger.Error{Code: ledger.EUNAUTHORIZED, Message: msg, Err: err}
}

// oidcIdentity exchanges the code and returns who the verified ID token names.
func (s *Server) oidcIdentity(ctx context.Context, code, verifier, nonce string) (accounts.Identity, error) {
	name := s.oidc.cfg.Name
	flow, check, err := s.oidc.discover(ctx)
	if err != nil {
		return accounts.Identity{}, &ledger.Error{Code: ledger.EUNAVAILABLE,
			Message: fmt.Sprintf("%s cannot be reached just now; try again shortly.", name), Err: err}
	}
	octx := s.oidc.context(ctx)
	tok, err := flow.Exchange(octx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return refused(fmt.Sprintf("%s did not accept the sign-in code, so nobody was signed in. Sign in again.", name), err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return refused(fmt.Sprintf("%s sent no ID token, so nobody was signed in. Ask an admin to check the sign-in settings.", name),
			errors.New("no id_token in the token response"))
	}
	idt, err := check.Verify(octx, raw)
	if err != nil {
		return refused(tokenRefusal(name, err), err)
	}
	if nonce == "" || subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		return refused(fmt.Sprintf("%s's answer belongs to another sign-in (its nonce differs), so nobody was signed in. Sign in again.", name),
			errors.New("nonce mismatch"))
	}
	return s.oidc.identity(idt)
}

// identity reads the subject, the email and the configured claim's values. An
// email the provider says it has not verified names nobody.
func (o *oidcClient) identity(idt *oidc.IDToken) (accounts.Identity, error) {
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return refused(fmt.Sprintf("%s's answer could not be read. Sign in again.", o.cfg.Name), err)
	}
	email, _ := claims["email"].(string)
	if verified, ok := claims["email_verified"].(bool); ok && !verified {
		return refused(fmt.Sprintf("%s has not verified the email %s, so oncehook cannot name you by it.", o.cfg.Name, email),
			errors.New("email_verified is false"))
	}
	return accounts.Identity{Issuer: idt.Issuer, Subject: idt.Subject, Email: email, Values: claimValues(claims[o.cfg.Claim])}, nil
}

// claimValues is a claim's strings: a list of them, or one.
func claimValues(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
