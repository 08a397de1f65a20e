package config

import (
	"fmt"
	"net/mail"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// The reader of the destinations section (docs/configuration.md, docs/destinations.md). Every
// default is applied here, once: the clients use the Destination as it is.

var (
	httpOnly = []string{"create", "auth", "idempotency", "reference_field", "lookup", "result_id",
		"check", "errors", "rate_limit_reset", "limits"}
	smtpOnly = []string{"addr", "from", "username_env", "password_env"}
)

func (l *loader) destination(path string, n ast.Node) settings.Destination {
	m := l.mapping(path, n, append(append([]string{"name", "type", "timeout", "owner", "corrections", "breaker", "alerts"}, httpOnly...), smtpOnly...)...)
	d := settings.Destination{
		Name:    m.name("name"),
		Type:    m.oneOf("type", "", settings.DestinationHTTP, settings.DestinationSMTP),
		Timeout: m.duration("timeout", settings.DefaultTimeout),
		Owner:   m.str("owner"),
		Alerts:  m.strs("alerts", false),
	}
	// Absent, approve is "" and means another_person: Corrections' zero value.
	if cm := m.sub("corrections", "approve"); cm.has("approve") {
		d.Corrections.Approve = cm.oneOf("approve", settings.ApproveAnotherPerson, settings.ApproveAnotherPerson, settings.ApproveSelf)
	}
	d.Breaker = l.breaker(m)
	foreign := smtpOnly
	switch d.Type {
	case settings.DestinationHTTP:
		l.httpDestination(m, &d)
	case settings.DestinationSMTP:
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

func (l *loader) httpDestination(m fields, d *settings.Destination) {
	// The destination-wide result_id of docs/configuration.md is the default of both
	// create.result_id and lookup.result_id.
	shared := m.pointer("result_id", settings.DefaultResultID)
	c := m.sub("create", "method", "url", "encoding", "result_id")
	d.Create = settings.Endpoint{
		Method:   l.method(c, "method", settings.DefaultMethod, "POST", "PUT", "PATCH"),
		URL:      c.url("url", true, false),
		Encoding: c.oneOf("encoding", settings.DefaultEncoding, settings.EncodingJSON, settings.EncodingForm),
		ResultID: settings.ResultID{Pointer: shared},
	}
	if c.has("result_id") {
		if m.has("result_id") {
			l.errorf(c.at("result_id"), "is also set as the destination's result_id: keep one")
		}
		d.Create.ResultID = l.resultID(c)
	}
	d.Auth = l.auth(m)
	d.Idempotency = l.idempotency(m)
	if s := m.str("reference_field"); s != "" {
		if !strings.HasPrefix(s, "/") { // a bare name is a top-level field
			s = "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
		}
		l.checkPointer(m.at("reference_field"), s)
		d.ReferenceField = s
	}
	if m.has("lookup") {
		def := d.Create.ResultID.Pointer
		if def == "" {
			def = settings.DefaultResultID
		}
		d.Lookup = l.lookup(m.sub("lookup", "method", "url", "body", "records", "fetch", "reference", "result_id", "consistency", "settle"), def)
	}
	if m.has("check") {
		ck := m.sub("check", "method", "url")
		d.Check = settings.Request{Method: l.method(ck, "method", settings.DefaultLookupMethod, "GET", "HEAD", "OPTIONS", "POST"),
			URL: ck.url("url", true, false)}
	}
	for i, n := range l.list(m.at("errors"), m.vals["errors"]) {
		d.Errors = append(d.Errors, l.errorRule(fmt.Sprintf("%s[%d]", m.at("errors"), i), n))
	}
	if m.has("rate_limit_reset") {
		r := m.sub("rate_limit_reset", "header", "unit")
		d.RateLimitReset = settings.ResetHeader{Header: l.header(r, "header", ""),
			Unit: r.oneOf("unit", settings.ResetSeconds, settings.ResetSeconds, settings.ResetEpoch, settings.ResetMilliseconds)}
		if d.RateLimitReset.Header == "" {
			l.errorf(r.path, "header is required")
		}
	}
	lm := m.sub("limits", "concurrency", "per_second")
	d.Limits = settings.Limits{Concurrency: lm.integer("concurrency", 0, 1, 10000), PerSecond: lm.rate("per_second")}
}

// method reads an upper-cased HTTP method among options.
func (l *loader) method(m fields, key, def string, options ...string) string {
	s := strings.ToUpper(m.str(key))
	if s == "" {
		return def
	}
	if !slices.Contains(options, s) {
		l.errorf(m.at(key), "%q is not one of %s", s, strings.Join(options, ", "))
	}
	return s
}

// header reads an HTTP header name.
func (l *loader) header(m fields, key, def string) string {
	s := m.str(key)
	if s == "" {
		return def
	}
	if !validHeader(s) {
		l.errorf(m.at(key), "%q is not an HTTP header name", s)
	}
	return s
}

// resultID reads create.result_id: a JSON pointer, or {header: NAME}.
func (l *loader) resultID(c fields) settings.ResultID {
	if _, ok := c.vals["result_id"].(ast.MapNode); ok {
		h := c.sub("result_id", "header")
		r := settings.ResultID{Header: l.header(h, "header", "")}
		if r.Header == "" {
			l.errorf(h.path, "header is required")
		}
		return r
	}
	return settings.ResultID{Pointer: c.pointer("result_id", settings.DefaultResultID)}
}

// auth reads at most one of bearer_env, header, basic and oauth2 (config/oauth.go).
func (l *loader) auth(m fields) settings.Auth {
	am := m.sub("auth", "bearer_env", "header", "basic", "oauth2")
	var a settings.Auth
	set := 0
	for _, k := range []string{"bearer_env", "header", "basic", "oauth2"} {
		if am.has(k) {
			set++
		}
	}
	if set > 1 {
		l.errorf(am.path, "set one of bearer_env, header, basic and oauth2, not %d", set)
	}
	a.OAuth2 = l.oauth2(am)
	a.BearerEnv, a.Token = am.env("bearer_env", false, false)
	if am.has("header") {
		h := am.sub("header", "name", "value_env")
		a.Header.Name = l.header(h, "name", "")
		if a.Header.Name == "" {
			l.errorf(h.path, "name is required")
		} else if strings.EqualFold(a.Header.Name, "Content-Type") {
			l.errorf(h.at("name"), "Content-Type is set by the encoding, not a credential")
		}
		a.Header.ValueEnv, a.Header.Value = h.env("value_env", true, false)
	}
	if am.has("basic") {
		b := am.sub("basic", "username", "username_env", "password_env")
		if b.has("username") == b.has("username_env") {
			l.errorf(b.path, "set one of username and username_env")
		}
		a.Basic.Username = b.str("username")
		if b.has("username_env") {
			a.Basic.UsernameEnv, a.Basic.EnvUsername = b.env("username_env", true, false)
		}
		a.Basic.PasswordEnv, a.Basic.Password = b.env("password_env", true, true)
	}
	return a
}

// idempotency reads "none" (the default) or {header, ttl}: a key memory is only
// what the destination declares, with how long it lasts.
func (l *loader) idempotency(m fields) settings.Idempotency {
	n := m.vals["idempotency"]
	if s, ok := scalarText(n); ok {
		if n != nil && s != "none" {
			l.errorf(m.at("idempotency"), "%q: write none, or {header: Idempotency-Key, ttl: 24h} when the destination remembers keys", s)
		}
		return settings.Idempotency{}
	}
	im := m.sub("idempotency", "header", "ttl")
	if !im.has("ttl") {
		l.errorf(im.path, "ttl is required: how long the destination remembers a key (its documentation says)")
	}
	return settings.Idempotency{Header: l.header(im, "header", settings.DefaultIdempotencyHeader),
		TTL: im.duration("ttl", 0)}
}

// breaker reads a destination's breaker: off, or the settings that differ
// from the defaults (docs/destinations.md says them and why).
func (l *loader) breaker(m fields) settings.BreakerSettings {
	n := m.vals["breaker"]
	if s, ok := scalarText(n); ok {
		if n != nil && s != "off" {
			l.errorf(m.at("breaker"), "%q: write off, or {failure_rate: 0.7, min_calls: 10, window: 5m, open_for: 30s, max_open_for: 10m}", s)
		}
		return settings.BreakerSettings{Off: n != nil}.OrDefault()
	}
	bm := m.sub("breaker", "failure_rate", "min_calls", "window", "open_for", "max_open_for")
	b := settings.BreakerSettings{
		FailureRate: bm.fraction("failure_rate"),
		MinCalls:    bm.integer("min_calls", settings.DefaultBreakerMinCalls, 1, 1000000),
		Window:      bm.duration("window", settings.DefaultBreakerWindow),
		OpenFor:     bm.duration("open_for", settings.DefaultBreakerOpenFor),
		MaxOpenFor:  bm.duration("max_open_for", 0),
	}.OrDefault()
	if b.MaxOpenFor < b.OpenFor {
		l.errorf(bm.at("max_open_for"), "is shorter than open_for (%s): the wait only grows", b.OpenFor)
	}
	return b
}

// fraction reads a number above 0 and at most 1; 0 when absent.
func (m fields) fraction(key string) float64 {
	s := m.str(key)
	if s == "" {
		return 0
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || f > 1 {
		m.l.errorf(m.at(key), "%q is not a fraction above 0 and at most 1 (0.7 is 70%%)", s)
	}
	return f
}

func (l *loader) lookup(lk fields, defResultID string) settings.Lookup {
	r := settings.Lookup{
		Method:      l.method(lk, "method", settings.DefaultLookupMethod, "GET", "POST"),
		URL:         lk.url("url", true, false),
		Records:     lk.pointer("records", ""),
		Reference:   lk.pointer("reference", ""),
		ResultID:    lk.pointer("result_id", defResultID),
		Consistency: lk.oneOf("consistency", settings.DefaultConsistency, settings.ConsistencyStrong, settings.ConsistencyEventual),
	}
	r.Settle, r.SettleRetry = l.settle(lk)
	if lk.has("fetch") {
		f := lk.sub("fetch", "url", "id", "record")
		r.Fetch = settings.LookupFetch{URL: f.url("url", true, false), ID: f.pointer("id", ""), Record: f.pointer("record", "")}
		if r.Fetch.ID == "" {
			l.errorf(f.path, "id is required: the pointer in a listed record to its id")
		}
		if r.Fetch.URL != "" && !strings.Contains(r.Fetch.URL, "{id}") {
			l.errorf(f.at("url"), "%q has no {id}, where the listed record's id goes", r.Fetch.URL)
		}
		if r.Records == "" {
			l.errorf(f.path, "needs records: the list of candidates it reads one by one")
		}
	}
	if lk.has("body") {
		if r.Method != "POST" {
			l.errorf(lk.at("body"), "only a POST lookup has a body")
		}
		r.Body = l.value(lk.at("body"), lk.at("body"), lk.vals["body"], 0)
	}
	if r.Settle > 0 && r.Consistency != settings.ConsistencyEventual {
		l.errorf(lk.at("settle"), "applies to an eventual lookup only: a strong lookup's absence counts at once")
	}
	if r.URL != "" && !strings.Contains(r.URL, "{ref}") && !containsRef(r.Body) {
		l.errorf(lk.at("url"), "%q has no {ref}, where the operation key goes (in the URL or the body)", r.URL)
	}
	return r
}

// Settle's then: what an absence past settle leads to.
const (
	settleThenPerson = "person" // the default: the owner decides
	settleThenRetry  = "retry"  // the opt-in: the create is repeated with the same key
)

// settle reads lookup.settle: a duration (the absence past it goes to the owner),
// or {after: 15m, then: retry}, the explicit opt-in to a repeat without a person.
func (l *loader) settle(lk fields) (time.Duration, bool) {
	if _, ok := lk.vals["settle"].(ast.MapNode); !ok {
		return lk.duration("settle", 0), false
	}
	st := lk.sub("settle", "after", "then")
	if !st.has("after") {
		l.errorf(st.path, "after is required: how long after the call an absence is reported")
	}
	then := st.oneOf("then", settleThenPerson, settleThenPerson, settleThenRetry)
	return st.duration("after", 0), then == settleThenRetry
}

// containsRef reports whether "{ref}" appears in a string of the body template.
func containsRef(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.Contains(x, "{ref}")
	case []any:
		return slices.ContainsFunc(x, containsRef)
	case map[string]any:
		for _, e := range x {
			if containsRef(e) {
				return true
			}
		}
	}
	return false
}

var means = []string{settings.MeansRejected, settings.MeansRateLimited, settings.MeansUnavailable,
	settings.MeansUnauthorized, settings.MeansUncertain, settings.MeansExists}

func (l *loader) errorRule(path string, n ast.Node) settings.ErrorRule {
	m := l.mapping(path, n, "status", "pointer", "equals", "contains", "means")
	r := settings.ErrorRule{Status: m.integer("status", 0, 100, 599), Pointer: m.pointer("pointer", ""),
		Means: m.oneOf("means", "", means...)}
	if m.has("equals") {
		if r.Pointer == "" {
			l.errorf(m.at("equals"), "needs a pointer: the reply field it is compared with")
		}
		s, ok := scalarText(m.vals["equals"])
		if !ok {
			l.errorf(m.at("equals"), "must be a string, number or boolean, not %s", kindOf(m.vals["equals"]))
		}
		r.Equals, r.HasEquals = s, true
	}
	if m.has("contains") {
		r.Contains = m.required("contains")
		if r.Pointer == "" {
			l.errorf(m.at("contains"), "needs a pointer: the reply field whose text holds it")
		}
		if r.HasEquals {
			l.errorf(m.at("contains"), "set equals or contains, not both")
		}
	}
	if r.Status == 0 && r.Pointer == "" {
		l.errorf(path, "needs a status or a pointer: a rule matching every reply would hide the decision table")
	}
	if r.Status != 0 && ledger.MayHavePerformed(r.Status) && ledger.Repeats(r.Means) {
		l.errorf(m.at("means"), "a %d reply may come after the destination acted, so %s would call again without a lookup; "+
			"use uncertain (reconcile first), exists or rejected", r.Status, r.Means)
	}
	return r
}

// rate reads a positive number of calls per second.
func (m fields) rate(key string) float64 {
	s := m.str(key)
	if s == "" {
		return 0
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || f > 1e6 {
		m.l.errorf(m.at(key), "%q is not a positive number of calls per second", s)
	}
	return f
}

// validHeader reports whether s is an RFC 9110 field name (a token).
func validHeader(s string) bool {
	return s != "" && strings.Trim(s, "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz") == ""
}
