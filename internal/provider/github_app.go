package provider

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strings"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
)

// IsPrivateKey reports whether a backfill token is a PEM private key (a GitHub App's)
// rather than a token to send as it is.
func IsPrivateKey(token string) bool { return strings.HasPrefix(token, "-----BEGIN") }

// githubAppKey parses a GitHub App's private key: PKCS#1, as GitHub hands it out,
// or PKCS#8.
func githubAppKey(pemText string) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode([]byte(pemText))
	if block == nil {
		return nil, errors.New("not a PEM block")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, errors.New("not an RSA private key")
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("not an RSA private key")
	}
	return rk, nil
}

// githubAppJWT is the short-lived token an App's hook endpoints want: RS256 over
// iat (a minute back, for clock drift), exp (nine minutes on; GitHub allows ten)
// and iss, the App's id or client id.
func githubAppJWT(key *rsa.PrivateKey, issuer string, now time.Time) (string, error) {
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`))
	claims, err := json.Marshal(map[string]any{"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(9 * time.Minute).Unix(), "iss": issuer})
	if err != nil {
		return "", err
	}
	signing := header + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return signing + "." + enc.EncodeToString(sig), nil
}

// bearer is the token of the next request: the configured one, or for an App
// whose private key is configured, a fresh JWT.
func (g *GitHubDeliveries) bearer() (string, error) {
	if g.appKey == nil {
		return g.token, nil
	}
	jwt, err := githubAppJWT(g.appKey, g.appID, time.Now())
	if err != nil {
		return "", &ledger.ProviderError{Message: "the GitHub App's token could not be signed: " + err.Error()}
	}
	return jwt, nil
}
