package provider_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/provider"
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
