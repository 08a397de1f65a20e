package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/oncehook/oncehook/internal/settings"
)

// signIn reads sign_in: local passwords on or off, and the identity provider
// with its rules. It runs after the sources, whose clients the rules name.
func (l *loader) signIn(m fields, c *settings.Config) settings.SignIn {
	s := m.sub("sign_in", "passwords", "oidc")
	out := settings.SignIn{PasswordsOff: s.has("passwords") && !s.boolean("passwords")}
	if s.has("oidc") {
		out.OIDC = l.oidc(s.sub("oidc", "name", "issuer", "issuer_env", "client_id_env", "client_secret_env", "scopes", "claim", "rules"), c)
	}
	if out.PasswordsOff && out.OIDC == nil {
		l.errorf(s.at("passwords"), "false leaves nobody a way to sign in: add sign_in.oidc")
	}
	if out.OIDC != nil && !l.baseURLSet {
		l.errorf(s.at("oidc"), "needs base_url: the identity provider sends people back to base_url%s", settings.OIDCCallbackPath)
	}
	return out
}

func (l *loader) oidc(m fields, c *settings.Config) *settings.OIDC {
	o := &settings.OIDC{Name: m.required("name"), Issuer: l.issuer(m), Scopes: m.strs("scopes", false), Claim: m.str("claim")}
	if o.Claim == "" {
		o.Claim = settings.DefaultOIDCClaim
	}
	o.ClientIDEnv, o.ClientID = m.env("client_id_env", true, false)
	o.ClientSecretEnv, o.ClientSecret = m.env("client_secret_env", true, false)
	var clients []string
	for _, src := range c.Sources {
		clients = append(clients, src.Client)
	}
	for i, n := range l.list(m.at("rules"), m.vals["rules"]) {
		o.Rules = append(o.Rules, l.accessRule(fmt.Sprintf("%s[%d]", m.at("rules"), i), n, clients))
	}
	if len(o.Rules) == 0 {
		l.errorf(m.at("rules"), "at least one rule is required, or nobody gets in: {group: NAME, role: admin|operator|viewer, clients: [...]}")
	}
	return o
}

// issuer reads the issuer URL from the file (issuer) or from the environment
// (issuer_env), one of them. It is kept as written, a trailing slash too: the
// ID tokens' iss must equal it exactly (Auth0's ends with one, Okta's does not).
func (l *loader) issuer(m fields) string {
	if m.has("issuer") == m.has("issuer_env") {
		l.errorf(m.path, "set one of issuer and issuer_env")
		return ""
	}
	if m.has("issuer") {
		return m.url("issuer", true, false)
	}
	name, value := m.env("issuer_env", true, false)
	if u, err := url.Parse(value); value != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		l.errorf(m.at("issuer_env"), "%s holds %q, not an absolute http or https URL", name, value)
	}
	return value
}

// accessRule reads one rule; an admin sees every client, so names none, and an
// operator or a viewer names at least one of the sources' clients.
func (l *loader) accessRule(path string, n ast.Node, clients []string) settings.AccessRule {
	m := l.mapping(path, n, "group", "role", "clients")
	r := settings.AccessRule{Value: m.required("group"),
		Role:    m.oneOf("role", "", settings.RoleAdmin, settings.RoleOperator, settings.RoleViewer),
		Clients: m.strs("clients", false)}
	switch {
	case r.Role == settings.RoleAdmin && len(r.Clients) > 0:
		l.errorf(m.at("clients"), "an admin sees every client; leave clients out or make the role operator or viewer")
	case r.Role != settings.RoleAdmin && r.Role != "" && len(r.Clients) == 0:
		l.errorf(path, "an %s sees only the clients listed: clients is required", r.Role)
	}
	for i, cl := range r.Clients {
		if !slices.Contains(clients, cl) {
			l.errorf(fmt.Sprintf("%s[%d]", m.at("clients"), i), "no source has the client %q (clients: %s)",
				cl, strings.Join(slices.Compact(slices.Sorted(slices.Values(clients))), ", "))
		}
	}
	return r
}
