package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/provider"
	"github.com/oncehook/oncehook/internal/settings"
)

// providers are the values provider may take: the four first built-in schemes, the
// declarative one, then the other presets.
var providers = func() []string {
	names := []string{ledger.ProviderStripe, ledger.ProviderGitHub, ledger.ProviderShopify, ledger.ProviderStandardWebhooks, settings.ProviderHMAC}
	for _, p := range provider.Presets() {
		if !slices.Contains(names, p) {
			names = append(names, p)
		}
	}
	return names
}()

// verifyKeys are the fields of a verify section; a preset takes only the identity
// ones, to say where its sender puts them when the default does not fit.
var (
	verifyKeys   = []string{"signature", "algorithm", "encoding", "key", "signed", "timestamp", "id", "type", "occurred_at", "form", "array"}
	presetVerify = []string{"id", "type"}
)

// verify builds a source's scheme: a preset's, with the identity it may override,
// or provider hmac's from its verify section, refused at load when it cannot work.
func (l *loader) verify(m fields, s *settings.Source) {
	if s.Provider == "" {
		return
	}
	path := m.at("verify")
	if s.Provider != settings.ProviderHMAC {
		spec, ok := provider.Preset(s.Provider)
		if !ok {
			return
		}
		if builtIn(s.Provider) && !m.has("verify") {
			return // verified by name, as before presets existed
		}
		if m.has("verify") {
			v := m.sub("verify", presetVerify...)
			if v.has("id") {
				spec.ID = l.identity(v)
			}
			if v.has("type") {
				spec.Type = l.typeSpec(v)
			}
		}
		s.Verify = l.withURL(spec, s.Name, path)
		l.keyShapes(m, s)
		return
	}
	if !m.has("verify") {
		l.errorf(m.path, "provider hmac needs a verify section saying how the sender signs")
		return
	}
	v := m.sub("verify", verifyKeys...)
	spec := &settings.VerifySpec{
		Kind:      settings.VerifyKindHMAC,
		Signature: l.signatureSpec(v),
		Algorithm: v.oneOf("algorithm", "sha256", "sha1", "sha256", "sha512"),
		Encoding:  v.oneOf("encoding", "hex", "hex", "base64"),
		Key:       v.oneOf("key", "literal", "literal", "base64", "hex"),
		Signed:    l.signedParts(v),
		Timestamp: l.timeSpec(v, "timestamp", true),
		ID:        l.identity(v),
		Type:      l.typeSpec(v),
		Occurred:  l.timeSpec(v, "occurred_at", false),
		Form:      v.str("form"),
		Array:     v.boolean("array"),
	}
	if spec.Form != "" && spec.Form != "*" && !validName.MatchString(spec.Form) {
		l.errorf(v.at("form"), "%q is neither a form field name nor *", spec.Form)
	}
	l.checkVerify(v, spec)
	s.Verify = l.withURL(spec, s.Name, path)
}

// PlaceholderSecret stands in for an unset secret under `oncehook check --skip-env`;
// it has the shape of a Stripe or Standard Webhooks secret, and the checks of the
// other kinds of key leave it alone.
const PlaceholderSecret = "whsec_cGxhY2Vob2xkZXI="

// keyShapes refuses, at start, a secret that cannot be the key its scheme needs (a
// signing secret where Discord's public key goes), instead of a 401 for every request.
func (l *loader) keyShapes(m fields, s *settings.Source) {
	for i, v := range s.Secrets {
		if v == PlaceholderSecret {
			continue
		}
		if msg := provider.KeyProblem(s.Verify, v); msg != "" {
			l.errorf(m.at("secret_env"), "secret %d in %s %s", i+1, s.SecretEnv, msg)
		}
	}
}

// withURL gives the scheme the ingest URL as the provider sees it, which a url part
// signs: only an explicit base_url can say what that is.
func (l *loader) withURL(spec *settings.VerifySpec, name, path string) *settings.VerifySpec {
	spec.URL = l.baseURL + "/hooks/" + name
	for _, p := range spec.Signed {
		if p.Kind == settings.PartURL && !l.baseURLSet {
			l.errorf(path, "the signature covers the request URL, so base_url must be set to the public URL the provider posts to")
			break
		}
	}
	return spec
}

func builtIn(name string) bool {
	switch name {
	case ledger.ProviderStripe, ledger.ProviderGitHub, ledger.ProviderShopify, ledger.ProviderStandardWebhooks:
		return true
	}
	return false
}

var algorithmPrefix = regexp.MustCompile(`(?i)^(sha1|sha256|sha512)\W`)

// checkVerify refuses a verify section that could never accept a request, or would
// accept one it should not.
func (l *loader) checkVerify(v fields, spec *settings.VerifySpec) {
	sig := spec.Signature
	if m := algorithmPrefix.FindStringSubmatch(sig.Prefix); m != nil && !strings.EqualFold(m[1], spec.Algorithm) {
		l.errorf(v.at("signature"), "the prefix %q names %s but algorithm is %s: the header cannot carry that signature", sig.Prefix, m[1], spec.Algorithm)
	}
	has := func(kind string) bool {
		return slices.ContainsFunc(spec.Signed, func(p settings.SignedPart) bool { return p.Kind == kind })
	}
	t := spec.Timestamp
	switch {
	case has(settings.PartTimestamp) && !t.Set():
		l.errorf(v.at("signed"), "signs the timestamp, but no timestamp section says where it is")
	case t.Signature != "" && sig.Format != settings.SignatureList:
		l.errorf(v.at("timestamp"), "a timestamp in the signature header needs signature format list")
	case t.Set() && t.Pointer == "" && !has(settings.PartTimestamp):
		l.errorf(v.at("timestamp"), "the timestamp is not signed, so it proves nothing: add timestamp to signed or drop it")
	case t.Pointer != "" && !has(settings.PartBody) && !has(settings.PartPointer):
		l.errorf(v.at("timestamp"), "the timestamp is read from the body, which is not signed")
	}
	if !spec.ID.Set() {
		l.errorf(v.path, "no delivery identity: set id to a header, a pointer, a composite of pointers, or as a last resort {body_hash: true}")
	}
	if sig.Pointer != "" && !has(settings.PartPointer) && !has(settings.PartBody) {
		l.errorf(v.at("signature"), "the signature is in the body, but nothing of the body is signed")
	}
	if !has(settings.PartBody) && !has(settings.PartForm) && !has(settings.PartPointer) {
		l.errorf(v.at("signed"), "nothing of the body is signed, so anyone could change it: add body (or form)")
	}
}

func (l *loader) signatureSpec(v fields) settings.SignatureSpec {
	if !v.has("signature") {
		l.errorf(v.path, "signature is required: where the signature is ({header: NAME} or {pointer: /p})")
		return settings.SignatureSpec{}
	}
	m := v.sub("signature", "header", "pointer", "format", "prefix", "separator", "pair", "keys")
	s := settings.SignatureSpec{
		Header:    m.str("header"),
		Pointer:   m.pointer("pointer", ""),
		Format:    m.oneOf("format", settings.SignaturePlain, settings.SignaturePlain, settings.SignaturePrefix, settings.SignatureList),
		Prefix:    m.str("prefix"),
		Separator: m.str("separator"),
		Pair:      m.str("pair"),
		Keys:      m.strs("keys", false),
	}
	switch {
	case (s.Header == "") == (s.Pointer == ""):
		l.errorf(m.path, "set exactly one of header and pointer")
	case s.Format == settings.SignaturePrefix && s.Prefix == "":
		l.errorf(m.path, "format prefix needs prefix, e.g. \"sha256=\"")
	case s.Format == settings.SignatureList && len(s.Keys) == 0:
		l.errorf(m.path, "format list needs keys: the item names that hold signatures, e.g. [v1]")
	case s.Format != settings.SignaturePrefix && s.Prefix != "":
		l.errorf(m.at("prefix"), "only format prefix has a prefix")
	case s.Format != settings.SignatureList && (len(s.Keys) > 0 || s.Separator != "" || s.Pair != ""):
		l.errorf(m.path, "keys, separator and pair belong to format list")
	}
	return s
}

var partKinds = []string{settings.PartBody, settings.PartTimestamp, settings.PartURL, settings.PartMethod, settings.PartForm}

// signedParts reads the ordered list of what is signed: body, timestamp, url,
// method, form, {header: NAME}, {literal: TEXT} or {pointer: /p}.
func (l *loader) signedParts(v fields) []settings.SignedPart {
	if !v.has("signed") {
		l.errorf(v.path, "signed is required: the signed content, in order (e.g. [timestamp, {literal: \".\"}, body])")
		return nil
	}
	var parts []settings.SignedPart
	for i, n := range l.list(v.at("signed"), v.vals["signed"]) {
		parts = append(parts, l.signedPart(fmt.Sprintf("%s[%d]", v.at("signed"), i), n))
	}
	if len(parts) == 0 {
		l.errorf(v.at("signed"), "must list at least one part")
	}
	return parts
}

func (l *loader) signedPart(path string, n ast.Node) settings.SignedPart {
	if s, ok := scalarText(n); ok && n != nil {
		if !slices.Contains(partKinds, s) {
			l.errorf(path, "%q is not one of %s, {header: NAME}, {literal: TEXT} or {pointer: /p}", s, strings.Join(partKinds, ", "))
		}
		return settings.SignedPart{Kind: s}
	}
	m := l.mapping(path, n, "header", "literal", "pointer")
	if len(m.keys) != 1 {
		l.errorf(path, "must be one of %s, {header: NAME}, {literal: TEXT} or {pointer: /p}", strings.Join(partKinds, ", "))
		return settings.SignedPart{}
	}
	switch k := m.keys[0]; k {
	case "header":
		return settings.SignedPart{Kind: settings.PartHeader, Value: m.required(k)}
	case "pointer":
		return settings.SignedPart{Kind: settings.PartPointer, Value: m.pointer(k, "")}
	}
	return settings.SignedPart{Kind: settings.PartLiteral, Value: m.str("literal")}
}

// timeSpec reads {header|signature|pointer, format}; signature only for the
// signed timestamp.
func (l *loader) timeSpec(v fields, key string, signed bool) settings.TimestampSpec {
	if !v.has(key) {
		return settings.TimestampSpec{}
	}
	known := []string{"header", "pointer", "format"}
	if signed {
		known = append(known, "signature")
	}
	m := v.sub(key, known...)
	t := settings.TimestampSpec{Header: m.str("header"), Signature: m.str("signature"), Pointer: m.pointer("pointer", ""),
		Format: m.oneOf("format", settings.TimeUnix, settings.TimeUnix, settings.TimeUnixMS, settings.TimeRFC3339)}
	if n := countSet(t.Header, t.Signature, t.Pointer); n != 1 {
		l.errorf(m.path, "set exactly one of %s", strings.Join(known[:len(known)-1], ", ")+orSignature(signed))
	}
	return t
}

func orSignature(signed bool) string {
	if signed {
		return " and signature"
	}
	return ""
}

func countSet(s ...string) int {
	n := 0
	for _, v := range s {
		if v != "" {
			n++
		}
	}
	return n
}

// identity reads id: {header}, {pointer}, {composite: [pointers]} or {body_hash: true}.
func (l *loader) identity(v fields) settings.IdentitySpec {
	if !v.has("id") {
		return settings.IdentitySpec{}
	}
	m := v.sub("id", "header", "pointer", "composite", "body_hash")
	id := settings.IdentitySpec{Header: m.str("header"), Pointer: m.pointer("pointer", ""),
		Composite: m.strs("composite", false), BodyHash: m.boolean("body_hash")}
	for i, p := range id.Composite {
		l.checkPointer(fmt.Sprintf("%s[%d]", m.at("composite"), i), p)
	}
	n := countSet(id.Header, id.Pointer, strings.Join(id.Composite, ""))
	if id.BodyHash {
		n++
	}
	if n != 1 {
		l.errorf(m.path, "set exactly one of header, pointer, composite and body_hash")
	}
	return id
}

// typeSpec reads type: {header}, {pointer}, or both (the header's value, a dot,
// the pointer's).
func (l *loader) typeSpec(v fields) settings.TypeSpec {
	if !v.has("type") {
		return settings.TypeSpec{}
	}
	m := v.sub("type", "header", "pointer")
	return settings.TypeSpec{Header: m.str("header"), Pointer: m.pointer("pointer", "")}
}
