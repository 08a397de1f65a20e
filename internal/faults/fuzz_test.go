package faults

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/oncehook/oncehook/internal/inbox"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/provider"
	"github.com/oncehook/oncehook/internal/sender"
)

// FuzzSignedBody signs whatever the fuzzer writes (body, delivery id, event type)
// correctly for each provider, so the signature always holds and only the content
// is hostile. Verify must then accept it or refuse it as EINVALID, never panic or
// call it unsigned; and what it accepts, CheckDelivery (the inbox's gate) either
// refuses as EINVALID or passes as text Postgres can store.
func FuzzSignedBody(f *testing.F) {
	providers := []string{ledger.ProviderStripe, ledger.ProviderGitHub, ledger.ProviderShopify, ledger.ProviderStandardWebhooks}
	for i := range providers {
		f.Add(uint8(i), []byte(`{"id":"evt_1","type":"checkout.session.completed","action":"opened"}`), "d-1", "issues")
		f.Add(uint8(i), []byte(`{"id":"evt_\u0000","type":"\ud800"}`), "d-\x00", "t\xff")
		f.Add(uint8(i), []byte(strings.Repeat("[", 20_000)+strings.Repeat("]", 20_000)), "d-2", "orders/create")
		f.Add(uint8(i), []byte("{\"id\":\"\xff\xfe\",\"type\":\"x\"}"), strings.Repeat("i", 600), "")
		f.Add(uint8(i), []byte(""), "", "")
	}
	secrets := map[string]string{
		ledger.ProviderStripe: "whsec_fuzz", ledger.ProviderGitHub: "fuzz-github",
		ledger.ProviderShopify: "fuzz-shopify", ledger.ProviderStandardWebhooks: "whsec_ZnV6ei1zdGFuZGFyZA==",
	}
	at := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, which uint8, body []byte, id, typ string) {
		p := providers[int(which)%len(providers)]
		hdr, err := sender.Headers(p, secrets[p], sender.Delivery{ID: id, Type: typ, Body: body, At: at})
		if err != nil {
			t.Fatal(err)
		}
		d, err := provider.Verify(provider.VerifyParams{Provider: p, Secrets: []string{secrets[p]},
			Tolerance: 5 * time.Minute, Now: at, Header: hdr, Body: body})
		if err != nil {
			if code := ledger.ErrorCode(err); code != ledger.EINVALID {
				t.Fatalf("%s: a correctly signed request was refused with %q: %v", p, code, err)
			}
			return
		}
		if err := inbox.CheckDelivery(d); err != nil {
			if code := ledger.ErrorCode(err); code != ledger.EINVALID {
				t.Fatalf("%s: CheckDelivery refused with %q: %v", p, code, err)
			}
			return
		}
		for name, v := range map[string]string{"id": d.ID, "type": d.Type} {
			if !utf8.ValidString(v) || strings.ContainsRune(v, 0) || len(v) > 512 {
				t.Fatalf("%s: the %s %q passed the inbox's gate but cannot be stored as text", p, name, v)
			}
		}
		if d.ID == "" {
			t.Fatalf("%s: accepted without a delivery id", p)
		}
	})
}
