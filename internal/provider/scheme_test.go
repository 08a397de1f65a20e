package provider_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/provider"
	"github.com/oncehook/oncehook/internal/settings"
)

// The declarative scheme, one choice at a time: each case declares a spec, signs a
// request as such a sender would (computed here from the parts, independently of the
// package), and checks the delivery read from it, then its broken twins.

func macOf(alg string, key []byte, msg string) []byte {
	h := map[string]func() []byte{
		"sha1":   func() []byte { m := hmac.New(sha1.New, key); m.Write([]byte(msg)); return m.Sum(nil) },
		"sha256": func() []byte { return testHMAC(key, msg) },
		"sha512": func() []byte { m := hmac.New(sha512.New, key); m.Write([]byte(msg)); return m.Sum(nil) },
	}
	return h[alg]()
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

const schemeBody = `{"id":"evt_9","kind":"order.paid","order":{"ref":"o-1","at":1699999990},"n":7}`

// declaredRequests signs one request for each of three declared schemes: a prefix
// with sha512 over the body; a list with a timestamp item over the method, the
// timestamp, the body, the URL and a header; a plain sha1 with a base64 key, a
// millisecond timestamp header and a composite identity.
func declaredRequests() (prefixOK, listOK, plainOK provider.VerifyParams, hashed settings.VerifySpec, listSig string) {
	ts := fmt.Sprint(verifyTestNow.Unix())
	base := func(spec settings.VerifySpec, h http.Header) provider.VerifyParams {
		return provider.VerifyParams{Provider: settings.ProviderHMAC, Spec: &spec, Secrets: []string{"old", "s3cret"},
			Tolerance: 5 * time.Minute, Now: verifyTestNow, Header: h, Body: []byte(schemeBody), Method: "POST", Query: "a=1"}
	}
	idPtr := settings.IdentitySpec{Pointer: "/id"}
	typ := settings.TypeSpec{Pointer: "/kind"}

	// Prefix, sha512, hex, over the body alone.
	prefix := settings.VerifySpec{Signature: settings.SignatureSpec{Header: "X-Sig", Format: settings.SignaturePrefix, Prefix: "sha512="},
		Algorithm: "sha512", Encoding: "hex", Signed: []settings.SignedPart{{Kind: settings.PartBody}}, ID: idPtr, Type: typ}
	prefixOK = base(prefix, verifyHeaders("X-Sig", "sha512="+hex.EncodeToString(macOf("sha512", []byte("s3cret"), schemeBody))))

	// List with a timestamp item, sha256, base64, over timestamp "." body, the URL and a header.
	list := settings.VerifySpec{Signature: settings.SignatureSpec{Header: "X-Sig", Format: settings.SignatureList, Separator: ";", Keys: []string{"v1"}},
		Algorithm: "sha256", Encoding: "base64", Timestamp: settings.TimestampSpec{Signature: "t"},
		Signed: []settings.SignedPart{{Kind: settings.PartMethod}, {Kind: settings.PartTimestamp}, {Kind: settings.PartLiteral, Value: "."},
			{Kind: settings.PartBody}, {Kind: settings.PartURL}, {Kind: settings.PartHeader, Value: "X-Id"}},
		URL: "https://hooks.example.com/hooks/src", ID: settings.IdentitySpec{Header: "X-Id"}, Type: settings.TypeSpec{Header: "X-Event", Pointer: "/kind"}}
	listMsg := "POST" + ts + "." + schemeBody + "https://hooks.example.com/hooks/src?a=1" + "d-1"
	listSig = base64.StdEncoding.EncodeToString(macOf("sha256", []byte("s3cret"), listMsg))
	listOK = base(list, verifyHeaders("X-Sig", "t="+ts+";v1=bm90IGl0;v1="+listSig, "X-Id", "d-1", "X-Event", "order"))

	// Plain, sha1, base64 key, timestamp header in milliseconds, composite identity.
	plain := settings.VerifySpec{Signature: settings.SignatureSpec{Header: "X-Sig"}, Algorithm: "sha1", Encoding: "hex", Key: "base64",
		Timestamp: settings.TimestampSpec{Header: "X-Ts", Format: settings.TimeUnixMS},
		Signed:    []settings.SignedPart{{Kind: settings.PartTimestamp}, {Kind: settings.PartBody}},
		ID:        settings.IdentitySpec{Composite: []string{"/order/ref", "/order/at", "/missing"}}, Type: typ,
		Occurred: settings.TimestampSpec{Pointer: "/order/at"}}
	ms := fmt.Sprint(verifyTestNow.UnixMilli())
	plainOK = base(plain, verifyHeaders("X-Sig", hex.EncodeToString(macOf("sha1", []byte("key!"), ms+schemeBody)), "X-Ts", ms))
	plainOK.Secrets = []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte("key!"))}

	// Body hash as the identity.
	hashed = prefix
	hashed.ID = settings.IdentitySpec{BodyHash: true}

	return prefixOK, listOK, plainOK, hashed, listSig
}

func TestVerifyDeclaredScheme(t *testing.T) {
	ts := fmt.Sprint(verifyTestNow.Unix())
	prefixOK, listOK, plainOK, hashed, listSig := declaredRequests()
	runVerifyCases(t, []verifyCase{
		{name: "PrefixSHA512Verifies", params: prefixOK,
			want: ledger.Delivery{ID: "evt_9", Type: "order.paid", Payload: []byte(schemeBody)}},
		{name: "PrefixTamperedBodyIsRefused", params: withParams(prefixOK, func(p *provider.VerifyParams) { p.Body = flipByte(p.Body, 5) }), wantCode: ledger.EUNAUTHORIZED},
		{name: "PrefixWrongSecretIsRefused", params: withParams(prefixOK, func(p *provider.VerifyParams) { p.Secrets = []string{"other"} }), wantCode: ledger.EUNAUTHORIZED},
		{name: "PrefixMissingHeaderIsRefused", params: withParams(prefixOK, func(p *provider.VerifyParams) { p.Header.Del("X-Sig") }), wantCode: ledger.EUNAUTHORIZED},
		{name: "PrefixOtherPrefixIsRefused", params: withParams(prefixOK, func(p *provider.VerifyParams) {
			p.Header.Set("X-Sig", "sha256="+p.Header.Get("X-Sig")[7:])
		}), wantCode: ledger.EUNAUTHORIZED},
		{name: "NoSecretIsRefused", params: withParams(prefixOK, func(p *provider.VerifyParams) { p.Secrets = []string{"", ""} }), wantCode: ledger.EUNAUTHORIZED},
		{name: "BodyHashIdentity", params: withParams(prefixOK, func(p *provider.VerifyParams) { p.Spec = &hashed }),
			want: ledger.Delivery{ID: "sha256:" + sha256Hex(schemeBody), Type: "order.paid", Payload: []byte(schemeBody)}},
		{name: "ListURLHeaderMethodVerifies", params: listOK,
			want: ledger.Delivery{ID: "d-1", Type: "order.order.paid", Payload: []byte(schemeBody)}},
		{name: "ListOtherQueryIsRefused", params: withParams(listOK, func(p *provider.VerifyParams) { p.Query = "a=2" }), wantCode: ledger.EUNAUTHORIZED},
		{name: "ListOtherMethodIsRefused", params: withParams(listOK, func(p *provider.VerifyParams) { p.Method = "PUT" }), wantCode: ledger.EUNAUTHORIZED},
		{name: "ListSignedHeaderChangedIsRefused", params: withParams(listOK, setParamHeader("X-Id", "d-2")), wantCode: ledger.EUNAUTHORIZED},
		{name: "ListStaleIsRefused", params: withParams(listOK, func(p *provider.VerifyParams) { p.Now = verifyTestNow.Add(6 * time.Minute) }), wantCode: ledger.EUNAUTHORIZED},
		{name: "ListFutureIsRefused", params: withParams(listOK, func(p *provider.VerifyParams) { p.Now = verifyTestNow.Add(-6 * time.Minute) }), wantCode: ledger.EUNAUTHORIZED},
		{name: "ListNoTimestampIsRefused", params: withParams(listOK, setParamHeader("X-Sig", "v1="+listSig)), wantCode: ledger.EUNAUTHORIZED},
		{name: "ListRepeatedTimestampIsRefused", params: withParams(listOK, setParamHeader("X-Sig", "t="+ts+";t="+ts+";v1="+listSig)), wantCode: ledger.EUNAUTHORIZED},
		{name: "ListMissingSignedHeaderIsRefused", params: withParams(listOK, func(p *provider.VerifyParams) { p.Header.Del("X-Id") }), wantCode: ledger.EUNAUTHORIZED},
		{name: "PlainSHA1Base64KeyCompositeVerifies", params: plainOK,
			want: ledger.Delivery{ID: "o-1|1699999990|", Type: "order.paid", OccurredAt: time.Unix(1699999990, 0).UTC(), Payload: []byte(schemeBody)}},
		{name: "PlainStaleMillisecondsIsRefused", params: withParams(plainOK, func(p *provider.VerifyParams) { p.Now = verifyTestNow.Add(time.Hour) }), wantCode: ledger.EUNAUTHORIZED},
		{name: "PlainTimestampChangedIsRefused", params: withParams(plainOK, setParamHeader("X-Ts", fmt.Sprint(verifyTestNow.UnixMilli()+1))), wantCode: ledger.EUNAUTHORIZED},
		{name: "PlainMissingTimestampIsRefused", params: withParams(plainOK, func(p *provider.VerifyParams) { p.Header.Del("X-Ts") }), wantCode: ledger.EUNAUTHORIZED},
	})
}

func TestVerifyDeclaredSchemeIdentity(t *testing.T) {
	spec := settings.VerifySpec{Signature: settings.SignatureSpec{Header: "X-Sig"}, Algorithm: "sha256", Encoding: "hex",
		Signed: []settings.SignedPart{{Kind: settings.PartBody}}, ID: settings.IdentitySpec{Pointer: "/id"}}
	sign := func(body string, id settings.IdentitySpec) provider.VerifyParams {
		s := spec
		s.ID = id
		return provider.VerifyParams{Provider: settings.ProviderHMAC, Spec: &s, Secrets: []string{"k"},
			Header: verifyHeaders("X-Sig", hex.EncodeToString(testHMAC([]byte("k"), body))), Body: []byte(body)}
	}
	long := `{"a":"` + fmt.Sprintf("%0300d", 1) + `","b":"x"}`
	runVerifyCases(t, []verifyCase{
		{name: "NumericIDPointerIsInvalid", params: sign(`{"id":42}`, settings.IdentitySpec{Pointer: "/id"}), wantCode: ledger.EINVALID},
		{name: "CompositeNonePresentIsInvalid", params: sign(`{"x":1}`, settings.IdentitySpec{Composite: []string{"/a", "/b"}}), wantCode: ledger.EINVALID},
		{name: "CompositeWithBarIsHashed", params: sign(`{"a":"p|q","b":"r"}`, settings.IdentitySpec{Composite: []string{"/a", "/b"}}),
			want: ledger.Delivery{ID: "sha256:" + sha256Hex("p|q\x1fr"), Payload: []byte(`{"a":"p|q","b":"r"}`)}},
		{name: "CompositeLongIsHashed", params: sign(long, settings.IdentitySpec{Composite: []string{"/a", "/b"}}),
			want: ledger.Delivery{ID: "sha256:" + sha256Hex(fmt.Sprintf("%0300d", 1)+"\x1fx"), Payload: []byte(long)}},
		{name: "ArrayBodyIsInvalidUnlessDeclared", params: sign(`[{"id":"a"}]`, settings.IdentitySpec{Pointer: "/0/id"}), wantCode: ledger.EINVALID},
		{name: "EscapedMemberNameIsRead", params: sign(`{"\u0069d":"e1"}`, settings.IdentitySpec{Pointer: "/id"}),
			want: ledger.Delivery{ID: "e1", Payload: []byte(`{"\u0069d":"e1"}`)}},
		{name: "RepeatedMemberCountsByItsLastValue", params: sign(`{"id":"e1","id":"e2"}`, settings.IdentitySpec{Pointer: "/id"}),
			want: ledger.Delivery{ID: "e2", Payload: []byte(`{"id":"e1","id":"e2"}`)}},
		{name: "PointerEscapesAreRead", params: sign(`{"a/b":{"c~d":"e3"}}`, settings.IdentitySpec{Pointer: "/a~1b/c~0d"}),
			want: ledger.Delivery{ID: "e3", Payload: []byte(`{"a/b":{"c~d":"e3"}}`)}},
	})
	t.Run("ArrayBodyWhenDeclared", func(t *testing.T) {
		p := sign(`[{"id":"a"},{"id":"b"}]`, settings.IdentitySpec{Pointer: "/1/id"})
		p.Spec.Array = true
		d, err := provider.Verify(p)
		if err != nil || d.ID != "b" {
			t.Fatalf("Verify() = %+v, %v; want id b", d, err)
		}
	})
}
