package config

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/money"
	"github.com/oncehook/oncehook/internal/provider"
	"github.com/oncehook/oncehook/internal/settings"
)

// The readers below map the YAML keys of each section to fields. The primitives
// they use are in yaml.go; the loader itself and the cross-references between
// sections (check) are in validate.go; the operations sections in operations.go.

func (l *loader) source(path string, n ast.Node) settings.Source {
	m := l.mapping(path, n, "name", "client", "provider", "account", "environment",
		"secret_env", "tolerance", "max_body", "remember", "backfill", "verify", "cutover")
	s := settings.Source{
		Name:        m.name("name"),
		Client:      m.required("client"),
		Provider:    m.oneOf("provider", "", providers...),
		Account:     m.str("account"),
		Environment: m.required("environment"),
		Tolerance:   m.duration("tolerance", settings.DefaultTolerance),
		MaxBody:     m.size("max_body", settings.DefaultMaxBody),
		Remember:    m.duration("remember", settings.DefaultRemember),
	}
	l.secrets(m, &s)
	l.verify(m, &s)
	s.Cutover = l.cutover(m)
	if m.has("backfill") {
		s.Backfill = l.backfill(m, s.Provider)
	}
	return s
}

// stripeEventDays is how long Stripe keeps events to list.
const stripeEventDays = 30

var githubHook = regexp.MustCompile(`^(repos/[^/\s]+/[^/\s]+/hooks/[0-9]+|orgs/[^/\s]+/hooks/[0-9]+|app)$`)

// backfill reads a source's backfill section, which only Stripe and GitHub can have:
// the others have no API that lists what they sent.
func (l *loader) backfill(src fields, provider string) settings.Backfill {
	path := src.at("backfill")
	var m fields
	b := settings.Backfill{}
	switch provider {
	case ledger.ProviderStripe:
		m = src.sub("backfill", "api_key_env", "every", "window", "api_url")
		b.APIKeyEnv, b.APIKey = m.env("api_key_env", true, false)
		if b.APIKey != "" && !strings.HasPrefix(b.APIKey, "sk_") && !strings.HasPrefix(b.APIKey, "rk_") {
			l.errorf(m.at("api_key_env"), `the key in %s does not start with "sk_" or "rk_" as Stripe API keys do`, b.APIKeyEnv)
		}
		b.APIURL = m.url("api_url", false, false)
		if b.APIURL == "" {
			b.APIURL = settings.DefaultStripeAPIURL
		}
	case ledger.ProviderGitHub:
		m = src.sub("backfill", "token_env", "hook", "every", "window", "api_url")
		b.TokenEnv, b.Token = m.env("token_env", true, false)
		if b.Hook = m.required("hook"); b.Hook != "" && !githubHook.MatchString(b.Hook) {
			l.errorf(m.at("hook"), "%q is not repos/OWNER/REPO/hooks/ID, orgs/ORG/hooks/ID or app", b.Hook)
		}
		if b.Hook == "app" && strings.HasPrefix(b.Token, "-----BEGIN") && strings.TrimSpace(src.str("account")) == "" {
			l.errorf(m.at("token_env"), "%s holds a GitHub App's private key: set the source's account to the App's id or client id, the issuer of its tokens", b.TokenEnv)
		}
		b.APIURL = m.url("api_url", false, false)
		if b.APIURL == "" {
			b.APIURL = settings.DefaultGitHubAPIURL
		}
	case "":
		return b
	default:
		l.errorf(path, "%s offers no API that lists missed webhooks; only stripe and github sources can backfill", provider)
		return b
	}
	b.APIURL = strings.TrimRight(b.APIURL, "/")
	b.Every = m.duration("every", settings.DefaultBackfillEvery)
	b.Window = m.duration("window", settings.DefaultBackfillWindow)
	switch {
	case b.Every < time.Minute:
		l.errorf(m.at("every"), "must be at least 1m")
	case b.Window < b.Every:
		l.errorf(m.at("window"), "must be at least every (%s), or events between passes are never looked at", b.Every)
	case provider == ledger.ProviderStripe && b.Window > stripeEventDays*24*time.Hour:
		l.errorf(m.at("window"), "Stripe keeps events for %d days: at most %dh", stripeEventDays, stripeEventDays*24)
	}
	return b
}

// secrets reads secret_env: one variable holding the live secrets separated by
// commas (a rotation), or a list of variables each holding one whole secret, which
// may itself contain a comma. SecretEnv names them all, comma-separated, for people.
func (l *loader) secrets(m fields, s *settings.Source) {
	var names []string
	if _, isList := m.vals["secret_env"].(*ast.SequenceNode); isList {
		names = m.strs("secret_env", true)
		for i, name := range names {
			at := fmt.Sprintf("%s[%d]", m.at("secret_env"), i)
			v := l.envValue(at, name)
			if v == "" {
				continue
			}
			s.Secrets = append(s.Secrets, v)
			if msg := secretShape(s.Provider, v); msg != "" {
				l.errorf(at, "the secret in %s %s", name, msg)
			}
		}
		s.SecretEnv = strings.Join(names, ",")
		return
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
}

// secretShape catches a secret of the wrong kind (an API key in place of a signing
// secret) at start instead of as 401s later. It describes the problem, never the value.
func secretShape(name, secret string) string {
	switch name {
	case ledger.ProviderStripe:
		if !strings.HasPrefix(secret, "whsec_") {
			return `does not start with "whsec_" as Stripe signing secrets do`
		}
	case ledger.ProviderStandardWebhooks, provider.PresetResend, provider.PresetClerk:
		if _, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_")); err != nil {
			return `is not base64 after an optional "whsec_"`
		}
	}
	return ""
}

func (l *loader) action(path string, n ast.Node) settings.ActionRule {
	m := l.mapping(path, n, "name", "source", "on", "key", "destination", "params", "retry",
		"owner", "after", "resource", "occurred_at", "cancelled_by", "act_on_stale", "when", "cutover")
	a := settings.ActionRule{
		Name:        m.name("name"),
		Source:      m.required("source"),
		On:          m.strs("on", true),
		Key:         m.strs("key", true),
		Destination: m.required("destination"),
		Owner:       m.str("owner"),
		After:       m.str("after"),
		Resource:    m.pointer("resource", ""),
		OccurredAt:  m.pointer("occurred_at", ""),
		ActOnStale:  m.boolean("act_on_stale"),
		When:        l.conditions(m.at("when"), m.vals["when"]),
		Cutover:     l.cutover(m),
	}
	a.CancelledBy, a.CancelWhen = l.cancelledBy(m.at("cancelled_by"), m.vals["cancelled_by"])
	for i, k := range a.Key {
		l.checkPointer(fmt.Sprintf("%s[%d]", m.at("key"), i), k)
	}
	r := m.sub("retry", "attempts", "within")
	a.Retry = settings.RetryPolicy{Attempts: r.integer("attempts", settings.DefaultRetryAttempts, 1, 1000),
		Within: r.duration("within", settings.DefaultRetryWithin)}
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
func (l *loader) param(path, name string, n ast.Node) settings.Param {
	return l.paramAt(path, name, n, 0)
}

// money reads {money: /amount, currency: /currency or CODE, as: string | number}.
func (l *loader) money(path string, n ast.Node) *money.Money {
	m := l.mapping(path, n, "money", "currency", "as")
	mo := &money.Money{Amount: m.pointer("money", ""), Currency: m.required("currency"),
		AsNumber: m.oneOf("as", money.AsString, money.AsString, money.AsNumber) == money.AsNumber}
	if mo.Amount == "" {
		l.errorf(m.at("money"), "must be a JSON pointer to the amount in minor units")
	}
	if c := mo.Currency; strings.HasPrefix(c, "/") {
		l.checkPointer(m.at("currency"), c)
	} else if _, ok := money.CurrencyExponent(c); c != "" && !ok {
		l.errorf(m.at("currency"), "%q is neither a JSON pointer nor an ISO 4217 currency code", c)
	}
	return mo
}

func (l *loader) paramAt(path, name string, n ast.Node, depth int) settings.Param {
	p := settings.Param{Name: name}
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
		case m.has("money"):
			p.Money = l.money(path, n)
		case m.has("result") && (len(m.keys) == 1 || len(m.keys) == 2 && m.has("pointer")):
			p.Result = m.required("result")
			p.ResultPointer = m.pointer("pointer", "")
		default:
			p.IsObject, p.Object = true, []settings.Param{}
			for _, k := range m.keys {
				p.Object = append(p.Object, l.paramAt(m.at(k), k, m.vals[k], depth+1))
			}
		}
		return p
	case *ast.SequenceNode:
		p.IsList, p.List = true, []settings.Param{}
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

// cancelledBy reads cancelled_by: a list of event types, each a string or
// {type: T, when: [conditions]} when its body must bear the cancellation out.
func (l *loader) cancelledBy(path string, n ast.Node) ([]string, map[string][]settings.Condition) {
	if n == nil {
		return nil, nil
	}
	var types []string
	when := map[string][]settings.Condition{}
	for i, e := range l.list(path, n) {
		ep := fmt.Sprintf("%s[%d]", path, i)
		typ, cs := "", []settings.Condition(nil)
		if s, ok := scalarText(e); ok {
			typ = s
		} else {
			m := l.mapping(ep, e, "type", "when")
			typ, cs = m.required("type"), l.conditions(m.at("when"), m.vals["when"])
		}
		switch {
		case strings.TrimSpace(typ) == "":
			l.errorf(ep, "needs an event type")
		case slices.Contains(types, typ):
			l.errorf(ep, "%q is listed twice", typ)
		default:
			types = append(types, typ)
			if len(cs) > 0 {
				when[typ] = cs
			}
		}
	}
	if len(when) == 0 {
		when = nil
	}
	return types, when
}

// conditions reads a when: a list of {pointer: /p} (the value exists and is not
// null) or {pointer: /p, equals: v} (it reads as v; v a string, number or boolean).
func (l *loader) conditions(path string, n ast.Node) []settings.Condition {
	if n == nil {
		return nil
	}
	var out []settings.Condition
	for i, e := range l.list(path, n) {
		m := l.mapping(fmt.Sprintf("%s[%d]", path, i), e, "pointer", "equals")
		c := settings.Condition{Pointer: m.pointer("pointer", "")}
		if c.Pointer == "" {
			l.errorf(m.path, "pointer is required")
		}
		if v, has := m.vals["equals"]; has {
			s, ok := scalarText(v)
			if !ok || v == nil {
				l.errorf(m.at("equals"), "must be a string, number or boolean, not %s", kindOf(v))
			}
			c.Equals, c.HasEquals = s, true
		}
		out = append(out, c)
	}
	return out
}

// cutover reads a source's or an action's cutover window, {from, until}, two
// times (RFC 3339) with until after from; nil when there is none.
func (l *loader) cutover(m fields) *settings.Cutover {
	if !m.has("cutover") {
		return nil
	}
	cm := m.sub("cutover", "from", "until")
	c := settings.Cutover{From: cm.moment("from"), Until: cm.moment("until")}
	if !c.From.IsZero() && !c.Until.IsZero() && !c.Until.After(c.From) {
		l.errorf(cm.at("until"), "is not after from (%s): the window ends after it starts", c.From.Format(time.RFC3339))
	}
	return &c
}

// moment reads a required time, as RFC 3339 writes it.
func (m fields) moment(key string) time.Time {
	s := m.required(key)
	if strings.TrimSpace(s) == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(s))
	if err != nil {
		m.l.errorf(m.at(key), "%q is not a time like 2026-12-01T00:00:00Z", s)
	}
	return t
}
