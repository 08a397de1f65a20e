package ledger

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oncehook/oncehook/db"
)

// Connector is a destination client that is connected through an admin's browser
// (the OAuth2 authorization_code grant).
type Connector interface {
	// Connects reports whether this destination uses the browser flow.
	Connects() bool
	// AuthorizeURL is where the admin's browser is sent, with state and the PKCE
	// challenge of verifier.
	AuthorizeURL(redirectURL, state, verifier string) string
	// Exchange trades the callback's code for a grant and stores it.
	Exchange(ctx context.Context, redirectURL, code, verifier string) error
}

// OpenTokens returns the token store of cfg's OAuth2 destinations, after checking
// at start that ONCEHOOK_SECRET_KEY opens every stored grant (re-sealing those
// still sealed with ONCEHOOK_SECRET_KEY_PREVIOUS), and marks each
// authorization_code destination without a grant disconnected until its first
// Reconnect. A wrong key is an error here, at start, not at the first call.
func OpenTokens(ctx context.Context, pool *pgxpool.Pool, cfg *Config) (*TokenStore, error) {
	s := NewTokenStore(pool, cfg.SecretKeys)
	if !cfg.SecretKeys.Set() {
		return s, nil
	}
	status, err := s.Open(ctx)
	if err != nil {
		return nil, fmt.Errorf("open the stored oauth2 grants: %w", err)
	}
	q := db.New(pool)
	for _, d := range cfg.Destinations {
		if d.Auth.OAuth2 == nil || d.Auth.OAuth2.Grant != GrantAuthorizationCode || status[d.Name].Connected {
			continue
		}
		if err := q.DestinationAwaitConnection(ctx, db.DestinationAwaitConnectionParams{Name: d.Name,
			Reason: "not connected yet: an admin connects it with Reconnect"}); err != nil {
			return nil, fmt.Errorf("mark %s as waiting for its first connection: %w", d.Name, err)
		}
	}
	return s, nil
}

// Connects reports whether the destination called name is connected through the
// browser (Reconnect then starts the authorization-code flow).
func (r *Review) Connects(name string) bool {
	c, ok := r.clients[name].(Connector)
	return ok && c.Connects()
}

// ConnectStart is what StartConnect hands the web layer: where to send the browser,
// and the state and verifier to keep in the admin's session for the callback.
type ConnectStart struct {
	URL, State, Verifier string
}

// StartConnect begins the authorization-code flow for destination name: a fresh
// state and PKCE verifier, and the authorize URL. Admins only.
func (r *Review) StartConnect(actor Actor, name string) (ConnectStart, error) {
	c, err := r.connector(actor, name)
	if err != nil {
		return ConnectStart{}, err
	}
	st := ConnectStart{State: randomToken(), Verifier: randomToken()}
	st.URL = c.AuthorizeURL(r.callbackURL(name), st.State, st.Verifier)
	return st, nil
}

// FinishConnect completes the flow after the callback's state was checked: the
// code is exchanged for a grant, which is stored, and the destination is marked
// connected with its held actions released. Admins only.
func (r *Review) FinishConnect(ctx context.Context, actor Actor, name, code, verifier string) (int, error) {
	c, err := r.connector(actor, name)
	if err != nil {
		return 0, err
	}
	if code == "" {
		return 0, Errorf(EINVALID, "The provider sent no authorization code.")
	}
	if err := c.Exchange(ctx, r.callbackURL(name), code, verifier); err != nil {
		return 0, &Error{Code: ECONFLICT, Message: "The provider did not grant access: " + err.Error(), Err: err}
	}
	return r.release(ctx, actor, name)
}

func (r *Review) connector(actor Actor, name string) (Connector, error) {
	if actor.Role != RoleAdmin {
		return nil, Errorf(EFORBIDDEN, "Only admins can reconnect destinations.")
	}
	c, ok := r.clients[name].(Connector)
	if !ok || !c.Connects() {
		return nil, Errorf(ENOTFOUND, "No destination named %q connects through the browser.", name)
	}
	return c, nil
}

// callbackURL is base_url/destinations/{name}/oauth/callback.
func (r *Review) callbackURL(name string) string {
	return r.cfg.BaseURL + "/destinations/" + url.PathEscape(name) + "/oauth/callback"
}

// randomToken is 32 random bytes, base64url: a state, or a PKCE verifier (43
// characters, as RFC 7636 asks).
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails: the runtime stops the program first
	return base64.RawURLEncoding.EncodeToString(b)
}
