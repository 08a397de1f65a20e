package ledger

import (
	"errors"
	"fmt"
	"time"

	"github.com/oncehook/oncehook/internal/settings"
)

// OAuthToken is a destination's grant as stored. It never prints its tokens.
type OAuthToken struct {
	Access     string
	Refresh    string
	Type       string
	Expiry     time.Time // zero: the provider gave no expiry
	ObtainedAt time.Time
}

// Format prints when the token expires, never the token.
func (t OAuthToken) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "{access:%s refresh:%s expiry:%s}", settings.Redact(t.Access), settings.Redact(t.Refresh), t.Expiry.UTC().Format(time.RFC3339))
}

// Due reports whether t should be refreshed before use at now: it is missing, or
// it expires within the last quarter of its life (at most a minute early), so calls
// rarely meet an expired token and a short-lived one is not refreshed on every use.
func (t OAuthToken) Due(now time.Time) bool {
	if t.Access == "" {
		return true
	}
	if t.Expiry.IsZero() {
		return false // no expiry given: refreshed once after a 401 instead
	}
	early := min(time.Minute, t.Expiry.Sub(t.ObtainedAt)/4)
	return !now.Before(t.Expiry.Add(-early))
}

// ErrNotConnected means the destination has no stored grant yet.
var ErrNotConnected = errors.New("not connected yet: an admin connects it with Reconnect on /destinations")
