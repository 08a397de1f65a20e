package provider

import (
	"net/http"
	"strconv"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// VerifyParams is the input of Verify.
type VerifyParams struct {
	Provider  string
	Secrets   []string // every live secret; any one may sign (rotation)
	Tolerance time.Duration
	Now       time.Time
	Header    http.Header
	Body      []byte // the raw bytes as received
	// Spec describes the scheme (a source's, as the config loader built it); when
	// nil, the preset named by Provider is used.
	Spec   *settings.VerifySpec
	Method string // the request method, for schemes that sign it
	Query  string // the raw query string as received, for schemes that sign the URL
}

// Verify checks that p.Body was signed by p.Provider with one of p.Secrets and returns
// what the request says about itself. The signature is checked on the raw bytes before
// anything is read from the body, except where the signature itself is in the body
// (Mailgun), which is then only checked to be JSON and scanned for it.
//
// Errors are *Error values:
//   - EUNAUTHORIZED: the signature header is missing or malformed, no configured secret
//     produced it, no secret is configured at all, or the signed timestamp is further
//     than p.Tolerance from p.Now (either direction; a zero tolerance skips the check).
//   - EINVALID: the provider is unknown, or the request is properly signed but carries no
//     delivery id or its body is not a JSON object (or, for the schemes that allow it,
//     a JSON array).
//
// A verified endpoint handshake (Slack's url_verification, Zoom's
// endpoint.url_validation, Discord's PING) comes back as a Delivery whose Answer is
// set and nothing else: it is to be answered, never stored.
//
// Messages are plain sentences that never contain a secret or an expected signature.
// A zero p.Now means the current time.
func Verify(p VerifyParams) (ledger.Delivery, error) {
	if p.Spec != nil {
		return verifySpec(p, p.Spec)
	}
	if spec, ok := built[p.Provider]; ok {
		return verifySpec(p, spec)
	}
	return ledger.Delivery{}, ledger.Errorf(ledger.EINVALID, "unknown provider %q", p.Provider)
}

func errSignature(format string, args ...any) *ledger.Error {
	return ledger.Errorf(ledger.EUNAUTHORIZED, format, args...)
}

// checkTolerance refuses a signed timestamp too far in the past (a replay) or in the
// future (a clock far off, or a signature minted to be replayed later).
func checkTolerance(signed, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		return nil
	}
	// Sub saturates instead of overflowing, so absurd timestamps stay refused.
	if d := now.Sub(signed); d > tolerance || d < -tolerance {
		return errSignature("timestamp outside the %s tolerance", tolerance)
	}
	return nil
}

func verifyNow(p VerifyParams) time.Time {
	if p.Now.IsZero() {
		return time.Now()
	}
	return p.Now
}

// parseUnixSeconds accepts plain decimal digits only: a sign or spaces would let two
// different strings name the same instant, and the string itself is what is signed.
func parseUnixSeconds(s string) (time.Time, bool) {
	if s == "" || len(s) > 18 {
		return time.Time{}, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return time.Time{}, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(n, 0).UTC(), true
}

// keepHeaders copies the named identity headers that are present, keyed by canonical
// name; nil when there are none.
func keepHeaders(h http.Header, names ...string) map[string]string {
	var kept map[string]string
	for _, name := range names {
		if v := h.Get(name); v != "" {
			if kept == nil {
				kept = make(map[string]string, len(names))
			}
			kept[http.CanonicalHeaderKey(name)] = v
		}
	}
	return kept
}
