package destination

import (
	"context"
	"net/http"

	"github.com/oncehook/oncehook/internal/ledger"
)

// Perform sends the create request once (see performOnce). With OAuth2 it first
// gets a live access token; a refusal (401, 403, or an errors rule meaning
// unauthorized) then means the token ended early (a provider such as Salesforce
// gives no expiry), and since a refusal performed nothing the token
// is refreshed once and the same call, with the same key, is sent once more, all
// within this one attempt. Only a refresh the token endpoint refuses, or a fresh
// token refused again, is "credentials refused" (held); a token endpoint that is
// down is a temporary failure before anything was sent.
func (h *HTTP) Perform(ctx context.Context, c ledger.Call) ledger.Outcome {
	if h.oauth == nil {
		return h.performOnce(ctx, c)
	}
	tok, err := h.oauth.Access(ctx)
	if err != nil {
		return refreshOutcome(err)
	}
	out := h.performOnce(withAccess(ctx, tok), c)
	if out.Observed != ledger.ObsUnauthorized { // 401, 403, or an errors rule meaning unauthorized
		return out
	}
	if tok, err = h.oauth.RefreshAfter(ctx, tok); err != nil {
		return refreshOutcome(err)
	}
	return h.performOnce(withAccess(ctx, tok), c)
}

// send is sendOnce with the OAuth2 access token, refreshed once after a 401.
func (h *HTTP) send(ctx context.Context, method, target string, body []byte) (int, []byte, error) {
	if h.oauth == nil {
		return h.sendOnce(ctx, method, target, body)
	}
	tok, err := h.oauth.Access(ctx)
	if err != nil {
		return 0, nil, err
	}
	status, reply, err := h.sendOnce(withAccess(ctx, tok), method, target, body)
	if err != nil || status != http.StatusUnauthorized {
		return status, reply, err
	}
	if tok, err = h.oauth.RefreshAfter(ctx, tok); err != nil {
		return 0, nil, err
	}
	return h.sendOnce(withAccess(ctx, tok), method, target, body)
}

// refreshOutcome is the decision table's reading of a refresh that failed before
// the call was sent.
func refreshOutcome(err error) ledger.Outcome {
	re, ok := err.(*refreshError)
	if ok && re.refused {
		return ledger.Outcome{Observed: ledger.ObsUnauthorized,
			Detail: "credential refresh cannot recover access: " + re.detail + "; the owner reconnects it on /destinations"}
	}
	return ledger.Outcome{Observed: ledger.ObsThrottled, Detail: "not sent: " + err.Error()}
}

// OAuth returns the destination's OAuth2 client, nil without auth.oauth2.
func (h *HTTP) OAuth() *OAuth { return h.oauth }

// Connects reports whether the destination uses the authorization_code grant.
func (h *HTTP) Connects() bool {
	return h.oauth != nil && h.oauth.Grant() == ledger.GrantAuthorizationCode
}

// AuthorizeURL is the authorize URL for an admin's browser (see OAuth.AuthorizeURL).
func (h *HTTP) AuthorizeURL(redirectURL, state, verifier string) string {
	return h.oauth.AuthorizeURL(redirectURL, state, verifier)
}

// Exchange stores the grant the callback's code is worth (see OAuth.Exchange).
func (h *HTTP) Exchange(ctx context.Context, redirectURL, code, verifier string) error {
	return h.oauth.Exchange(ctx, redirectURL, code, verifier)
}
