package provider

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oncehook/oncehook/internal/jsonpointer"
	"github.com/oncehook/oncehook/internal/jsonscan"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// timestamp returns the timestamp exactly as received and the instant it names; both
// zero when the scheme has none. A missing or unreadable timestamp is a bad signature:
// it is part of what the sender signs.
func (r *request) timestamp(items map[string][]string) (string, time.Time, error) {
	t := r.spec.Timestamp
	var raw, where string
	switch {
	case t.Header != "":
		raw, where = r.p.Header.Get(t.Header), t.Header+" header"
	case t.Signature != "":
		raw, where = first(items[t.Signature]), "timestamp in "+r.spec.Signature.Header+" header"
	case t.Pointer != "":
		raw, where = r.pointerString(t.Pointer), "timestamp "+t.Pointer
	default:
		return "", time.Time{}, nil
	}
	if raw == "" {
		return "", time.Time{}, errSignature("missing %s", where)
	}
	at, ok := parseTime(raw, t.Format)
	if !ok {
		return "", time.Time{}, errSignature("malformed %s", where)
	}
	return raw, at, nil
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// parseTime reads a time in format; unix and unix_ms accept plain digits only, so
// two spellings cannot name one signed instant.
func parseTime(s, format string) (time.Time, bool) {
	switch format {
	case settings.TimeRFC3339:
		t, err := time.Parse(time.RFC3339, s)
		return t.UTC(), err == nil
	case settings.TimeUnixMS:
		if len(s) > 18 {
			return time.Time{}, false
		}
		t, ok := parseUnixSeconds(s)
		if !ok {
			return time.Time{}, false
		}
		return time.UnixMilli(t.Unix()).UTC(), true
	}
	return parseUnixSeconds(s)
}

// signedContent returns the signed parts in order; the body is not copied.
func (r *request) signedContent(ts string) ([][]byte, error) {
	parts := make([][]byte, 0, len(r.spec.Signed))
	for _, part := range r.spec.Signed {
		switch part.Kind {
		case settings.PartBody:
			parts = append(parts, r.p.Body)
		case settings.PartTimestamp:
			parts = append(parts, []byte(ts))
		case settings.PartURL:
			parts = append(parts, []byte(r.url()))
		case settings.PartMethod:
			parts = append(parts, []byte(r.p.Method))
		case settings.PartHeader:
			parts = append(parts, []byte(r.p.Header.Get(part.Value)))
		case settings.PartLiteral:
			parts = append(parts, []byte(part.Value))
		case settings.PartPointer:
			parts = append(parts, []byte(r.pointerString(part.Value)))
		case settings.PartForm:
			var b bytes.Buffer
			if err := writeSortedForm(&b, r.p.Body); err != nil {
				return nil, err
			}
			parts = append(parts, b.Bytes())
		}
	}
	return parts, nil
}

// url is the request's URL as the provider saw it: the configured ingest URL and the
// query string as received.
func (r *request) url() string {
	if r.p.Query == "" {
		return r.spec.URL
	}
	return r.spec.URL + "?" + r.p.Query
}

// writeSortedForm writes each form parameter's name then its value, sorted by name
// (Twilio's scheme); repeated names keep their order.
func writeSortedForm(b *bytes.Buffer, body []byte) error {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return errSignature("the form body is malformed")
	}
	names := make([]string, 0, len(form))
	for k := range form {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, v := range form[k] {
			b.WriteString(k)
			b.WriteString(v)
		}
	}
	return nil
}

// payload returns the JSON document the rules read: the body, or a form's payload
// field, or a form's fields as an object.
func (r *request) payload() ([]byte, error) {
	if r.spec.Form == "" {
		return r.p.Body, nil
	}
	mediaType, _, err := mime.ParseMediaType(r.p.Header.Get("Content-Type"))
	if err != nil || mediaType != "application/x-www-form-urlencoded" {
		return r.p.Body, nil
	}
	form, err := url.ParseQuery(string(r.p.Body))
	if err != nil {
		return nil, &ledger.Error{Code: ledger.EINVALID, Message: "the form body is malformed", Err: err}
	}
	if r.spec.Form != "*" {
		if v := form.Get(r.spec.Form); v != "" {
			return []byte(v), nil
		}
		if !r.spec.FormFields {
			return nil, ledger.Errorf(ledger.EINVALID, "the form body has no %s field", r.spec.Form)
		}
	}
	fields := make(map[string]string, len(form))
	for k := range form {
		fields[k] = form.Get(k)
	}
	return json.Marshal(fields)
}

// document checks the JSON document once and returns it: an object, or where the
// scheme allows, an array (HubSpot and SendGrid post lists of events). Pointers are
// then read from its bytes, without decoding the rest.
func (r *request) document() ([]byte, error) {
	if r.done {
		return r.doc, r.derr
	}
	r.done = true
	body, err := r.payload()
	if err != nil {
		r.derr = err
		return nil, err
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	switch {
	case len(trimmed) == 0:
		r.derr = ledger.Errorf(ledger.EINVALID, "the body is empty")
	case !utf8.Valid(body):
		r.derr = ledger.Errorf(ledger.EINVALID, "the body is not valid UTF-8")
	case trimmed[0] != '{' && (trimmed[0] != '[' || !r.spec.Array):
		r.derr = ledger.Errorf(ledger.EINVALID, "the body is not a JSON object")
	case !jsonscan.Valid(body):
		r.derr = ledger.Errorf(ledger.EINVALID, "the body is not valid JSON")
	}
	r.doc = trimmed
	return r.doc, r.derr
}

// pointerString reads a string of the document; with scalars, numbers and booleans
// too, rendered as jsonpointer.String renders them. "" when the body is not JSON or
// the pointer names nothing of that kind.
func (r *request) pointerString(ptr string) string {
	v := r.pointerRaw(ptr)
	var x any
	switch {
	case len(v) == 0:
		return ""
	case v[0] == '"' && bytes.IndexByte(v, '\\') < 0:
		return string(v[1 : len(v)-1]) // the common case, without decoding
	case v[0] == '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return ""
		}
		return s
	case v[0] == 't' || v[0] == 'f':
		x = v[0] == 't'
	case v[0] == '-' || v[0] >= '0' && v[0] <= '9':
		x = json.Number(v)
	default: // objects, lists and null name no one thing
		return ""
	}
	s, _ := jsonpointer.String(x, "")
	return s
}

// pointerText reads a JSON string only: ids and types of an unexpected kind read as
// absent, as the built-in schemes read them.
func (r *request) pointerText(ptr string) string {
	v := r.pointerRaw(ptr)
	if len(v) == 0 || v[0] != '"' {
		return ""
	}
	return r.pointerString(ptr)
}

// pointerRaw returns the bytes of the value ptr names; nil when there is none. A
// repeated member name counts by its last value, as encoding/json decodes it.
func (r *request) pointerRaw(ptr string) []byte {
	doc, err := r.document()
	if err != nil || jsonpointer.Valid(ptr) != nil {
		return nil
	}
	v, rest := doc, ptr[1:]
	for more := true; more; {
		var tok string
		tok, rest, more = strings.Cut(rest, "/")
		if strings.Contains(tok, "~") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		}
		if v = child(v, tok); v == nil {
			return nil
		}
	}
	return v
}

// child returns the member tok of the object v, or its element tok of the array v.
func child(v []byte, tok string) []byte {
	switch v[0] {
	case '{':
		var found []byte
		jsonscan.Members(v, 0, func(name, value []byte) bool {
			if sameName(name, tok) {
				found = value
			}
			return true
		})
		return found
	case '[':
		n, err := strconv.Atoi(tok)
		if err != nil || n < 0 || tok != strconv.Itoa(n) {
			return nil
		}
		for i, k := jsonscan.SkipSpace(v, 1), 0; i < len(v) && v[i] != ']'; k++ {
			end := jsonscan.SkipValue(v, i)
			if k == n {
				return v[i:end]
			}
			if i = jsonscan.SkipSpace(v, end); i < len(v) && v[i] == ',' {
				i = jsonscan.SkipSpace(v, i+1)
			}
		}
	}
	return nil
}

// sameName reports whether a member's quoted name is tok, decoding escapes only
// where there are any.
func sameName(quoted []byte, tok string) bool {
	if bytes.IndexByte(quoted, '\\') < 0 {
		return string(quoted[1:len(quoted)-1]) == tok // compared without a copy
	}
	var s string
	return json.Unmarshal(quoted, &s) == nil && s == tok
}

// occurred reads the event's own time: a header or pointer holding unix seconds or
// an RFC 3339 time.
func (r *request) occurred(signed time.Time) time.Time {
	o := r.spec.Occurred
	var s string
	switch {
	case o.Header != "":
		s = r.p.Header.Get(o.Header)
	case o.Pointer != "":
		s = r.pointerString(o.Pointer)
	}
	// Without a format, unix seconds or RFC 3339, whichever reads (Stripe's classic
	// and v2 events differ).
	if t, ok := parseTime(s, o.Format); ok && s != "" {
		return t
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil && o.Format == "" {
		return t.UTC()
	}
	if r.spec.OccurredFromTimestamp {
		return signed
	}
	return time.Time{}
}
