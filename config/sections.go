package config

import (
	"encoding/base64"
	"fmt"
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

// param reads one params entry: "/pointer", {const: v}, {result: rule[, pointer: /p]},
// a list of entries, or any other mapping, which is a nested object of entries.
func (l *loader) param(path, name string, n ast.Node) oncehook.Param {
	return l.paramAt(path, name, n, 0)
}

func (l *loader) paramAt(path, name string, n ast.Node, depth int) oncehook.Param {
	p := oncehook.Param{Name: name}
	if depth > 16 {
		l.errorf(path, "params are nested too deeply")
		return p
	}
	switch v := n.(type) {
	case ast.MapNode:
		m := l.mapping(path, n)
		switch {
		case len(m.keys) == 1 && m.has("const"):
			p.Const = l.value(m.at("const"), m.at("const"), m.vals["const"], 0)
		case m.has("result") && (len(m.keys) == 1 || len(m.keys) == 2 && m.has("pointer")):
			p.Result = m.required("result")
			p.ResultPointer = m.pointer("pointer", "")
		default:
			p.IsObject, p.Object = true, []oncehook.Param{}
			for _, k := range m.keys {
				p.Object = append(p.Object, l.paramAt(m.at(k), k, m.vals[k], depth+1))
			}
		}
		return p
	case *ast.SequenceNode:
		p.IsList, p.List = true, []oncehook.Param{}
		for i, e := range l.list(path, v) {
			p.List = append(p.List, l.paramAt(fmt.Sprintf("%s[%d]", path, i), "", e, depth+1))
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
		l.errorf(path, "must be a JSON pointer (\"/a/b\"), {const: value}, {result: action}, a mapping or a list")
	}
	return p
}
