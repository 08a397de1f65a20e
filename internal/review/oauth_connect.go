package review

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/url"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
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
func (r *Review) StartConnect(actor ledger.Actor, name string) (ConnectStart, error) {
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
func (r *Review) FinishConnect(ctx context.Context, actor ledger.Actor, name, code, verifier string) (int, error) {
	c, err := r.connector(actor, name)
	if err != nil {
		return 0, err
	}
	if code == "" {
		return 0, ledger.Errorf(ledger.EINVALID, "The provider sent no authorization code.")
	}
	if err := c.Exchange(ctx, r.callbackURL(name), code, verifier); err != nil {
		return 0, &ledger.Error{Code: ledger.ECONFLICT, Message: "The provider did not grant access: " + err.Error(), Err: err}
	}
	return r.release(ctx, actor, name)
}

func (r *Review) connector(actor ledger.Actor, name string) (Connector, error) {
	if actor.Role != settings.RoleAdmin {
		return nil, ledger.Errorf(ledger.EFORBIDDEN, "Only admins can reconnect destinations.")
	}
	c, ok := r.clients[name].(Connector)
	if !ok || !c.Connects() {
		return nil, ledger.Errorf(ledger.ENOTFOUND, "No destination named %q connects through the browser.", name)
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
