// Package jsonpointer reads RFC 6901 JSON pointers over documents decoded by
// encoding/json: the pointers of the config's rules, conditions and params.
package jsonpointer

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Valid returns nil when ptr is an RFC 6901 JSON pointer: "" (the whole
// document) or a sequence of "/"-prefixed reference tokens in which "~" only appears
// as the escapes "~0" ("~") and "~1" ("/"). Anything else is an error naming the
// problem.
func Valid(ptr string) error {
	if ptr == "" {
		return nil
	}
	if ptr[0] != '/' {
		return fmt.Errorf("JSON pointer %q must be empty or start with \"/\"", ptr)
	}
	if !utf8.ValidString(ptr) {
		// Decoded JSON keys are always valid UTF-8, so such a pointer could never match.
		return fmt.Errorf("JSON pointer %q is not valid UTF-8", ptr)
	}
	for i := 0; i < len(ptr); i++ {
		if ptr[i] == '~' && (i+1 == len(ptr) || ptr[i+1] != '0' && ptr[i+1] != '1') {
			return fmt.Errorf("JSON pointer %q has a \"~\" that is not ~0 or ~1", ptr)
		}
	}
	return nil
}

// Tokens splits a valid pointer into its unescaped reference tokens. The
// order of the replacements is the RFC's: "~01" must become "~1", not "/".
func Tokens(ptr string) []string {
	if ptr == "" {
		return nil
	}
	toks := strings.Split(ptr[1:], "/")
	for i, t := range toks {
		if strings.Contains(t, "~") {
			toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		}
	}
	return toks
}

// Get evaluates the RFC 6901 pointer ptr over doc, a value decoded by
// encoding/json (map[string]any, []any, scalars). It reports false when ptr is
// invalid or names nothing. Array indices are decimal without leading zeros; "-"
// (the element after the last) never matches, since it exists only for writing.
func Get(doc any, ptr string) (any, bool) {
	if Valid(ptr) != nil {
		return nil, false
	}
	cur := doc
	for _, tok := range Tokens(ptr) {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, ok := arrayIndex(tok)
			if !ok || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func arrayIndex(tok string) (int, bool) {
	if tok == "" || tok[0] < '0' || tok[0] > '9' || tok[0] == '0' && len(tok) > 1 {
		return 0, false
	}
	i, err := strconv.Atoi(tok) // also refuses trailing non-digits and overflow
	return i, err == nil
}

// String evaluates ptr over doc like Get and renders the scalar it finds
// as a business-key part: strings as they are, integers without exponent or
// fraction, booleans as "true"/"false". Objects, arrays, null and missing values
// report false, because they do not name one business operation.
//
// Decode payloads with json.Decoder.UseNumber: a json.Number integer is kept digit
// for digit ("1234567890123456789"), where a float64 would already have lost it.
func String(doc any, ptr string) (string, bool) {
	v, ok := Get(doc, ptr)
	if !ok {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case json.Number:
		return numberString(string(v))
	case float64:
		return floatString(v)
	case float32:
		return floatString(float64(v))
	case int:
		return strconv.Itoa(v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case uint64:
		return strconv.FormatUint(v, 10), true
	}
	return "", false
}

// numberString keeps integer literals exactly and normalises other spellings
// ("1.0", "1e3") through float64, so the same number gives the same key.
func numberString(s string) (string, bool) {
	digits := strings.TrimPrefix(s, "-")
	if digits != "" && strings.Trim(digits, "0123456789") == "" {
		if strings.Trim(digits, "0") == "" {
			return "0", true // "-0" and "0" are the same key
		}
		return s, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		// Beyond float64's range: the text is the only stable rendering left.
		return s, errors.Is(err, strconv.ErrRange)
	}
	return floatString(f)
}

func floatString(f float64) (string, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return "", false
	}
	if f == 0 {
		return "0", true
	}
	return strconv.FormatFloat(f, 'f', -1, 64), true
}
