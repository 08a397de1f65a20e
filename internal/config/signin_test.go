package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/oncehook/oncehook/internal/settings"
)

func TestParseSignIn(t *testing.T) {
	t.Parallel()
	env := envFrom(map[string]string{"S": "whsec_x", "OIDC_ID": "oncehook-client", "OIDC_SECRET": "oidc-secret-7"})
	src := lines(
		"base_url: https://oncehook.example.com",
		"sources:",
		"  - {name: a, client: acme, provider: stripe, environment: live, secret_env: S}",
		"  - {name: b, client: beta, provider: stripe, environment: live, secret_env: S}",
		"sign_in:",
		"  passwords: false",
		"  oidc:",
		"    name: Okta",
		"    issuer: https://example.okta.com/oauth2/default",
		"    client_id_env: OIDC_ID",
		"    client_secret_env: OIDC_SECRET",
		"    rules:",
		"      - {group: ops, role: admin}",
		"      - {group: acme-ops, role: operator, clients: [acme]}",
	)
	c, err := Parse("t.yaml", src, env)
	if err != nil {
		t.Fatal(err)
	}
	want := settings.SignIn{PasswordsOff: true, OIDC: &settings.OIDC{Name: "Okta", Issuer: "https://example.okta.com/oauth2/default",
		ClientIDEnv: "OIDC_ID", ClientID: "oncehook-client", ClientSecretEnv: "OIDC_SECRET", ClientSecret: "oidc-secret-7",
		Claim: "groups", Rules: []settings.AccessRule{{Value: "ops", Role: "admin"},
			{Value: "acme-ops", Role: "operator", Clients: []string{"acme"}}}}}
	if diff := cmp.Diff(want, c.SignIn); diff != "" {
		t.Errorf("sign_in (-want +got):\n%s", diff)
	}
	var b strings.Builder
	Describe(&b, c)
	const described = `
Sign-in: Okta (https://example.okta.com/oauth2/default; client id from OIDC_ID, secret from OIDC_SECRET), local passwords off
  redirect URL to register: https://oncehook.example.com/login/oidc/callback
  groups "ops": admin of every client
  groups "acme-ops": operator of clients acme
`
	if !strings.HasSuffix(b.String(), described) || strings.Contains(b.String(), "oidc-secret-7") {
		t.Errorf("oncehook check says:\n%s\nwant it to end with:%s", b.String(), described)
	}
	fromEnv := strings.Replace(string(src), "issuer: https://example.okta.com/oauth2/default", "issuer_env: OIDC_ISSUER", 1)
	env2 := envFrom(map[string]string{"S": "whsec_x", "OIDC_ID": "i", "OIDC_SECRET": "s", "OIDC_ISSUER": "https://kc.example.com/realms/ops/"})
	if c, err := Parse("t.yaml", []byte(fromEnv), env2); err != nil || c.SignIn.OIDC.Issuer != "https://kc.example.com/realms/ops/" {
		t.Errorf("issuer_env: %v", err)
	}
	plain, err := Parse("t.yaml", lines("sources: [{name: s, client: c, provider: stripe, environment: test, secret_env: S}]"), env)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(settings.SignIn{}, plain.SignIn); diff != "" {
		t.Errorf("sign_in by default (-want +got):\n%s", diff)
	}
}

func TestParseSignInErrors(t *testing.T) {
	t.Parallel()
	const src = "sources: [{name: s, client: acme, provider: stripe, environment: test, secret_env: S}]"
	tests := []struct {
		name string
		yaml []byte
		want []string
	}{
		{"PasswordsOffWithoutAProvider", lines(src, "sign_in: {passwords: false}"), []string{
			"t.yaml:2:11: sign_in.passwords: false leaves nobody a way to sign in: add sign_in.oidc",
		}},
		{"ProviderWithoutBaseURL", lines(src,
			"sign_in:",
			"  oidc: {name: K, issuer: 'https://kc/realms/r', client_id_env: ID, client_secret_env: SECRET, rules: [{group: g, role: admin}]}",
		), []string{
			"t.yaml:3:3: sign_in.oidc: needs base_url: the identity provider sends people back to base_url/login/oidc/callback",
		}},
		{"RulesAsTheyReallyAre", lines(src,
			"base_url: https://o.example.com",
			"sign_in:",
			"  oidc:",
			"    issuer: kc/realms/r",
			"    client_id_env: ID",
			"    client_secret_env: secret-pasted-here",
			"    rules:",
			"      - {group: g, role: admin, clients: [acme]}",
			"      - {group: h, role: operator}",
			"      - {group: i, role: viewer, clients: [acme, acne]}",
			"      - {group: j, role: owner, clients: [acme]}",
		), []string{
			"t.yaml:4:3: sign_in.oidc: name is required",
			`t.yaml:5:5: sign_in.oidc.issuer: "kc/realms/r" is not an absolute http or https URL`,
			"t.yaml:7:5: sign_in.oidc.client_secret_env: must name an environment variable (A-Z, 0-9, _), not hold the secret itself",
			"t.yaml:9:33: sign_in.oidc.rules[0].clients: an admin sees every client; leave clients out or make the role operator or viewer",
			"t.yaml:10:10: sign_in.oidc.rules[1]: an operator sees only the clients listed: clients is required",
			`t.yaml:11:50: sign_in.oidc.rules[2].clients[1]: no source has the client "acne" (clients: acme)`,
			`t.yaml:12:20: sign_in.oidc.rules[3].role: "owner" is not one of admin, operator, viewer`,
		}},
		{"IssuerFromTheEnvironment", lines(src,
			"base_url: https://o.example.com",
			"sign_in:",
			"  oidc: {name: K, issuer_env: ID, client_id_env: ID, client_secret_env: SECRET, rules: [{group: g, role: admin}]}",
			"  passwords: false",
		), []string{
			`t.yaml:4:19: sign_in.oidc.issuer_env: ID holds "id", not an absolute http or https URL`,
		}},
		{"NoIssuer", lines(src,
			"base_url: https://o.example.com",
			"sign_in: {oidc: {name: K, client_id_env: ID, client_secret_env: SECRET, rules: [{group: g, role: admin}]}}",
		), []string{
			"t.yaml:3:11: sign_in.oidc: set one of issuer and issuer_env",
		}},
		{"NoRules", lines(src,
			"base_url: https://o.example.com",
			"sign_in: {oidc: {name: K, issuer: 'https://kc/realms/r', client_id_env: ID, client_secret_env: SECRET}}",
		), []string{
			"t.yaml:3:11: sign_in.oidc.rules: at least one rule is required, or nobody gets in: {group: NAME, role: admin|operator|viewer, clients: [...]}",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("t.yaml", tt.yaml, envFrom(map[string]string{"S": "whsec_x", "ID": "id", "SECRET": "s"}))
			checkErrorLines(t, err, tt.want)
		})
	}
}
