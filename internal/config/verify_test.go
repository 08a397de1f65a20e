package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/oncehook/oncehook/internal/settings"
)

func TestParseVerifySection(t *testing.T) {
	t.Parallel()
	c, err := Parse("t.yaml", lines(
		"base_url: https://hooks.example.com/",
		"sources:",
		"  - name: forms",
		"    client: c",
		"    environment: live",
		"    provider: hmac",
		"    secret_env: S",
		"    verify:",
		"      signature: {header: X-Sig, format: list, separator: ';', keys: [v1]}",
		"      algorithm: sha512",
		"      encoding: base64",
		"      signed: [method, url, timestamp, {literal: ':'}, body, {header: X-Id}]",
		"      timestamp: {signature: t}",
		"      id: {composite: [/form/id, /submitted_at]}",
		"      type: {header: X-Event, pointer: /action}",
		"      occurred_at: {pointer: /submitted_at, format: rfc3339}",
		"  - {name: sq, client: c, environment: live, provider: square, secret_env: S}",
		"  - {name: pm, client: c, environment: live, provider: postmark, secret_env: P, verify: {id: {body_hash: true}}}",
		"  - {name: st, client: c, environment: live, provider: stripe, secret_env: S}",
	), envFrom(map[string]string{"S": "whsec_a", "P": "hook:pa55"}))
	if err != nil {
		t.Fatal(err)
	}
	want := &settings.VerifySpec{Kind: settings.VerifyKindHMAC,
		Signature: settings.SignatureSpec{Header: "X-Sig", Format: "list", Separator: ";", Keys: []string{"v1"}},
		Algorithm: "sha512", Encoding: "base64", Key: "literal",
		Signed: []settings.SignedPart{{Kind: "method"}, {Kind: "url"}, {Kind: "timestamp"}, {Kind: "literal", Value: ":"},
			{Kind: "body"}, {Kind: "header", Value: "X-Id"}},
		Timestamp: settings.TimestampSpec{Signature: "t", Format: "unix"},
		ID:        settings.IdentitySpec{Composite: []string{"/form/id", "/submitted_at"}},
		Type:      settings.TypeSpec{Header: "X-Event", Pointer: "/action"},
		Occurred:  settings.TimestampSpec{Pointer: "/submitted_at", Format: "rfc3339"},
		URL:       "https://hooks.example.com/hooks/forms"}
	if diff := cmp.Diff(want, c.Sources[0].Verify); diff != "" {
		t.Errorf("verify (-want +got):\n%s", diff)
	}
	if got := c.Sources[1].Verify; got == nil || got.URL != "https://hooks.example.com/hooks/sq" || got.Signature.Header != "X-Square-Hmacsha256-Signature" {
		t.Errorf("square preset = %+v", got)
	}
	if got := c.Sources[2].Verify; got == nil || !got.ID.BodyHash || got.Kind != settings.VerifyKindBasic {
		t.Errorf("postmark preset with its identity overridden = %+v", got)
	}
	if got := c.Sources[3].Verify; got != nil {
		t.Errorf("a built-in without overrides keeps a nil spec, got %+v", got)
	}
}

func TestParseVerifyRefused(t *testing.T) {
	t.Parallel()
	src := func(verify ...string) []byte {
		return lines(append([]string{
			"sources:",
			"  - name: s",
			"    client: c",
			"    environment: live",
			"    provider: hmac",
			"    secret_env: S",
		}, verify...)...)
	}
	tests := []struct {
		name string
		yaml []byte
		want []string
	}{
		{"NoVerifySection", src(), []string{
			"t.yaml:2:5: sources[0]: provider hmac needs a verify section saying how the sender signs"}},
		{"URLWithoutBaseURL", src("    verify: {signature: {header: X-Sig}, signed: [url, body], id: {header: X-Id}}"), []string{
			"t.yaml:7:5: sources[0].verify: the signature covers the request URL, so base_url must be set to the public URL the provider posts to"}},
		{"URLWithoutBaseURLOnAPreset", lines("sources: [{name: t, client: c, environment: live, provider: twilio, secret_env: S}]"), []string{
			"t.yaml:1:12: sources[0].verify: the signature covers the request URL, so base_url must be set to the public URL the provider posts to"}},
		{"NoIdentity", src("    verify: {signature: {header: X-Sig}, signed: [body]}"), []string{
			"t.yaml:7:5: sources[0].verify: no delivery identity: set id to a header, a pointer, a composite of pointers, or as a last resort {body_hash: true}"}},
		{"PrefixNamesAnotherAlgorithm", src("    verify: {signature: {header: X-Sig, format: prefix, prefix: 'sha1='}, algorithm: sha256, signed: [body], id: {header: X-Id}}"), []string{
			`t.yaml:7:14: sources[0].verify.signature: the prefix "sha1=" names sha1 but algorithm is sha256: the header cannot carry that signature`}},
		{"UnknownAlgorithm", src("    verify: {signature: {header: X-Sig}, algorithm: md5, signed: [body], id: {header: X-Id}}"), []string{
			`t.yaml:7:42: sources[0].verify.algorithm: "md5" is not one of sha1, sha256, sha512`}},
		{"SignedTimestampNowhere", src("    verify: {signature: {header: X-Sig}, signed: [timestamp, body], id: {header: X-Id}}"), []string{
			"t.yaml:7:42: sources[0].verify.signed: signs the timestamp, but no timestamp section says where it is"}},
		{"TimestampNotSigned", src("    verify: {signature: {header: X-Sig}, signed: [body], timestamp: {header: X-Ts}, id: {header: X-Id}}"), []string{
			"t.yaml:7:58: sources[0].verify.timestamp: the timestamp is not signed, so it proves nothing: add timestamp to signed or drop it"}},
		{"TimestampInPlainSignature", src("    verify: {signature: {header: X-Sig}, signed: [timestamp, body], timestamp: {signature: t}, id: {header: X-Id}}"), []string{
			"t.yaml:7:69: sources[0].verify.timestamp: a timestamp in the signature header needs signature format list"}},
		{"BodyNotSigned", src("    verify: {signature: {header: X-Sig}, signed: [{header: X-Id}], id: {header: X-Id}}"), []string{
			"t.yaml:7:42: sources[0].verify.signed: nothing of the body is signed, so anyone could change it: add body (or form)"}},
		{"ListWithoutKeys", src("    verify: {signature: {header: X-Sig, format: list}, signed: [body], id: {header: X-Id}}"), []string{
			"t.yaml:7:14: sources[0].verify.signature: format list needs keys: the item names that hold signatures, e.g. [v1]"}},
		{"TwoIdentities", src("    verify: {signature: {header: X-Sig}, signed: [body], id: {header: X-Id, body_hash: true}}"), []string{
			"t.yaml:7:58: sources[0].verify.id: set exactly one of header, pointer, composite and body_hash"}},
		{"UnknownPart", src("    verify: {signature: {header: X-Sig}, signed: [body, path], id: {header: X-Id}}"), []string{
			`t.yaml:7:57: sources[0].verify.signed[1]: "path" is not one of body, timestamp, url, method, form, {header: NAME}, {literal: TEXT} or {pointer: /p}`}},
		{"PresetTakesOnlyIdentity", lines("sources: [{name: t, client: c, environment: live, provider: slack, secret_env: S, verify: {algorithm: sha1}}]"), []string{
			"t.yaml:1:92: sources[0].verify.algorithm: unknown field (known: id, type)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("t.yaml", tt.yaml, envFrom(map[string]string{"S": "whsec_x"}))
			checkErrorLines(t, err, tt.want)
		})
	}
}

func TestParseVerifyKeyShapes(t *testing.T) {
	t.Parallel()
	_, err := Parse("t.yaml", lines(
		"sources:",
		"  - {name: d, client: c, environment: live, provider: discord, secret_env: D}",
		"  - {name: s, client: c, environment: live, provider: sendgrid, secret_env: S}",
		"  - {name: p, client: c, environment: live, provider: postmark, secret_env: P}",
		"  - {name: ok, client: c, environment: live, provider: discord, secret_env: PH}",
	), envFrom(map[string]string{"D": "a-signing-secret", "S": "not-a-key", "P": "no-colon", "PH": PlaceholderSecret}))
	checkErrorLines(t, err, []string{
		"t.yaml:2:64: sources[0].secret_env: secret 1 in D is not an Ed25519 public key written as 64 hex digits",
		"t.yaml:3:65: sources[1].secret_env: secret 1 in S is not a P-256 public key in base64 (DER)",
		`t.yaml:4:65: sources[2].secret_env: secret 1 in P is not "user:password"`,
	})
}
