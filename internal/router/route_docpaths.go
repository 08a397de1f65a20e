package router

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/oncehook/oncehook/internal/jsonpointer"
	"github.com/oncehook/oncehook/internal/jsonscan"
	"github.com/oncehook/oncehook/internal/settings"
)

// docPaths is what a source's rules read of an event's document: the values their
// pointers name, each decoded whole, and the objects and arrays on the way to them,
// holding only the members on those ways. The router decodes no more than that:
// most of a body is values no rule reads (line items, addresses), and decoding
// them whole would cost as much as the rest of routing.
type docPaths struct {
	whole bool                 // the value here is read whole
	next  map[string]*docPaths // by the member name or the array index (decimal) of the next token
}

// pathsFor returns what rules read of a document.
func pathsFor(rules []settings.ActionRule) *docPaths {
	root := &docPaths{}
	for _, rule := range rules {
		for _, ptr := range rule.Key {
			root.add(ptr)
		}
		for _, ptr := range []string{rule.Resource, rule.OccurredAt} {
			if ptr != "" {
				root.add(ptr)
			}
		}
		root.addParams(rule.Params)
		for _, c := range rule.When {
			root.add(c.Pointer)
		}
		for _, cs := range rule.CancelWhen {
			for _, c := range cs {
				root.add(c.Pointer)
			}
		}
	}
	return root
}

func (d *docPaths) addParams(params []settings.Param) {
	for _, p := range params {
		switch {
		case p.Result != "":
		case p.Pointer != "":
			d.add(p.Pointer)
		case p.Money != nil:
			d.add(p.Money.Amount)
			if strings.HasPrefix(p.Money.Currency, "/") {
				d.add(p.Money.Currency)
			}
		case p.IsObject:
			d.addParams(p.Object)
		case p.IsList:
			d.addParams(p.List)
		}
	}
}

// add marks the value ptr names as read whole. An invalid pointer names nothing.
func (d *docPaths) add(ptr string) {
	if jsonpointer.Valid(ptr) != nil {
		return
	}
	for _, tok := range jsonpointer.Tokens(ptr) {
		if d.whole {
			return
		}
		if d.next == nil {
			d.next = map[string]*docPaths{}
		}
		n := d.next[tok]
		if n == nil {
			n = &docPaths{}
			d.next[tok] = n
		}
		d = n
	}
	d.whole, d.next = true, nil
}

// decodeDoc decodes the first JSON value of body as encoding/json's Decoder does
// (numbers as json.Number; what follows the value is not read), keeping only what
// paths names: Pointer and PointerString find the same values in it at every
// pointer added to paths as in the whole document.
func decodeDoc(body []byte, paths *docPaths) (any, error) {
	if paths != nil && !paths.whole {
		// An object or an array: its end, as long as it is valid JSON, is where
		// jsonscan.SkipValue finds it, and then the Decoder reads just that value too.
		if start := jsonscan.SkipSpace(body, 0); start < len(body) && (body[start] == '{' || body[start] == '[') {
			if raw := body[start:jsonscan.SkipValue(body, start)]; jsonscan.Valid(raw) {
				return pick(raw, paths)
			}
		}
	}
	return decodeValue(body) // anything else, invalid JSON included, as the Decoder reads it
}

// decodeValue decodes the first JSON value of b as a Decoder with UseNumber does.
func decodeValue(b []byte) (any, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	err := dec.Decode(&v)
	return v, err
}

// literal decodes a valid JSON value that is a string without escapes, a number,
// true, false or null without encoding/json's machinery; ok is false for any other.
func literal(raw []byte) (v any, ok bool) {
	switch raw[0] {
	case '"':
		if bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) { // encoding/json makes bad UTF-8 U+FFFD
			return nil, false
		}
		return string(raw[1 : len(raw)-1]), true
	case 't':
		return true, true
	case 'f':
		return false, true
	case 'n':
		return nil, true
	case '{', '[':
		return nil, false
	}
	return json.Number(raw), true
}

// pick decodes what paths names of raw, a valid JSON value without space after it.
func pick(raw []byte, paths *docPaths) (any, error) {
	i := jsonscan.SkipSpace(raw, 0)
	switch {
	case paths.whole || len(paths.next) == 0 || i == len(raw) || raw[i] != '{' && raw[i] != '[':
		if !paths.whole && len(paths.next) == 0 {
			return nil, nil // nothing under it is read (never the case for a node added by add)
		}
		if v, ok := literal(raw[i:]); ok {
			return v, nil
		}
		return decodeValue(raw)
	case raw[i] == '{':
		obj := make(map[string]any, len(paths.next))
		for i = jsonscan.SkipSpace(raw, i+1); raw[i] != '}'; {
			end := jsonscan.SkipString(raw, i)
			name, err := memberName(raw[i:end])
			if err != nil {
				return nil, err
			}
			i = jsonscan.SkipSpace(raw, end)
			i = jsonscan.SkipSpace(raw, i+1) // the colon
			end = jsonscan.SkipValue(raw, i)
			if n := paths.next[name]; n != nil {
				v, err := pick(raw[i:end], n)
				if err != nil {
					return nil, err
				}
				obj[name] = v // a repeated name: the last one counts, as in encoding/json
			}
			if i = jsonscan.SkipSpace(raw, end); raw[i] == ',' {
				i = jsonscan.SkipSpace(raw, i+1)
			}
		}
		return obj, nil
	default: // an array
		var arr []any
		for i = jsonscan.SkipSpace(raw, i+1); raw[i] != ']'; {
			end := jsonscan.SkipValue(raw, i)
			var v any
			if n := paths.next[strconv.Itoa(len(arr))]; n != nil {
				var err error
				if v, err = pick(raw[i:end], n); err != nil {
					return nil, err
				}
			}
			arr = append(arr, v)
			if i = jsonscan.SkipSpace(raw, end); raw[i] == ',' {
				i = jsonscan.SkipSpace(raw, i+1)
			}
		}
		if arr == nil {
			arr = []any{}
		}
		return arr, nil
	}
}

// memberName decodes a member name (a JSON string, quotes included).
func memberName(s []byte) (string, error) {
	if bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
		return string(s[1 : len(s)-1]), nil
	}
	var name string
	err := json.Unmarshal(s, &name)
	return name, err
}
