package destination

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/settings"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// OAuth hands out a live access token for one http destination
// (docs/destinations.md, "OAuth2 destinations"): the stored one while it is fresh, else one refreshed under the
// destination's row lock so that one process refreshes at a time.
type OAuth struct {
	dest    string
	o       settings.OAuth2
	code    oauth2.Config            // authorization_code, and refresh for both grants
	cc      clientcredentials.Config // client_credentials
	tokens  Tokens
	client  *http.Client
	timeout time.Duration
	metrics *metrics.Metrics
	now     func() time.Time

	secrets *settings.Secrets // every secret the process holds, its tokens among them
}

// Tokens is the store an OAuth keeps its destination's grant in: a
// *oauthstore.TokenStore, which tests wrap to stop a process between committing a
// refreshed grant and using it.
type Tokens interface {
	// Token returns the stored grant (ledger.ErrNotConnected when there is none).
	Token(ctx context.Context, destination string) (ledger.OAuthToken, error)
	// Refresh replaces the grant with fetch's when due says so, one process at a
	// time, and commits it before returning it (see oauthstore.TokenStore.Refresh).
	Refresh(ctx context.Context, destination string, due func(ledger.OAuthToken) bool,
		fetch func(context.Context, ledger.OAuthToken) (ledger.OAuthToken, error)) (t ledger.OAuthToken, refreshed bool, err error)
	// Save stores a new grant.
	Save(ctx context.Context, destination string, t ledger.OAuthToken) error
}

// UseOAuth gives every http destination of cfg configured with oauth2 its OAuth,
// storing grants in tokens and counting refreshes in metrics (may be nil).
func UseOAuth(clients map[string]ledger.DestinationClient, cfg *settings.Config, tokens Tokens, metrics *metrics.Metrics) {
	for _, d := range cfg.Destinations {
		h, ok := clients[d.Name].(*HTTP)
		if !ok || d.Auth.OAuth2 == nil {
			continue
		}
		h.oauth = NewOAuth(d, tokens, h.client, metrics)
		h.oauth.secrets = h.secrets
	}
}

// NewOAuth returns the OAuth of destination d, sending token requests through
// client.
func NewOAuth(d settings.Destination, tokens Tokens, client *http.Client, metrics *metrics.Metrics) *OAuth {
	o := *d.Auth.OAuth2
	// Never auto-detected: a refused refresh retried the other way would be
	// reported with the second refusal's reason (invalid_client), not its own.
	style := oauth2.AuthStyleInHeader
	if o.ClientAuth == settings.ClientAuthBody {
		style = oauth2.AuthStyleInParams
	}
	endpoint := oauth2.Endpoint{AuthURL: o.AuthorizeURL, TokenURL: o.TokenURL, AuthStyle: style}
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = settings.DefaultTimeout
	}
	secrets := &settings.Secrets{}
	secrets.AddAuth(d.Auth)
	return &OAuth{dest: d.Name, o: o, tokens: tokens, client: client, timeout: timeout, metrics: metrics, now: time.Now,
		secrets: secrets,
		code:    oauth2.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, Endpoint: endpoint, Scopes: o.Scopes},
		cc: clientcredentials.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret, TokenURL: o.TokenURL,
			Scopes: o.Scopes, AuthStyle: style}}
}

// refreshError is a refresh that did not produce a token. Refused means the token
// endpoint said no (invalid_grant, a revoked grant, the client refused): only a
// person reconnecting can recover. Otherwise it was down or unreachable.
type refreshError struct {
	refused bool
	detail  string
}

func (e *refreshError) Error() string { return e.detail }

// Access returns an access token to send now, refreshing it first when it is due.
func (a *OAuth) Access(ctx context.Context) (string, error) {
	if t, err := a.tokens.Token(ctx, a.dest); err == nil && !t.Due(a.now()) {
		a.remember(t.Access, t.Refresh)
		return t.Access, nil
	}
	return a.refresh(ctx, func(t ledger.OAuthToken) bool { return t.Due(a.now()) })
}

// RefreshAfter refreshes once after the destination refused rejected, unless
// another call or process already replaced it meanwhile.
func (a *OAuth) RefreshAfter(ctx context.Context, rejected string) (string, error) {
	return a.refresh(ctx, func(t ledger.OAuthToken) bool { return t.Access == "" || t.Access == rejected })
}

func (a *OAuth) refresh(ctx context.Context, due func(ledger.OAuthToken) bool) (string, error) {
	t, refreshed, err := a.tokens.Refresh(ctx, a.dest, due, a.fetch)
	var re *refreshError
	switch {
	case errors.As(err, &re) && re.refused:
		a.metrics.OAuthRefresh(a.dest, "refused")
		return "", err
	case errors.As(err, &re):
		a.metrics.OAuthRefresh(a.dest, "unavailable")
		return "", err
	case err != nil:
		return "", &refreshError{detail: "the stored credentials could not be read: " + err.Error()}
	}
	if refreshed {
		a.metrics.OAuthRefresh(a.dest, "refreshed")
	}
	a.remember(t.Access, t.Refresh)
	return t.Access, nil
}

// fetch asks the token endpoint for a new grant from cur: the refresh token when
// there is one, else (client_credentials) the client's own credentials.
func (a *OAuth) fetch(ctx context.Context, cur ledger.OAuthToken) (ledger.OAuthToken, error) {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	ctx = context.WithValue(ctx, oauth2.HTTPClient, a.client)
	var tok *oauth2.Token
	var err error
	switch {
	case cur.Refresh != "":
		tok, err = a.code.TokenSource(ctx, &oauth2.Token{RefreshToken: cur.Refresh}).Token()
	case a.o.Grant == settings.GrantClientCredentials:
		tok, err = a.cc.Token(ctx)
	default:
		return ledger.OAuthToken{}, &refreshError{refused: true, detail: "no refresh token is stored: " + ledger.ErrNotConnected.Error()}
	}
	if err != nil {
		return ledger.OAuthToken{}, a.classify("refresh", err)
	}
	return a.grant(tok), nil
}

func (a *OAuth) grant(tok *oauth2.Token) ledger.OAuthToken {
	return ledger.OAuthToken{Access: tok.AccessToken, Refresh: tok.RefreshToken, Type: tok.TokenType,
		Expiry: tok.Expiry, ObtainedAt: a.now()}
}

// classify tells a refusal from an outage. The endpoint's error code and
// description are kept; its reply body and the request are not, since either may
// quote a credential.
func (a *OAuth) classify(what string, err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		s := re.Response.StatusCode
		code := re.ErrorCode
		if code == "" {
			code = fmt.Sprintf("HTTP %d", s)
		}
		detail := "the token endpoint refused the " + what + ": " + code
		if d := a.scrub(re.ErrorDescription); d != "" {
			detail += " (" + replyExcerpt([]byte(d)) + ")"
		}
		if s >= 400 && s < 500 && s != http.StatusTooManyRequests && s != http.StatusRequestTimeout {
			return &refreshError{refused: true, detail: detail}
		}
		return &refreshError{detail: fmt.Sprintf("the token endpoint is unavailable (HTTP %d)", s)}
	}
	return &refreshError{detail: "the token endpoint could not be reached: " + a.scrub(err.Error())}
}

// AuthorizeURL is where an admin's browser goes to grant access, with state and
// the PKCE challenge of verifier (S256).
func (a *OAuth) AuthorizeURL(redirectURL, state, verifier string) string {
	c := a.code
	c.RedirectURL = redirectURL
	return c.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier))
}

// Exchange trades the code from the callback for a grant and stores it.
func (a *OAuth) Exchange(ctx context.Context, redirectURL, code, verifier string) error {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	ctx = context.WithValue(ctx, oauth2.HTTPClient, a.client)
	c := a.code
	c.RedirectURL = redirectURL
	tok, err := c.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return a.classify("code exchange", err)
	}
	t := a.grant(tok)
	if err := a.tokens.Save(ctx, a.dest, t); err != nil {
		return err
	}
	a.metrics.OAuthRefresh(a.dest, "connected")
	a.remember(t.Access, t.Refresh)
	return nil
}

// Grant says which grant this destination uses.
func (a *OAuth) Grant() string { return a.o.Grant }

// remember adds the tokens of a grant to the secrets scrubbed from any text.
func (a *OAuth) remember(toks ...string) { a.secrets.Hold(toks...) }

// scrub removes every secret the process holds from s.
func (a *OAuth) scrub(s string) string {
	if a == nil {
		return s
	}
	return a.secrets.Scrub(s)
}

type accessKey struct{}

func withAccess(ctx context.Context, tok string) context.Context {
	return context.WithValue(ctx, accessKey{}, tok)
}

func accessFrom(ctx context.Context) string {
	s, _ := ctx.Value(accessKey{}).(string)
	return s
}
