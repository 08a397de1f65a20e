package destination

import (
	"context"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

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
	return h.oauth != nil && h.oauth.Grant() == settings.GrantAuthorizationCode
}

// AuthorizeURL is the authorize URL for an admin's browser (see OAuth.AuthorizeURL).
func (h *HTTP) AuthorizeURL(redirectURL, state, verifier string) string {
	return h.oauth.AuthorizeURL(redirectURL, state, verifier)
}

// Exchange stores the grant the callback's code is worth (see OAuth.Exchange).
func (h *HTTP) Exchange(ctx context.Context, redirectURL, code, verifier string) error {
	return h.oauth.Exchange(ctx, redirectURL, code, verifier)
}
