package config

import (
	"encoding/base64"
	"fmt"
	"net/mail"
	"slices"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/oncehook/oncehook"
)

// The readers below map the YAML keys of each section to fields; the primitives
// they use (and the cross-references between sections) are in config_validate.go.

var providers = []string{oncehook.ProviderStripe, oncehook.ProviderGitHub, oncehook.ProviderShopify, oncehook.ProviderStandardWebhooks}

func (l *loader) source(path string, n ast.Node) oncehook.Source {
	m := l.mapping(path, n, "name", "client", "provider", "account", "environment",
		"secret_env", "tolerance", "max_body", "remember")
	s := oncehook.Source{
		Name:        m.name("name"),
		Client:      m.required("client"),
		Provider:    m.oneOf("provider", "", providers...),
		Account:     m.str("account"),
		Environment: m.required("environment"),
		Tolerance:   m.duration("tolerance", oncehook.DefaultTolerance),
		MaxBody:     m.size("max_body", oncehook.DefaultMaxBody),
		Remember:    m.duration("remember", oncehook.DefaultRemember),
	}
	var all string
	s.SecretEnv, all = m.env("secret_env", true, false)
	for i, v := range strings.Split(all, ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		s.Secrets = append(s.Secrets, v)
		if msg := secretShape(s.Provider, v); msg != "" {
			l.errorf(m.at("secret_env"), "secret %d in %s %s", i+1, s.SecretEnv, msg)
		}
	}
	return s
}

// secretShape catches a secret of the wrong kind (an API key in place of a signing
// secret) at start instead of as 401s later. It describes the problem, never the value.
func secretShape(provider, secret string) string {
	switch provider {
	case oncehook.ProviderStripe:
		if !strings.HasPrefix(secret, "whsec_") {
			return `does not start with "whsec_" as Stripe signing secrets do`
		}
	case oncehook.ProviderStandardWebhooks:
		if _, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_")); err != nil {
			return `is not base64 after an optional "whsec_"`
		}
	}
	return ""
}

var (
	httpOnly = []string{"create", "auth", "idempotency", "reference_field", "lookup", "result_id"}
	smtpOnly = []string{"addr", "from", "username_env", "password_env"}
)

func (l *loader) destination(path string, n ast.Node) oncehook.Destination {
	m := l.mapping(path, n, append(append([]string{"name", "type", "timeout", "owner"}, httpOnly...), smtpOnly...)...)
	d := oncehook.Destination{
		Name:    m.name("name"),
		Type:    m.oneOf("type", "", oncehook.DestinationHTTP, oncehook.DestinationSMTP),
		Timeout: m.duration("timeout", oncehook.DefaultTimeout),
		Owner:   m.str("owner"),
	}
	foreign := smtpOnly
	switch d.Type {
	case oncehook.DestinationHTTP:
		c := m.sub("create", "method", "url")
		d.Create = oncehook.Endpoint{Method: strings.ToUpper(c.str("method")), URL: c.url("url", true, false)}
		if d.Create.Method == "" {
			d.Create.Method = "POST"
		} else if !slices.Contains([]string{"POST", "PUT", "PATCH"}, d.Create.Method) {
			l.errorf(c.at("method"), "%q is not one of POST, PUT, PATCH", d.Create.Method)
		}
		auth := m.sub("auth", "bearer_env", "oauth2")
		d.Auth.BearerEnv, d.Auth.Token = auth.env("bearer_env", false, false)
		d.Auth.OAuth2 = l.oauth2(auth)
		idem := m.sub("idempotency", "header", "ttl")
		d.Idempotency = oncehook.Idempotency{Header: idem.str("header"), TTL: idem.duration("ttl", oncehook.DefaultIdempotencyTTL)}
		if d.Idempotency.Header == "" {
			d.Idempotency.Header = oncehook.DefaultIdempotencyHeader
		} else if !validHeader(d.Idempotency.Header) {
			l.errorf(idem.at("header"), "%q is not an HTTP header name", d.Idempotency.Header)
		}
		d.ReferenceField = m.str("reference_field")
		if m.has("lookup") {
			lk := m.sub("lookup", "url", "consistency")
			d.Lookup = oncehook.Lookup{URL: lk.url("url", true, true),
				Consistency: lk.oneOf("consistency", oncehook.DefaultConsistency, oncehook.ConsistencyStrong, oncehook.ConsistencyEventual)}
		}
		d.ResultID = m.pointer("result_id", oncehook.DefaultResultID)
	case oncehook.DestinationSMTP:
		foreign = httpOnly
		d.Addr = m.hostPort("addr", "", true)
		if d.From = m.required("from"); d.From != "" {
			if _, err := mail.ParseAddress(d.From); err != nil {
				l.errorf(m.at("from"), "%q is not an email address", d.From)
			}
		}
		if m.has("username_env") != m.has("password_env") {
			l.errorf(path, "username_env and password_env go together")
		}
		d.UsernameEnv, d.Username = m.env("username_env", false, false)
		d.PasswordEnv, d.Password = m.env("password_env", false, true) // spaces may belong to a password
	}
	for _, k := range foreign {
		if m.has(k) && d.Type != "" {
			l.errorf(m.at(k), "is not used by %s destinations", d.Type)
		}
	}
	return d
}

// validHeader reports whether s is an RFC 9110 field name (a token).
func validHeader(s string) bool {
	return s != "" && strings.Trim(s, "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") == ""
}

func (l *loader) action(path string, n ast.Node) oncehook.ActionRule {
	m := l.mapping(path, n, "name", "source", "on", "key", "destination", "params", "retry",
		"owner", "after", "resource", "occurred_at", "cancelled_by", "act_on_stale")
	a := oncehook.ActionRule{
		Name:        m.name("name"),
		Source:      m.required("source"),
		On:          m.strs("on", true),
		Key:         m.strs("key", true),
		Destination: m.required("destination"),
		Owner:       m.str("owner"),
		After:       m.str("after"),
		Resource:    m.pointer("resource", ""),
		OccurredAt:  m.pointer("occurred_at", ""),
		CancelledBy: m.strs("cancelled_by", false),
		ActOnStale:  m.boolean("act_on_stale"),
	}
	for i, k := range a.Key {
		l.checkPointer(fmt.Sprintf("%s[%d]", m.at("key"), i), k)
	}
	r := m.sub("retry", "attempts", "within")
	a.Retry = oncehook.RetryPolicy{Attempts: r.integer("attempts", oncehook.DefaultRetryAttempts, 1, 1000),
		Within: r.duration("within", oncehook.DefaultRetryWithin)}
	pm := m.sub("params")
	for _, name := range pm.keys {
		a.Params = append(a.Params, l.param(pm.at(name), name, pm.vals[name]))
	}
	// Staleness and cancellation are judged per resource, so they need to know it.
	if a.Resource == "" {
		for _, k := range []string{"occurred_at", "cancelled_by"} {
			if m.vals[k] != nil {
				l.errorf(m.at(k), "needs resource: it applies per resource")
			}
		}
	}
	for i, t := range a.CancelledBy {
		if slices.Contains(a.On, t) {
			l.errorf(fmt.Sprintf("%s[%d]", m.at("cancelled_by"), i), "%q also starts this action (on)", t)
		}
	}
	return a
}

// param reads one params entry: "/pointer", {const: v} or {result: rule, pointer: /p}.
func (l *loader) param(path, name string, n ast.Node) oncehook.Param {
	p := oncehook.Param{Name: name}
	if _, ok := n.(ast.MapNode); ok {
		m := l.mapping(path, n, "const", "result", "pointer")
		switch {
		case m.has("const") && (m.has("result") || m.has("pointer")):
			l.errorf(path, "const stands alone: no result or pointer beside it")
		case m.has("const"):
			p.Const = l.value(m.at("const"), m.at("const"), m.vals["const"], 0)
		case m.has("result"):
			p.Result = m.required("result")
			p.ResultPointer = m.pointer("pointer", "")
		default:
			l.errorf(path, "want {const: value} or {result: action}")
		}
		return p
	}
	switch s, ok := scalarText(n); {
	case ok && strings.HasPrefix(s, "/"):
		l.checkPointer(path, s)
		p.Pointer = s
	case ok && n != nil:
		l.errorf(path, "%q is not a JSON pointer (\"/a/b\"); write {const: %q} for a fixed value", s, s)
	default:
		l.errorf(path, "must be a JSON pointer (\"/a/b\"), {const: value} or {result: action}")
	}
	return p
}
