package jsonpointer

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// rfc6901Doc is the example document of RFC 6901 section 5.
const rfc6901Doc = `{
  "foo": ["bar", "baz"],
  "": 0,
  "a/b": 1,
  "c%d": 2,
  "e^f": 3,
  "g|h": 4,
  "i\\j": 5,
  "k\"l": 6,
  " ": 7,
  "m~n": 8
}`

func decodeJSON(t testing.TB, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestGet(t *testing.T) {
	t.Parallel()
	doc := decodeJSON(t, rfc6901Doc)
	tests := []struct {
		name, ptr string
		want      any
		found     bool
	}{
		// RFC 6901 section 5, every pointer in the order the RFC lists them.
		{"RFC6901WholeDocument", "", doc, true},
		{"RFC6901Array", "/foo", []any{"bar", "baz"}, true},
		{"RFC6901ArrayElement", "/foo/0", "bar", true},
		{"RFC6901EmptyKey", "/", json.Number("0"), true},
		{"RFC6901EscapedSlash", "/a~1b", json.Number("1"), true},
		{"RFC6901Percent", "/c%d", json.Number("2"), true},
		{"RFC6901Caret", "/e^f", json.Number("3"), true},
		{"RFC6901Pipe", "/g|h", json.Number("4"), true},
		{"RFC6901Backslash", `/i\j`, json.Number("5"), true},
		{"RFC6901Quote", `/k"l`, json.Number("6"), true},
		{"RFC6901Space", "/ ", json.Number("7"), true},
		{"RFC6901EscapedTilde", "/m~0n", json.Number("8"), true},

		{"SecondElement", "/foo/1", "baz", true},
		{"DashNeverMatches", "/foo/-", nil, false},
		{"LeadingZeroIsNoIndex", "/foo/01", nil, false},
		{"SignedIndexIsNoIndex", "/foo/+1", nil, false},
		{"NegativeIndexIsNoIndex", "/foo/-1", nil, false},
		{"IndexPastTheEnd", "/foo/2", nil, false},
		{"HugeIndex", "/foo/99999999999999999999", nil, false},
		{"MissingKey", "/nope", nil, false},
		{"IntoAScalar", "/foo/0/x", nil, false},
		{"UnescapedTildeIsInvalid", "/m~n", nil, false},
		{"NoLeadingSlashIsInvalid", "foo", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, found := Get(doc, tt.ptr)
			if found != tt.found {
				t.Fatalf("Get(%q) found = %v, want %v", tt.ptr, found, tt.found)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Get(%q) mismatch (-want +got):\n%s", tt.ptr, diff)
			}
		})
	}

	t.Run("TildeOneIsUnescapedBeforeTildeZero", func(t *testing.T) {
		t.Parallel()
		doc := decodeJSON(t, `{"~1": "tilde-one", "/": "slash"}`)
		if got, _ := Get(doc, "/~01"); got != "tilde-one" {
			t.Errorf(`Get("/~01") = %v, want "tilde-one" (RFC 6901 section 4)`, got)
		}
	})
}

func TestValid(t *testing.T) {
	t.Parallel()
	for _, ptr := range []string{"", "/", "/a/b", "/~0~1", "//", "/ü"} {
		if err := Valid(ptr); err != nil {
			t.Errorf("Valid(%q) = %v, want nil", ptr, err)
		}
	}
	for _, ptr := range []string{"a", "#/a", "/a~", "/a~2", "/~~0", "/\xff"} {
		if err := Valid(ptr); err == nil {
			t.Errorf("Valid(%q) = nil, want an error", ptr)
		}
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	doc := decodeJSON(t, `{
		"s": "enq-42", "big": 1234567890123456789012, "int": 1234567890123,
		"one": 1.0, "exp": 1e3, "neg0": -0, "frac": 12.5, "huge": 1e400,
		"t": true, "f": false, "null": null, "obj": {}, "arr": []
	}`)
	floats := map[string]any{"ms": float64(1234567890123), "big": 1e21, "frac": 0.25}
	tests := []struct {
		name string
		doc  any
		ptr  string
		want string
		ok   bool
	}{
		{"StringAsIs", doc, "/s", "enq-42", true},
		{"IntegerKeptDigitForDigit", doc, "/big", "1234567890123456789012", true},
		{"Integer", doc, "/int", "1234567890123", true},
		{"IntegralFractionNormalised", doc, "/one", "1", true},
		{"ExponentSpelledOut", doc, "/exp", "1000", true},
		{"NegativeZeroIsZero", doc, "/neg0", "0", true},
		{"Fraction", doc, "/frac", "12.5", true},
		{"BeyondFloatKeepsItsText", doc, "/huge", "1e400", true},
		{"True", doc, "/t", "true", true},
		{"False", doc, "/f", "false", true},
		{"NullIsNoKey", doc, "/null", "", false},
		{"ObjectIsNoKey", doc, "/obj", "", false},
		{"ArrayIsNoKey", doc, "/arr", "", false},
		{"MissingIsNoKey", doc, "/nope", "", false},
		{"Float64WithoutExponent", floats, "/ms", "1234567890123", true},
		{"LargeFloat64WithoutExponent", floats, "/big", "1000000000000000000000", true},
		{"Float64Fraction", floats, "/frac", "0.25", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := String(tt.doc, tt.ptr)
			if got != tt.want || ok != tt.ok {
				t.Errorf("String(%q) = %q, %v; want %q, %v", tt.ptr, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzPointer(f *testing.F) {
	f.Add([]byte(rfc6901Doc), "/a~1b")
	f.Add([]byte(`{"a":[{"b":1}]}`), "/a/0/b")
	f.Fuzz(func(t *testing.T, data []byte, ptr string) {
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var doc any
		if d.Decode(&doc) != nil {
			return
		}
		v, found := Get(doc, ptr)
		s, ok := String(doc, ptr)
		if ok && !found {
			t.Fatalf("String(%q) = %q but Get found nothing", ptr, s)
		}
		if Valid(ptr) != nil {
			if found {
				t.Fatalf("invalid pointer %q found %v", ptr, v)
			}
			return
		}
		// Unescaping is reversible for a valid pointer: escaping the tokens again
		// gives the same text, so a pointer names exactly one path.
		var b strings.Builder
		for _, tok := range Tokens(ptr) {
			b.WriteString("/" + strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1"))
		}
		if b.String() != ptr {
			t.Fatalf("tokens of %q escape back to %q", ptr, b.String())
		}
		// A pointer that resolves has a parent that resolves to a container.
		if found && ptr != "" {
			parent, ok := Get(doc, ptr[:strings.LastIndex(ptr, "/")])
			switch parent.(type) {
			case map[string]any, []any:
			default:
				t.Fatalf("parent of %q is %T (found %v)", ptr, parent, ok)
			}
		}
	})
}
