package provider

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"hash"
	"net/http"
	"strings"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// request is what verifySpec reads of one request: its parts decoded at most once.
type request struct {
	p      VerifyParams
	spec   *settings.VerifySpec
	secret string // the secret that verified the request
	doc    []byte // the JSON document, checked on first use
	derr   error  // why it could not be decoded
	done   bool
}

// verifySpec checks a request against a declarative description: the signature
// first, on the raw bytes; only then the identity, the type and any handshake.
func verifySpec(p VerifyParams, spec *settings.VerifySpec) (ledger.Delivery, error) {
	if spec.Fallback != nil && headerOf(p.Header, spec) == "" && headerOf(p.Header, spec.Fallback) != "" {
		spec = spec.Fallback
	}
	r := &request{p: p, spec: spec}
	ts, err := r.authenticate()
	if err != nil {
		return ledger.Delivery{}, err
	}
	if answer, ok, err := r.handshake(); ok || err != nil {
		return ledger.Delivery{Answer: answer}, err
	}
	return r.delivery(ts)
}

// headerOf returns the value that carries the signature ("" when absent). A
// signature in the body counts as present.
func headerOf(h http.Header, spec *settings.VerifySpec) string {
	if spec.Signature.Header == "" {
		return "present"
	}
	return h.Get(spec.Signature.Header)
}

// authenticate checks the signature (or token, or credentials) and the timestamp's
// age, and returns the timestamp (zero when the scheme has none).
func (r *request) authenticate() (time.Time, error) {
	spec := r.spec
	var err error
	switch spec.Kind {
	case settings.VerifyKindToken:
		r.secret, err = r.checkToken()
		return time.Time{}, err
	case settings.VerifyKindBasic:
		r.secret, err = r.checkBasic()
		return time.Time{}, err
	}
	sig, err := r.signature()
	if err != nil {
		return time.Time{}, err
	}
	raw, at, err := r.timestamp(sig.items)
	if err != nil {
		return time.Time{}, err
	}
	parts, err := r.signedContent(raw)
	if err != nil {
		return time.Time{}, err
	}
	switch spec.Kind {
	case settings.VerifyKindEd25519:
		r.secret, err = checkEd25519(r.p.Secrets, sig.sigs, bytes.Join(parts, nil))
	case settings.VerifyKindECDSA:
		r.secret, err = checkECDSA(r.p.Secrets, sig.sigs, bytes.Join(parts, nil))
	default:
		r.secret, err = checkMAC(r.p.Secrets, spec, sig.sigs, parts)
	}
	if err != nil {
		return time.Time{}, err
	}
	if spec.Timestamp.Set() {
		return at, checkTolerance(at, verifyNow(r.p), r.p.Tolerance)
	}
	return time.Time{}, nil
}

// parsedSignature is a signature value: the decoded signatures it carries and, for a
// list, its other items by key.
type parsedSignature struct {
	sigs  [][]byte
	items map[string][]string
}

func (r *request) signature() (parsedSignature, error) {
	s := r.spec.Signature
	name := s.Header
	value := r.p.Header.Get(s.Header)
	if s.Pointer != "" {
		name = "signature " + s.Pointer
		value = r.pointerString(s.Pointer)
	}
	if value == "" {
		return parsedSignature{}, errSignature("missing %s", describeHeader(name))
	}
	if s.Format == settings.SignatureList {
		return r.parseList(value, name)
	}
	rest, ok := value, true
	if s.Format == settings.SignaturePrefix {
		rest, ok = strings.CutPrefix(value, s.Prefix)
	}
	sig, good := r.decodeSig(rest)
	if !ok || !good {
		return parsedSignature{}, errSignature("malformed %s", describeHeader(name))
	}
	return parsedSignature{sigs: [][]byte{sig}}, nil
}

func describeHeader(name string) string {
	if strings.HasPrefix(name, "signature ") {
		return name
	}
	return name + " header"
}

// parseList reads key=value items. Signature items that do not decode to a
// signature of the algorithm's size are skipped, as Stripe's and the Standard
// Webhooks libraries do, so a sender may add schemes; a repeated timestamp is
// malformed, since two could be checked against different things.
func (r *request) parseList(value, name string) (parsedSignature, error) {
	s := r.spec.Signature
	sep, pair := or(s.Separator, ","), or(s.Pair, "=")
	ps := parsedSignature{items: map[string][]string{}}
	for item := range strings.SplitSeq(value, sep) {
		item = strings.TrimSpace(item)
		if item == "" && sep == " " {
			continue
		}
		key, v, ok := strings.Cut(item, pair)
		if !ok {
			if sep == " " {
				continue
			}
			return ps, errSignature("malformed %s", describeHeader(name))
		}
		if key == r.spec.Timestamp.Signature && len(ps.items[key]) > 0 {
			return ps, errSignature("malformed %s", describeHeader(name))
		}
		ps.items[key] = append(ps.items[key], v)
		if !contains(s.Keys, key) {
			continue
		}
		if sig, good := r.decodeSig(v); good {
			ps.sigs = append(ps.sigs, sig)
		}
	}
	if ts := r.spec.Timestamp.Signature; ts != "" && len(ps.items[ts]) == 0 {
		return ps, errSignature("malformed %s: no timestamp", describeHeader(name))
	}
	if len(ps.sigs) == 0 {
		return ps, errSignature("no %s signature in %s", strings.Join(s.Keys, " or "), describeHeader(name))
	}
	return ps, nil
}

// decodeSig decodes one signature by the spec's encoding and checks its size where
// the algorithm fixes it (an HMAC's digest size; Ed25519's 64 bytes).
func (r *request) decodeSig(s string) ([]byte, bool) {
	var sig []byte
	var err error
	if r.spec.Encoding == "base64" {
		sig, err = decodeBase64(s)
	} else {
		sig, err = hex.DecodeString(s)
	}
	if err != nil || len(sig) == 0 {
		return nil, false
	}
	switch r.spec.Kind {
	case settings.VerifyKindEd25519:
		return sig, len(sig) == 64
	case settings.VerifyKindECDSA:
		return sig, len(sig) <= 80
	}
	return sig, len(sig) == digestSize(r.spec.Algorithm)
}

// digestSize is the size in bytes of an HMAC under algorithm (sha1, sha256 or
// sha512); 0 for any other name.
func digestSize(algorithm string) int {
	if h := newHash(algorithm); h != nil {
		return h().Size()
	}
	return 0
}

func newHash(algorithm string) func() hash.Hash {
	switch algorithm {
	case "sha1":
		return sha1.New
	case "sha256":
		return sha256.New
	case "sha512":
		return sha512.New
	}
	return nil
}

// checkMAC succeeds when one of sigs is the HMAC of the concatenated parts under one
// of secrets. The MAC is computed once per secret, so the work is linear in the
// number of sigs.
func checkMAC(secrets []string, spec *settings.VerifySpec, sigs [][]byte, parts [][]byte) (string, error) {
	h := newHash(spec.Algorithm)
	if h == nil {
		return "", ledger.Errorf(ledger.EINVALID, "unknown algorithm %q", spec.Algorithm)
	}
	return checkEach(secrets, func(secret string) bool {
		key := macKey(spec.Key, secret)
		if len(key) == 0 {
			return false
		}
		mac := hmac.New(h, key)
		for _, p := range parts {
			mac.Write(p)
		}
		want := mac.Sum(nil)
		for _, sig := range sigs {
			if hmac.Equal(sig, want) {
				return true
			}
		}
		return false
	})
}

// checkEach tries every configured secret (several are live during a rotation),
// skipping empty ones so a trailing comma cannot become an empty key, and fails
// closed when none is configured. It returns the secret that matched.
func checkEach(secrets []string, ok func(secret string) bool) (string, error) {
	configured := false
	for _, secret := range secrets {
		if secret == "" {
			continue
		}
		configured = true
		if ok(secret) {
			return secret, nil
		}
	}
	if !configured {
		return "", errSignature("no signing secret is configured for this source")
	}
	return "", errSignature("signature does not match any configured secret")
}

// macKey turns a configured secret into the HMAC key; nil when it cannot be one.
func macKey(how, secret string) []byte {
	switch how {
	case "base64":
		return standardKey(secret)
	case "hex":
		key, err := hex.DecodeString(secret)
		if err != nil {
			return nil
		}
		return key
	}
	return []byte(secret)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// standardKey decodes a whsec_ secret as Standard Webhooks does; one that is not
// base64 yields nil and so never matches rather than failing the whole request.
func standardKey(secret string) []byte {
	key, err := decodeBase64(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return nil
	}
	return key
}
