package provider

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// decodeJSONObject reads the members it is asked for as encoding/json decodes the
// body into a struct of json.RawMessage fields: the same bodies refused, the same
// bytes for each member, whatever the case, escapes, repeats and nesting.
func FuzzDecodeJSONObject(f *testing.F) {
	for _, seed := range []string{
		`{"id":"evt_1","object":"event","type":"checkout.session.completed","created":1533204620,` +
			`"data":{"object":{"id":"cs_1","type":"nested","metadata":{"created":"no"}}}}`,
		`{"id":"evt_1","id":"evt_2"}`,
		`{"ID":"evt_upper","type":"t"}`,
		`{"id":"evt_1","Id":"evt_2"}`,
		`{"\u0069d":"evt_escaped"}`,
		`{"typé":"x","type":"y"}`,
		`{"ty\u212Ape":"kelvin"}`,
		` { "id" : null , "type" : [1, {"a": "}"}], "created" : -1.5e3 } `,
		`{"id":"a\"b\\","type":"\u00e9"}`,
		`{}`,
		`{"id":"evt_1",}`,
		`{"id":"evt_1"} {"id":"evt_2"}`,
		`{"id":`,
		`[{"id":"evt_1"}]`,
		`"id"`,
		``,
		"{\"id\":\"\xff\"}",
	} {
		f.Add([]byte(seed))
	}
	names := []string{"id", "type", "created"}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := decodeJSONObject(body, names...)
		var want struct {
			ID      json.RawMessage `json:"id"`
			Type    json.RawMessage `json:"type"`
			Created json.RawMessage `json:"created"`
		}
		trimmed := bytes.TrimLeft(body, " \t\r\n")
		wantErr := len(trimmed) == 0 || !utf8.Valid(body) || trimmed[0] != '{' || json.Unmarshal(body, &want) != nil
		if (err != nil) != wantErr {
			t.Fatalf("body %q: error %v, want an error: %v", body, err, wantErr)
		}
		if err != nil {
			return
		}
		for i, w := range []json.RawMessage{want.ID, want.Type, want.Created} {
			if !bytes.Equal(got[i], w) {
				t.Errorf("body %q: member %s = %q, encoding/json reads %q", body, names[i], got[i], w)
			}
		}
	})
}

// The members read by their bytes, against the struct decoding they replaced.
func BenchmarkDecodeJSONObject(b *testing.B) {
	body := []byte(`{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","api_version":"2022-11-15",` +
		`"created":1686089970,"data":{"object":{"id":"cs_test_a1","object":"checkout.session",` +
		`"amount_total":2000,"currency":"usd","customer_details":{"email":"ada@example.com","name":"Ada"},` +
		`"metadata":{"enquiry_id":"enq-1","course":"go"},"line_items":[{"price":"price_1","quantity":1}]}},` +
		`"livemode":false,"pending_webhooks":1,"type":"checkout.session.completed"}`)
	b.Run("members", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeJSONObject(body, "id", "type", "created"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("struct", func(b *testing.B) {
		for b.Loop() {
			var v struct {
				ID      json.RawMessage `json:"id"`
				Type    json.RawMessage `json:"type"`
				Created json.RawMessage `json:"created"`
			}
			if err := json.Unmarshal(body, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
