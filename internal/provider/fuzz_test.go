package provider_test

import (
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/provider"
	"github.com/oncehook/oncehook/internal/settings"
)

// Each target fixes a secret and a body that no seed signs, then lets the fuzzer write
// the signature headers. Whatever it writes, Verify must not panic and must refuse with
// EUNAUTHORIZED: the body is well formed, so the signature is the only thing that can
// fail, and forging an HMAC-SHA256 is not something a fuzzer stumbles on.

func assertRefused(t *testing.T, p provider.VerifyParams) {
	t.Helper()
	d, err := provider.Verify(p)
	if err == nil {
		t.Fatalf("a fuzzed header verified: %v -> %+v", p.Header, d)
	}
	if code := ledger.ErrorCode(err); code != ledger.EUNAUTHORIZED {
		t.Fatalf("error code = %q (%v), want %q", code, err, ledger.EUNAUTHORIZED)
	}
	for _, s := range p.Secrets {
		if strings.Contains(err.Error(), s) {
			t.Fatalf("error %q reveals the secret", err)
		}
	}
}

func FuzzStripeSignatureHeader(f *testing.F) {
	for _, seed := range []string{
		stripeKAVHeader, // valid, but for another body
		"t=1533204620,v1=" + stripeKAVv1 + ",v1=" + stripeKAVv1 + ",v0=" + stripeKAVv0,
		"t=1533204620",
		"t=,v1=",
		"t,v1=,v0=",
		",,",
		"t=1533204620,v1=zz",
		"t=99999999999999999999,v1=" + stripeKAVv1,
		"t=-1,v1=" + stripeKAVv1,
	} {
		f.Add(seed)
	}
	body := []byte(`{"id":"evt_fuzz","type":"fuzz.tested","created":1533204620}`)
	f.Fuzz(func(t *testing.T, h string) {
		assertRefused(t, provider.VerifyParams{
			Provider: ledger.ProviderStripe, Secrets: []string{stripeKAVSecret}, Tolerance: 5 * time.Minute,
			Now: stripeKAVTime, Header: http.Header{"Stripe-Signature": {h}}, Body: body,
		})
	})
}

func FuzzGitHubSignature(f *testing.F) {
	for _, seed := range []string{
		githubKAVSignature, // valid, but for "Hello, World!"
		"sha256=",
		"sha256=zz",
		"sha1=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
		"757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
		"sha256=" + strings.Repeat("0", 64),
	} {
		f.Add(seed)
	}
	body := []byte(`{"action":"fuzzed","zen":"Hello, World!"}`)
	f.Fuzz(func(t *testing.T, h string) {
		assertRefused(t, provider.VerifyParams{
			Provider: ledger.ProviderGitHub, Secrets: []string{githubKAVSecret}, Now: verifyTestNow, Body: body,
			Header: http.Header{"X-Hub-Signature-256": {h}, "X-Github-Delivery": {"d-1"}, "X-Github-Event": {"issues"}},
		})
	})
}

func FuzzShopifySignature(f *testing.F) {
	for _, seed := range []string{
		shopifyKAVHmac, // valid, but for {"foo": "bar"}
		"B23tXN681gZ0qIWNRrgtzBE9XSDo5yaUu6wfmhu3a7g",
		"====",
		"not base64!",
		strings.Repeat("A", 44),
	} {
		f.Add(seed)
	}
	body := []byte(`{"foo": "baz"}`)
	f.Fuzz(func(t *testing.T, h string) {
		assertRefused(t, provider.VerifyParams{
			Provider: ledger.ProviderShopify, Secrets: []string{shopifyKAVSecret}, Now: verifyTestNow, Body: body,
			Header: http.Header{"X-Shopify-Hmac-Sha256": {h}, "X-Shopify-Webhook-Id": {"w-1"}, "X-Shopify-Topic": {"orders/create"}},
		})
	})
}

func FuzzStandardWebhooksSignature(f *testing.F) {
	f.Add(standardKAVID, standardKAVTS, standardKAVSig) // valid, but for another body
	f.Add(standardKAVID, standardKAVTS, standardWrongSig+" v1a,"+strings.TrimPrefix(standardKAVSig, "v1,"))
	f.Add("", standardKAVTS, "v1,")
	f.Add(standardKAVID, "1614265330.5", standardKAVSig)
	f.Add(standardKAVID, "", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v2,x")
	body := []byte(`{"test": 2432232315}`)
	f.Fuzz(func(t *testing.T, id, ts, sig string) {
		assertRefused(t, provider.VerifyParams{
			Provider: ledger.ProviderStandardWebhooks, Secrets: []string{standardKAVSecret}, Tolerance: 5 * time.Minute,
			Now:    time.Unix(1614265330, 0),
			Header: http.Header{"Webhook-Id": {id}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {sig}},
			Body:   body,
		})
	})
}

// FuzzDeclaredScheme writes the signature header and the body of a declared list
// scheme. Unsigned, whatever the bytes, Verify refuses with EUNAUTHORIZED. Then the
// same body is signed properly, so the fuzzer reaches the byte-level reading of
// identities from the body: it may be refused as EINVALID, never panic, and an
// accepted delivery carries an identity.
func FuzzDeclaredScheme(f *testing.F) {
	for _, seed := range []struct{ header, body string }{
		{"t=1700000000;v1=" + strings.Repeat("ab", 32), `{"a":{"b":"x"},"c":[1,2]}`},
		{"t=1700000000;t=1;v1=zz", `[{"a":{"b":"x"}}]`},
		{";;=;v1=", `{"a\u0000":{"b":1e999},"a":{"b":null}}`},
		{"", `{"a":{"b":"` + strings.Repeat(`\"`, 50) + `"}}`},
	} {
		f.Add(seed.header, []byte(seed.body))
	}
	spec := settings.VerifySpec{
		Signature: settings.SignatureSpec{Header: "X-Sig", Format: settings.SignatureList, Separator: ";", Keys: []string{"v1"}},
		Algorithm: "sha256", Encoding: "hex", Timestamp: settings.TimestampSpec{Signature: "t"},
		Signed: []settings.SignedPart{{Kind: settings.PartTimestamp}, {Kind: settings.PartLiteral, Value: "."}, {Kind: settings.PartBody}},
		ID:     settings.IdentitySpec{Composite: []string{"/a/b", "/c/1", "/0/a/b"}}, Type: settings.TypeSpec{Pointer: "/a/b"},
		Array: true,
	}
	now := time.Unix(1_700_000_000, 0).UTC()
	f.Fuzz(func(t *testing.T, h string, body []byte) {
		p := provider.VerifyParams{Provider: settings.ProviderHMAC, Spec: &spec, Secrets: []string{"fuzz-secret"},
			Tolerance: 5 * time.Minute, Now: now, Header: http.Header{"X-Sig": {h}}, Body: body}
		assertRefused(t, p)
		p.Header.Set("X-Sig", "t=1700000000;v1="+hex.EncodeToString(testHMAC([]byte("fuzz-secret"), "1700000000."+string(body))))
		d, err := provider.Verify(p)
		if code := ledger.ErrorCode(err); err != nil && code != ledger.EINVALID {
			t.Fatalf("signed body refused with %q (%v), want EINVALID or success", code, err)
		}
		if err == nil && d.ID == "" {
			t.Fatalf("accepted without an identity: %+v", d)
		}
	})
}
