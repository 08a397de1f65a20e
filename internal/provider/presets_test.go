package provider_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/provider"
	"github.com/oncehook/oncehook/internal/settings"
)

// presetVector is one signed request of testdata/presets/vectors.json; its source
// says whether it comes from the provider's documentation or official SDK, or was
// computed from the documented algorithm (generate.py, independent of this package).
type presetVector struct {
	Provider    string            `json:"provider"`
	Source      string            `json:"source"`
	Secret      string            `json:"secret"`
	Headers     map[string]string `json:"headers"`
	Body        string            `json:"body"`
	URL         string            `json:"url"`
	Query       string            `json:"query"`
	Method      string            `json:"method"`
	Now         int64             `json:"now"`
	WantID      string            `json:"want_id"`
	WantType    string            `json:"want_type"`
	SigHeader   string            `json:"sig_header"`
	Timestamped bool              `json:"timestamped"`
	BodySigned  bool              `json:"body_signed"`
	// SignatureOnly marks an SDK's vector whose body is no delivery the provider
	// sends (not even JSON): the signature must pass, and only the body be refused.
	SignatureOnly bool `json:"signature_only"`
	// OtherSecrets come before Secret in the configured list and did not sign.
	OtherSecrets []string `json:"other_secrets"`
}

func loadPresetVectors(t *testing.T) []presetVector {
	t.Helper()
	raw, err := os.ReadFile("testdata/presets/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vs []presetVector
	if err := json.Unmarshal(raw, &vs); err != nil {
		t.Fatal(err)
	}
	return vs
}

func (v presetVector) params(t *testing.T) provider.VerifyParams {
	t.Helper()
	spec, ok := provider.Preset(v.Provider)
	if !ok {
		t.Fatalf("no preset %q", v.Provider)
	}
	if v.URL != "" {
		spec.URL = v.URL
	}
	switch {
	case v.WantID == "body_hash": // a documented body without the provider's event id
		spec.ID = settings.IdentitySpec{BodyHash: true}
	case v.Provider == provider.PresetSendGrid: // the SDK's vector is one event, not a list
		spec.ID = settings.IdentitySpec{Composite: []string{"/message_id"}}
	}
	h := http.Header{}
	for k, val := range v.Headers {
		h.Set(k, val)
	}
	secrets := append(slices.Clone(v.OtherSecrets), v.Secret)
	return provider.VerifyParams{Provider: v.Provider, Spec: spec, Secrets: secrets, Tolerance: 5 * time.Minute,
		Now: time.Unix(v.Now, 0), Header: h, Body: []byte(v.Body), Method: v.Method, Query: v.Query}
}

// otherKey is a secret of the same kind as the vector's, which did not sign it.
func otherKey(t *testing.T, v presetVector) string {
	t.Helper()
	switch v.Provider {
	case provider.PresetDiscord: // RFC 8032 section 7.1 TEST 2's public key
		return "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c"
	case provider.PresetSendGrid:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		return base64.StdEncoding.EncodeToString(der)
	case provider.PresetResend, provider.PresetClerk:
		return "whsec_" + base64.StdEncoding.EncodeToString([]byte("another key"))
	}
	return "not-" + v.Secret
}

func TestPresetVectors(t *testing.T) {
	vs := loadPresetVectors(t)
	for _, v := range vs {
		t.Run(v.Provider, func(t *testing.T) {
			t.Parallel()
			if !strings.HasPrefix(v.Source, "documented: ") && !strings.HasPrefix(v.Source, "computed: ") {
				t.Fatalf("vector source %q says neither documented nor computed", v.Source)
			}
			kav := v.params(t)
			wantID := v.WantID
			if wantID == "body_hash" {
				wantID = "sha256:" + sha256Hex(v.Body)
			}
			t.Run("KnownAnswerVerifies", func(t *testing.T) {
				d, err := provider.Verify(kav)
				if v.SignatureOnly {
					if code := ledger.ErrorCode(err); code != ledger.EINVALID || !strings.Contains(err.Error(), "JSON") {
						t.Fatalf("Verify() error code = %q (%v), want %q: the signature passes, the body is no delivery (%s)",
							code, err, ledger.EINVALID, v.Source)
					}
					return
				}
				if err != nil {
					t.Fatalf("Verify() = %v (%s)", err, v.Source)
				}
				if d.ID != wantID || d.Type != v.WantType || d.Answer != nil {
					t.Fatalf("Verify() = id %q type %q answer %v, want id %q type %q", d.ID, d.Type, d.Answer, wantID, v.WantType)
				}
			})
			refused := func(name string, change func(*provider.VerifyParams)) {
				t.Run(name, func(t *testing.T) {
					p := withParams(kav, change)
					_, err := provider.Verify(p)
					if code := ledger.ErrorCode(err); code != ledger.EUNAUTHORIZED {
						t.Fatalf("Verify() error code = %q (%v), want %q", code, err, ledger.EUNAUTHORIZED)
					}
					if strings.Contains(err.Error(), v.Secret) {
						t.Fatalf("error %q reveals the secret", err)
					}
				})
			}
			if v.BodySigned {
				refused("TamperedBodyIsRefused", func(p *provider.VerifyParams) { p.Body = flipByte(p.Body, len(p.Body)/2) })
			} else if v.Provider == provider.PresetMailgun {
				refused("TamperedTokenIsRefused", func(p *provider.VerifyParams) {
					p.Body = []byte(strings.Replace(string(p.Body), `"token":"`, `"token":"x`, 1))
				})
			}
			refused("WrongSecretIsRefused", func(p *provider.VerifyParams) { p.Secrets = []string{otherKey(t, v)} })
			if v.Timestamped {
				refused("StaleTimestampIsRefused", func(p *provider.VerifyParams) { p.Now = p.Now.Add(time.Hour) })
			}
			refused("MissingHeaderIsRefused", func(p *provider.VerifyParams) {
				if v.SigHeader == "" { // Mailgun: the signature object is in the body
					p.Body = []byte(strings.Replace(string(p.Body), `"signature":{`, `"unsigned":{`, 1))
					return
				}
				p.Header.Del(v.SigHeader)
			})
		})
	}
}

// TestEveryPresetHasAVector keeps the table and the presets together: a preset
// added without a vector fails here.
func TestEveryPresetHasAVector(t *testing.T) {
	have := []string{ledger.ProviderStripe, ledger.ProviderGitHub, ledger.ProviderShopify, ledger.ProviderStandardWebhooks}
	for _, v := range loadPresetVectors(t) {
		have = append(have, v.Provider)
	}
	for _, name := range provider.Presets() {
		if !slices.Contains(have, name) {
			t.Errorf("preset %q has no vector in testdata/presets/vectors.json", name)
		}
	}
}
