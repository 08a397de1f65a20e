package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
)

// Valid answers as encoding/json.Valid does, on the bodies webhooks bring and on
// the ways JSON goes wrong: what jsonscan and the router's reading assume of a body
// is what Valid let through.
func FuzzValid(f *testing.F) {
	for _, s := range []string{
		``, ` `, `{}`, `[]`, `{"a":1}`, "\"\xff\"", "\"\x01\"", `01`, `-`, `1e`, `1e999`, `[1,]`,
		`{"a":1,}`, `{"a" 1}`, `nul`, `null `, " \t\r\n{}\n", `"\u12"`, `"\ud800"`, `[[[[[[[[]]]]]]]]`,
		`{"a":"b"}x`, `1 2`, `"\/"`, `"\x"`, "\xef\xbb\xbf{}", `{"a":[1,2,{"b":null}]}`, `-0.0e+1`,
		`.5`, `+1`, `0x10`, `tru`, `true`, `"a`, `{"id":"evt_1","data":{"object":{"amount_total":4200}}}`,
		"{\"a\":\"\u2028\"}", `{"a":"\u00e9\ud83d\ude00"}`, `[1e+2,-3.5E-7,0]`, "{\"a\":\t1\n}", `{"":""}`,
	} {
		f.Add([]byte(s))
	}
	// Around encoding/json's limit on nesting, which the fuzzer does not reach.
	for _, n := range []int{maxDepth, maxDepth + 1} {
		f.Add([]byte(strings.Repeat("[", n) + strings.Repeat("]", n)))
		f.Add([]byte(`{"a":` + strings.Repeat(`{"b":[`, n/2) + `"]}"` + strings.Repeat("]}", n/2) + "}"))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Errorf("Valid(%q) = %v, encoding/json.Valid says %v", b, got, want)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	body := []byte(`{"id":"evt_1","object":"event","api_version":"2024-06-20","created":1733000000,` +
		`"data":{"object":{"id":"cs_test_1","object":"checkout.session","amount_total":4200,"currency":"eur",` +
		`"customer_details":{"email":"buyer@example.com","name":"Buyer","address":{"city":"Berlin","country":"DE"}},` +
		`"metadata":{"enquiry_id":"enq_1"},"mode":"payment","payment_status":"paid","status":"complete"}},` +
		`"livemode":false,"pending_webhooks":1,"request":{"id":null,"idempotency_key":null},"type":"checkout.session.completed"}`)
	b.Run("jsonscan", func(b *testing.B) {
		for b.Loop() {
			Valid(body)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			json.Valid(body)
		}
	})
}
