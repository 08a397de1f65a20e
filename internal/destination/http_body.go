package destination

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// createRequest is the body and content type of a create call: the params, with the
// operation key at the reference field, as JSON or as a flat form.
func (h *HTTP) createRequest(c ledger.Call) ([]byte, string, error) {
	if c.OperationKey == "" {
		return nil, "", fmt.Errorf("the call has no operation key")
	}
	fields := map[string]any{}
	if p := bytes.TrimSpace(c.Params); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(p))
		dec.UseNumber() // amounts and ids pass through digit for digit
		if err := dec.Decode(&fields); err != nil {
			return nil, "", fmt.Errorf("params are not a JSON object: %w", err)
		}
	}
	if h.d.ReferenceField != "" {
		if err := setPointer(fields, h.d.ReferenceField, c.OperationKey); err != nil {
			return nil, "", fmt.Errorf("put the operation key at reference_field %s: %w", h.d.ReferenceField, err)
		}
	}
	if h.d.Create.Encoding == settings.EncodingForm {
		b, err := formBody(fields)
		return b, "application/x-www-form-urlencoded", err
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return nil, "", fmt.Errorf("encode params: %w", err)
	}
	return b, "application/json", nil
}

// setPointer puts v at the JSON pointer ptr in doc, creating the objects missing
// on the way; an index goes into an element a list param already holds (HubSpot's
// batch inputs). It refuses to go through any other value.
func setPointer(doc map[string]any, ptr string, v any) error {
	tokens := strings.Split(ptr, "/")[1:]
	var cur any = doc
	for i, t := range tokens {
		t = strings.NewReplacer("~1", "/", "~0", "~").Replace(t)
		last := i == len(tokens)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[t] = v
				return nil
			}
			if next, ok := c[t]; ok && next != nil {
				cur = next
				continue
			}
			m := map[string]any{}
			c[t], cur = m, m
		case []any:
			n, err := strconv.Atoi(t)
			if err != nil || n < 0 || n >= len(c) {
				return fmt.Errorf("%q is not an element of a list of %d", t, len(c))
			}
			if last {
				c[n] = v
				return nil
			}
			cur = c[n]
		default:
			return fmt.Errorf("%q is under a value that is not an object or a list", t)
		}
	}
	return nil
}

// formBody encodes flat fields as application/x-www-form-urlencoded, in key order;
// a list repeats its key (Mailgun's "to"), null leaves the field out.
func formBody(fields map[string]any) ([]byte, error) {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	add := func(k string, v any) error {
		s, err := formValue(v)
		if err != nil {
			return fmt.Errorf("form field %q: %w", k, err)
		}
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(k) + "=" + url.QueryEscape(s))
		return nil
	}
	for _, k := range keys {
		switch v := fields[k].(type) {
		case nil:
		case []any:
			for _, e := range v {
				if err := add(k, e); err != nil {
					return nil, err
				}
			}
		default:
			if err := add(k, v); err != nil {
				return nil, err
			}
		}
	}
	return []byte(b.String()), nil
}

func formValue(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		return fmt.Sprint(x), nil
	case float64:
		return json.Number(fmt.Sprint(x)).String(), nil
	}
	return "", fmt.Errorf("a form holds text, numbers and booleans, not %T", v)
}

// withRef replaces "{ref}" in every string of a body template by key.
func withRef(v any, key string) any {
	switch x := v.(type) {
	case string:
		return strings.ReplaceAll(x, "{ref}", key)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = withRef(e, key)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = withRef(e, key)
		}
		return out
	}
	return v
}
