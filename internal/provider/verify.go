package provider

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/oncehook/oncehook/internal/jsonscan"
	"github.com/oncehook/oncehook/internal/ledger"
)

// VerifyParams is the input of Verify.
type VerifyParams struct {
	Provider  string
	Secrets   []string // every live secret; any one may sign (rotation)
	Tolerance time.Duration
	Now       time.Time
	Header    http.Header
	Body      []byte // the raw bytes as received
}

// Verify checks that p.Body was signed by p.Provider with one of p.Secrets and returns
// what the request says about itself. The signature is checked on the raw bytes before
// anything is parsed, so an unsigned body is never even decoded.
//
// Errors are *Error values:
//   - EUNAUTHORIZED: the signature header is missing or malformed, no configured secret
//     produced it, no secret is configured at all, or the signed timestamp is further
//     than p.Tolerance from p.Now (either direction; a zero tolerance skips the check).
//   - EINVALID: the provider is unknown, or the request is properly signed but carries no
//     delivery id or its body is not a JSON object.
//
// Messages are plain sentences that never contain a secret or an expected signature.
// A zero p.Now means the current time.
func Verify(p VerifyParams) (ledger.Delivery, error) {
	switch p.Provider {
	case ledger.ProviderStripe:
		return verifyStripe(p)
	case ledger.ProviderGitHub:
		return verifyGitHub(p)
	case ledger.ProviderShopify:
		return verifyShopify(p)
	case ledger.ProviderStandardWebhooks:
		return verifyStandardWebhooks(p)
	}
	return ledger.Delivery{}, ledger.Errorf(ledger.EINVALID, "unknown provider %q", p.Provider)
}

func errSignature(format string, args ...any) *ledger.Error {
	return ledger.Errorf(ledger.EUNAUTHORIZED, format, args...)
}

// literalKey keys the HMAC with the secret string itself, as Stripe (whsec_ prefix
// included), GitHub and Shopify do.
func literalKey(secret string) []byte { return []byte(secret) }

// checkHMAC succeeds when one of sigs is the HMAC-SHA256 of the concatenated parts under
// the key of one of secrets. Every secret is tried because several are live during a
// rotation; empty secrets are skipped so a trailing comma in the config cannot become
// an empty key. keyOf returns nil for a secret that cannot be a key; it never matches.
// The MAC is computed once per secret, so the work is linear in the number of sigs.
func checkHMAC(secrets []string, keyOf func(string) []byte, sigs [][]byte, parts ...[]byte) error {
	configured := false
	for _, secret := range secrets {
		if secret == "" {
			continue
		}
		configured = true
		key := keyOf(secret)
		if len(key) == 0 {
			continue
		}
		mac := hmac.New(sha256.New, key)
		for _, part := range parts {
			mac.Write(part)
		}
		want := mac.Sum(nil)
		for _, sig := range sigs {
			if hmac.Equal(sig, want) { // constant time for equal lengths
				return nil
			}
		}
	}
	if !configured {
		// Fail closed: a source without a secret must not accept anything.
		return errSignature("no signing secret is configured for this source")
	}
	return errSignature("signature does not match any configured secret")
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

// decodeJSONObject checks that a signed body is one JSON object and returns the
// values of its members of the given names (nil for one that is absent), as
// encoding/json decodes the object into a struct of json.RawMessage fields with
// those names: a repeated member's last value, a name matched in any case. It reads
// the members by their bytes once jsonscan.Valid has passed the body, and decodes the
// struct itself only for a body whose member names could match in a way other than
// byte for byte (escapes, other cases, non-ASCII letters). encoding/json refuses
// nesting deeper than 10000 levels with an error, so hostile bodies cannot exhaust
// the stack.
func decodeJSONObject(body []byte, names ...string) ([]json.RawMessage, error) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	switch {
	case len(trimmed) == 0:
		return nil, ledger.Errorf(ledger.EINVALID, "the body is empty")
	case !utf8.Valid(body):
		return nil, ledger.Errorf(ledger.EINVALID, "the body is not valid UTF-8")
	case trimmed[0] != '{':
		return nil, ledger.Errorf(ledger.EINVALID, "the body is not a JSON object")
	case !jsonscan.Valid(body):
		_, err := decodeMembers(body, names) // for encoding/json's words on what is wrong
		return nil, &ledger.Error{Code: ledger.EINVALID, Message: "the body is not a valid JSON object", Err: err}
	}
	values := make([]json.RawMessage, len(names))
	plain := true
	jsonscan.Members(trimmed, 0, func(name, value []byte) bool {
		if bytes.IndexByte(name, '\\') >= 0 {
			plain = false
			return false
		}
		name = name[1 : len(name)-1]
		for i, want := range names {
			switch {
			case string(name) == want:
				values[i] = value
			case !isASCII(name) || bytes.EqualFold(name, []byte(want)):
				plain = false
				return false
			}
		}
		return true
	})
	if !plain {
		return decodeMembers(body, names)
	}
	return values, nil
}

// decodeMembers decodes the named members of body the way encoding/json decodes
// them into a struct's json.RawMessage fields tagged with those names.
func decodeMembers(body []byte, names []string) ([]json.RawMessage, error) {
	fields := make([]reflect.StructField, len(names))
	for i, name := range names {
		fields[i] = reflect.StructField{Name: fmt.Sprintf("F%d", i), Type: reflect.TypeFor[json.RawMessage](),
			Tag: reflect.StructTag(`json:"` + name + `"`)}
	}
	v := reflect.New(reflect.StructOf(fields))
	if err := json.Unmarshal(body, v.Interface()); err != nil {
		return nil, fmt.Errorf("decode body: %w", err)
	}
	values := make([]json.RawMessage, len(names))
	for i := range names {
		values[i] = v.Elem().Field(i).Interface().(json.RawMessage)
	}
	return values, nil
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// jsonString returns raw when it is a JSON string and "" for anything else, so a
// field of an unexpected type reads as absent instead of failing the whole body.
func jsonString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
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
