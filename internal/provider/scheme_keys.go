package provider

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"net/http"
	"strings"

	"github.com/oncehook/oncehook/internal/settings"
)

// checkEd25519 succeeds when one of sigs is an Ed25519 signature of msg by one of the
// configured public keys (hex, as Discord shows them).
func checkEd25519(keys []string, sigs [][]byte, msg []byte) (string, error) {
	return checkEach(keys, func(key string) bool {
		pub, err := hex.DecodeString(key)
		if err != nil || len(pub) != ed25519.PublicKeySize {
			return false
		}
		for _, sig := range sigs {
			if ed25519.Verify(pub, msg, sig) {
				return true
			}
		}
		return false
	})
}

// parseECDSAKey reads a P-256 public key as SendGrid shows it: base64 of the DER
// (PKIX) encoding, with or without PEM armour.
func parseECDSAKey(s string) (*ecdsa.PublicKey, bool) {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "-----BEGIN PUBLIC KEY-----")
	s = strings.TrimSuffix(s, "-----END PUBLIC KEY-----")
	der, err := decodeBase64(strings.Join(strings.Fields(s), "")) // PEM wraps its lines
	if err != nil {
		return nil, false
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, false
	}
	pub, ok := k.(*ecdsa.PublicKey)
	return pub, ok && pub.Curve.Params().Name == "P-256"
}

// checkECDSA succeeds when one of sigs (ASN.1 DER) is an ECDSA P-256 signature of
// the SHA-256 of msg by one of the configured public keys.
func checkECDSA(keys []string, sigs [][]byte, msg []byte) (string, error) {
	digest := sha256.Sum256(msg)
	return checkEach(keys, func(key string) bool {
		pub, ok := parseECDSAKey(key)
		if !ok {
			return false
		}
		for _, sig := range sigs {
			if ecdsa.VerifyASN1(pub, digest[:], sig) {
				return true
			}
		}
		return false
	})
}

// checkToken succeeds when the header holds one of the secrets (GitLab's
// X-Gitlab-Token). Both sides are hashed first so the comparison takes the same
// time whatever their lengths.
func (r *request) checkToken() (string, error) {
	name := r.spec.Signature.Header
	got := r.p.Header.Get(name)
	if got == "" {
		return "", errSignature("missing %s header", name)
	}
	return checkEach(r.p.Secrets, func(secret string) bool { return equalSecret(got, secret) })
}

// checkBasic succeeds when the request's basic credentials are one of the secrets,
// each written user:password (Postmark's credentials in the webhook URL).
func (r *request) checkBasic() (string, error) {
	if r.p.Header.Get("Authorization") == "" {
		return "", errSignature("missing Authorization header")
	}
	user, pass, ok := (&http.Request{Header: r.p.Header}).BasicAuth()
	if !ok {
		return "", errSignature("malformed Authorization header")
	}
	return checkEach(r.p.Secrets, func(secret string) bool { return equalSecret(user+":"+pass, secret) })
}

func equalSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// zoomToken is Zoom's encryptedToken: the hex HMAC-SHA256 of plainToken under the
// webhook's secret token.
func zoomToken(secret, plain string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(plain))
	return hex.EncodeToString(m.Sum(nil))
}

// KeyProblem says what is wrong with a configured secret for a scheme that needs a
// particular kind of key, in words that never repeat it; "" when it can be used.
func KeyProblem(spec *settings.VerifySpec, secret string) string {
	switch spec.Kind {
	case settings.VerifyKindEd25519:
		if b, err := hex.DecodeString(secret); err != nil || len(b) != ed25519.PublicKeySize {
			return "is not an Ed25519 public key written as 64 hex digits"
		}
	case settings.VerifyKindECDSA:
		if _, ok := parseECDSAKey(secret); !ok {
			return "is not a P-256 public key in base64 (DER)"
		}
	case settings.VerifyKindBasic:
		if !strings.Contains(secret, ":") {
			return `is not "user:password"`
		}
	case settings.VerifyKindHMAC, "":
		if spec.Key == "base64" && standardKey(secret) == nil {
			return "is not a whsec_ secret: base64 in the standard alphabet with its padding after the prefix"
		}
	}
	return ""
}
