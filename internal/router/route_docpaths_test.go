package router

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/oncehook/oncehook/internal/jsonpointer"
	"github.com/oncehook/oncehook/internal/settings"
)

// The router decodes only what the rules read; at every pointer of the rules it
// must find what the whole document holds, for every shape a body may take.
func TestDecodeDocFindsWhatTheWholeDocumentHolds(t *testing.T) {
	bodies := []string{
		`{"id":"evt_1","type":"checkout.session.completed","created":1700000000,"data":{"object":{"id":"cs_1","amount_total":40500,` +
			`"customer_details":{"email":"ada@example.com","address":{"city":"London"}},"metadata":{"enquiry_id":"enq-1"},` +
			`"line_items":[{"id":"li_0","price":{"unit_amount":4500}},{"id":"li_1","price":{"unit_amount":1.50e3}}]}}}`,
		" \n\t{ \"data\" : { \"object\" : { \"metadata\" : { \"enquiry_id\" : \"e\\\"1\\u00e9\" } , \"amount_total\" : -0.5 } } } ",
		`{"data":{"object":{"metadata":{"enquiry_id":"first"}}},"data":{"object":{"metadata":{"enquiry_id":"last"}}}}`,
		`{"d\u0061ta":{"object":{"metadata":{"enquiry_id":"escaped name"},"a/b":1,"m~n":2,"":3}}}`,
		`{"data":{"object":{"metadata":null,"line_items":[],"amount_total":true}}}`,
		`{"data":{"object":{"metadata":{"enquiry_id":12345678901234567890},"line_items":[[1,2],{"id":"x"},"s",null]}}}`,
		`{"data":{"object":"a string where an object was"}} trailing bytes encoding/json's Decoder never reads`,
		`{"data":{"object":{"metadata":{"enquiry_id":"x"}}}}{"second":"document"}`,
		`[{"data":1},{"id":"in an array"}]`,
		`"just a string"`,
		`12`,
		`null`,
		`{}`,
		`{"data":{"object":{"line_items":{"0":{"id":"an object with a numeric name"}}}}}`,
		`{"data":{"object":{"customer_details":{"email":"a@b","nested":{"deep":[{"x":"}]\"{["}]}}}}}`,
		"{\"data\":{\"object\":{\"metadata\":{\"enquiry_id\":\"bad \xff UTF-8\"},\"amount_total\":\"\xc3\"}},\"id\":\"\xe9t\xe9\"}",
		"{\"d\xffta\":1,\"data\":{\"object\":{\"metadata\":{\"enquiry_id\":\"after a bad name\"}}}}",
	}
	pointers := []string{
		"/data/object/metadata/enquiry_id", "/data/object/amount_total", "/data/object/customer_details/email",
		"/data/object/customer_details", "/data/object/line_items/0/id", "/data/object/line_items/1/price/unit_amount",
		"/data/object/line_items/3", "/data/object/line_items/01", "/data/object/line_items/-", "/id", "/created",
		"/data/object/a~1b", "/data/object/m~0n", "/data/object/", "/0/data", "/1/id", "/type",
	}
	rules := []settings.ActionRule{{
		Key:        []string{pointers[0], "/id"},
		Resource:   "/data/object/id",
		OccurredAt: "/created",
		Params: []settings.Param{
			{Name: "enquiry", Pointer: pointers[0]}, {Name: "amount", Pointer: pointers[1]},
			{Name: "nested", IsObject: true, Object: []settings.Param{{Name: "email", Pointer: pointers[2]}, {Name: "who", Pointer: pointers[3]}}},
			{Name: "list", IsList: true, List: []settings.Param{{Name: "a", Pointer: pointers[4]}, {Name: "b", Pointer: pointers[5]},
				{Name: "c", Pointer: pointers[6]}, {Name: "d", Pointer: pointers[7]}, {Name: "e", Pointer: pointers[8]}}},
			{Name: "k", Const: "v"}, {Name: "r", Result: "earlier"},
		},
	}, {Key: pointers[9:]}}
	paths := pathsFor(rules)
	for i, body := range bodies {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			var whole any
			dec := json.NewDecoder(bytes.NewReader([]byte(body)))
			dec.UseNumber()
			wholeErr := dec.Decode(&whole)
			got, err := decodeDoc([]byte(body), paths)
			if (err != nil) != (wholeErr != nil) {
				t.Fatalf("decodeDoc error %v, whole document's %v", err, wholeErr)
			}
			for _, ptr := range append(pointers, "/data/object/id") {
				wv, wok := jsonpointer.Get(whole, ptr)
				gv, gok := jsonpointer.Get(got, ptr)
				if wok != gok || !reflect.DeepEqual(wv, gv) {
					t.Errorf("%s: got %#v, %v; the whole document has %#v, %v", ptr, gv, gok, wv, wok)
				}
				ws, wsok := jsonpointer.String(whole, ptr)
				gs, gsok := jsonpointer.String(got, ptr)
				if ws != gs || wsok != gsok {
					t.Errorf("%s as a string: got %q, %v; the whole document has %q, %v", ptr, gs, gsok, ws, wsok)
				}
			}
			for _, rule := range rules {
				wp, wu, err1 := renderParams(whole, rule.Params)
				gp, gu, err2 := renderParams(got, rule.Params)
				if !bytes.Equal(wp, gp) || wu != gu || (err1 != nil) != (err2 != nil) {
					t.Errorf("params: got %s, the whole document gives %s", gp, wp)
				}
			}
		})
	}
	for _, bad := range []string{``, `{"data":`, `{"data":{"object":1,}}`, `{'data':1}`, `{"a":"\x"}`, `nope`} {
		if _, err := decodeDoc([]byte(bad), paths); err == nil {
			t.Errorf("decodeDoc(%q): no error, want the one encoding/json gives", bad)
		}
	}
	if whole := pathsFor([]settings.ActionRule{{Key: []string{""}}, {Key: []string{"/id"}}}); !whole.whole {
		t.Errorf("a rule reading the whole document: paths %+v, want whole", whole)
	}
}
