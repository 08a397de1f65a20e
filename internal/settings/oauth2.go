package settings

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
)

// OAuth2 grants (docs/destinations.md, "OAuth2 destinations").
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
)

// How an OAuth2 client authenticates at the token endpoint: HTTP Basic (RFC 6749's
// preference) or client_id and client_secret in the form body (HubSpot).
const (
	ClientAuthBasic = "basic"
	ClientAuthBody  = "body"
)

// Environment variables holding the key that encrypts stored OAuth2 tokens: the
// current one, and during a rotation the one it replaces.
const (
	SecretKeyEnv         = "ONCEHOOK_SECRET_KEY"
	SecretKeyPreviousEnv = "ONCEHOOK_SECRET_KEY_PREVIOUS"
)

// OAuth2 is an http destination's OAuth2 client. Its Format omits the client secret.
type OAuth2 struct {
	Grant           string // GrantAuthorizationCode or GrantClientCredentials
	TokenURL        string
	AuthorizeURL    string // authorization_code only
	ClientIDEnv     string
	ClientSecretEnv string
	Scopes          []string
	ClientAuth      string // ClientAuthBasic (default) or ClientAuthBody: how the client authenticates at token_url
	ClientID        string `yaml:"-" json:"-"`
	ClientSecret    string `yaml:"-" json:"-"`
}

type plainOAuth2 OAuth2

// Format prints o as fmt would, with the client secret redacted.
func (o OAuth2) Format(f fmt.State, verb rune) {
	p := plainOAuth2(o)
	p.ClientSecret = Redact(o.ClientSecret)
	fmt.Fprintf(f, fmt.FormatString(f, verb), p)
}

// String is o printed with %+v, the client secret redacted.
func (o OAuth2) String() string { return fmt.Sprintf("%+v", o) }

// SecretKeys encrypt the stored OAuth2 tokens: Current seals, and either opens, so
// that ONCEHOOK_SECRET_KEY can be rotated with the old key kept as
// ONCEHOOK_SECRET_KEY_PREVIOUS until every token has been re-sealed. It never prints
// its keys.
type SecretKeys struct {
	current, previous cipher.AEAD
	set               bool
	id                [32]byte // a digest of the keys, for Equal
}

// Equal reports whether k and o hold the same keys (go-cmp calls it).
func (k SecretKeys) Equal(o SecretKeys) bool { return k.set == o.set && k.id == o.id }

// ParseSecretKeys reads the keys from their environment values: 32 bytes in standard
// base64 each, previous optional. The error names the variable, never the value.
func ParseSecretKeys(current, previous string) (SecretKeys, error) {
	var k SecretKeys
	var err error
	if current == "" {
		return k, fmt.Errorf("%s is not set: OAuth2 tokens are stored encrypted with it (make one with `openssl rand -base64 32`)", SecretKeyEnv)
	}
	if k.current, err = parseKey(SecretKeyEnv, current); err != nil {
		return k, err
	}
	if previous != "" {
		if k.previous, err = parseKey(SecretKeyPreviousEnv, previous); err != nil {
			return k, err
		}
	}
	k.set, k.id = true, sha256.Sum256([]byte(current+"\x00"+previous))
	return k, nil
}

func parseKey(name, v string) (cipher.AEAD, error) {
	raw, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(raw) != 32 {
		return nil, fmt.Errorf("%s must be 32 random bytes in standard base64 (`openssl rand -base64 32`)", name)
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return cipher.NewGCM(block)
}

// Set reports whether keys were configured.
func (k SecretKeys) Set() bool { return k.set }

// Format prints no key material, whatever the verb.
func (k SecretKeys) Format(f fmt.State, _ rune) {
	if k.set {
		fmt.Fprint(f, Redacted)
	}
}

// ErrWrongSecretKey means a stored token was sealed with a key that is neither
// ONCEHOOK_SECRET_KEY nor ONCEHOOK_SECRET_KEY_PREVIOUS.
var ErrWrongSecretKey = errors.New(SecretKeyEnv + " does not open the stored OAuth2 tokens: it is not the key they were stored with (when rotating, keep the old one as " + SecretKeyPreviousEnv + ")")

// Seal encrypts plain with the current key; aad binds it to its row.
func (k SecretKeys) Seal(plain, aad []byte) ([]byte, error) {
	if !k.set {
		return nil, fmt.Errorf("%s is not set", SecretKeyEnv)
	}
	nonce := make([]byte, k.current.NonceSize(), k.current.NonceSize()+len(plain)+k.current.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("make a nonce: %w", err)
	}
	return k.current.Seal(nonce, nonce, plain, aad), nil
}

// Open decrypts sealed with the current key, else the previous one; rotated says
// the previous one was needed, so the value should be sealed again.
func (k SecretKeys) Open(sealed, aad []byte) (plain []byte, rotated bool, err error) {
	if !k.set {
		return nil, false, fmt.Errorf("%s is not set", SecretKeyEnv)
	}
	for i, a := range []cipher.AEAD{k.current, k.previous} {
		if a == nil || len(sealed) < a.NonceSize() {
			continue
		}
		if p, err := a.Open(nil, sealed[:a.NonceSize()], sealed[a.NonceSize():], aad); err == nil {
			return p, i == 1, nil
		}
	}
	return nil, false, ErrWrongSecretKey
}
