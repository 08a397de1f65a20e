package oncehook

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/mail"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml/ast"
)

// Config is a parsed and validated oncehook.yaml (DESIGN.md section 4). Secrets are
// resolved from the environment when it is loaded, so a Config is complete: nothing
// later reads os.Getenv.
type Config struct {
	Path         string // file it was read from
	Listen       string // host:port, default "127.0.0.1:8080"
	BaseURL      string // yaml base_url: absolute URL for links, default "http://"+Listen
	Sources      []Source
	Destinations []Destination
	Actions      []ActionRule
	Retention    Retention
	Notify       Notify
	Sessions     Sessions
}

// Source is one client + provider + provider account + environment posting to
// POST /hooks/{Name}. Its Format and LogValue omit Secrets.
type Source struct {
	Name        string
	Client      string
	Provider    string // ProviderStripe, ProviderGitHub, ProviderShopify, ProviderStandardWebhooks
	Account     string // optional
	Environment string
	SecretEnv   string   // yaml secret_env: the variable holding the secrets
	Secrets     []string `yaml:"-" json:"-"` // every live secret (comma-separated during rotation)
	Tolerance   time.Duration
	MaxBody     int64         // bytes; yaml max_body "256KiB"
	Remember    time.Duration // how long delivery identities are kept
}

// Destination types.
const (
	DestinationHTTP = "http"
	DestinationSMTP = "smtp"
)

// Lookup consistencies: only a strong lookup's "absent" proves the record was not
// created, so only it allows retrying after an uncertain outcome.
const (
	ConsistencyStrong   = "strong"
	ConsistencyEventual = "eventual"
)

// Destination is where actions are performed. Its Format and LogValue omit the
// token, username and password.
type Destination struct {
	Name           string
	Type           string // DestinationHTTP or DestinationSMTP
	Create         Endpoint
	Auth           Auth
	Idempotency    Idempotency
	ReferenceField string // body field carrying the operation key; optional
	Lookup         Lookup // optional: URL == "" means no lookup
	ResultID       string // JSON pointer to the record id in create and lookup replies
	Timeout        time.Duration
	Owner          string // who reconnects it when its credentials fail

	// smtp only
	Addr, From  string
	UsernameEnv string
	PasswordEnv string
	Username    string `yaml:"-" json:"-"`
	Password    string `yaml:"-" json:"-"`
}

// Endpoint is the request that creates a record.
type Endpoint struct {
	Method string // POST, PUT or PATCH; default POST
	URL    string
}

// Auth holds an http destination's bearer token. Its Format omits Token.
type Auth struct {
	BearerEnv string
	Token     string `yaml:"-" json:"-"`
}

// Idempotency is how an http destination recognises a repeated request.
type Idempotency struct {
	Header string        // default "Idempotency-Key"
	TTL    time.Duration // how long the destination remembers a key; default 24h
}

// Lookup finds a record by operation key to reconcile an uncertain outcome.
type Lookup struct {
	URL         string // contains "{ref}", replaced by the operation key
	Consistency string // ConsistencyStrong or ConsistencyEventual (default)
}

// ActionRule turns events of one source into actions on one destination.
type ActionRule struct {
	Name        string
	Source      string
	On          []string // event types
	Key         []string // JSON pointers into the event: the business identity
	Destination string
	Params      []Param // in YAML order
	Retry       RetryPolicy
	Owner       string // default: the destination's owner
	After       string // another rule of the same source that must be confirmed first
	Resource    string // optional JSON pointer: the resource the event is about
	OccurredAt  string // optional JSON pointer: the payload's own time (RFC 3339 or unix seconds)
	CancelledBy []string
	ActOnStale  bool
}

// RetryPolicy is the budget of automatic attempts: both limits apply.
type RetryPolicy struct {
	Attempts int           // default 8
	Within   time.Duration // default 72h
}

// Param is one named value of the rendered request. Exactly one form is set:
// Pointer (a field of the event), Result (a predecessor's result), or neither, in
// which case Const is the value (possibly nil).
type Param struct {
	Name          string
	Pointer       string // "/a/b" into the event
	Const         any    // {const: v}
	Result        string // {result: action}: a rule on this rule's after chain
	ResultPointer string // {result: action, pointer: /x}; "" means its record id
}

// Defaults, documented in oncehook.example.yaml.
const (
	DefaultListen            = "127.0.0.1:8080"
	DefaultTolerance         = 5 * time.Minute
	DefaultMaxBody           = 1 << 20
	DefaultRemember          = 720 * time.Hour
	DefaultIdempotencyTTL    = 24 * time.Hour
	DefaultIdempotencyHeader = "Idempotency-Key"
	DefaultResultID          = "/id"
	DefaultTimeout           = 10 * time.Second
	DefaultRetryAttempts     = 8
	DefaultRetryWithin       = 72 * time.Hour
	DefaultConsistency       = ConsistencyEventual
)

// LoadConfig reads and parses the config file at path; see ParseConfig. A file that
// cannot be read is an EINVALID error too, so the command refuses to start.
func LoadConfig(path string, getenv func(string) string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{Code: EINVALID, Message: path + ": cannot read config", Err: err}
	}
	return ParseConfig(path, data, getenv)
}

// ParseConfig parses and validates data, read from path, resolving secrets through
// getenv (os.Getenv when nil). Every problem found is reported in one *Error of code
// EINVALID, one "<path>:<line>:<column>: <field>: <reason>" line each, in file
// order. Messages name environment variables, never their values.
func ParseConfig(path string, data []byte, getenv func(string) string) (*Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	l := newLoader(path, getenv)
	cfg := l.load(data)
	if err := l.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Source returns the source called name.
func (c *Config) Source(name string) (Source, bool) {
	for _, s := range c.Sources {
		if s.Name == name {
			return s, true
		}
	}
	return Source{}, false
}

// Destination returns the destination called name.
func (c *Config) Destination(name string) (Destination, bool) {
	for _, d := range c.Destinations {
		if d.Name == name {
			return d, true
		}
	}
	return Destination{}, false
}

// Action returns the action rule called name.
func (c *Config) Action(name string) (ActionRule, bool) {
	for _, a := range c.Actions {
		if a.Name == name {
			return a, true
		}
	}
	return ActionRule{}, false
}

// The types below have the fields of their namesakes but none of their methods, so
// Format can print a redacted copy with fmt's own struct printing without recursing.
type (
	plainSource      Source
	plainDestination Destination
	plainAuth        Auth
)

const redacted = "[redacted]"

func redact(s string) string {
	if s == "" {
		return "" // shows that the value is missing, which is no secret
	}
	return redacted
}

// Format prints s as fmt would, every verb included, with each secret replaced by
// "[redacted]": configs get printed while debugging and logged by accident.
func (s Source) Format(f fmt.State, verb rune) {
	p := plainSource(s)
	p.Secrets = make([]string, len(s.Secrets))
	for i, v := range s.Secrets {
		p.Secrets[i] = redact(v)
	}
	fmt.Fprintf(f, fmt.FormatString(f, verb), p)
}

// String is s printed with %+v, secrets redacted.
func (s Source) String() string { return fmt.Sprintf("%+v", s) }

// LogValue logs what identifies the source and how many secrets it has.
func (s Source) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("name", s.Name), slog.String("client", s.Client),
		slog.String("provider", s.Provider), slog.String("account", s.Account),
		slog.String("environment", s.Environment), slog.String("secret_env", s.SecretEnv),
		slog.Int("secrets", len(s.Secrets)))
}

// Format prints d as fmt would, every verb included, with the token, username and
// password replaced by "[redacted]".
func (d Destination) Format(f fmt.State, verb rune) {
	p := plainDestination(d)
	p.Auth.Token, p.Username, p.Password = redact(d.Auth.Token), redact(d.Username), redact(d.Password)
	fmt.Fprintf(f, fmt.FormatString(f, verb), p)
}

// String is d printed with %+v, secrets redacted.
func (d Destination) String() string { return fmt.Sprintf("%+v", d) }

// LogValue logs what identifies the destination, never its credentials.
func (d Destination) LogValue() slog.Value {
	target := d.Create.URL
	if d.Type == DestinationSMTP {
		target = d.Addr
	}
	return slog.GroupValue(slog.String("name", d.Name), slog.String("type", d.Type),
		slog.String("target", target), slog.String("owner", d.Owner))
}

// Format prints a as fmt would, every verb included, with the token redacted.
func (a Auth) Format(f fmt.State, verb rune) {
	p := plainAuth(a)
	p.Token = redact(a.Token)
	fmt.Fprintf(f, fmt.FormatString(f, verb), p)
}

// String is a printed with %+v, the token redacted.
func (a Auth) String() string { return fmt.Sprintf("%+v", a) }

// The readers below map the YAML keys of each section to fields; the primitives
// they use (and the cross-references between sections) are in config_validate.go.

var providers = []string{ProviderStripe, ProviderGitHub, ProviderShopify, ProviderStandardWebhooks}

func (l *loader) source(path string, n ast.Node) Source {
	m := l.mapping(path, n, "name", "client", "provider", "account", "environment",
		"secret_env", "tolerance", "max_body", "remember")
	s := Source{
		Name:        m.name("name"),
		Client:      m.required("client"),
		Provider:    m.oneOf("provider", "", providers...),
		Account:     m.str("account"),
		Environment: m.required("environment"),
		Tolerance:   m.duration("tolerance", DefaultTolerance),
		MaxBody:     m.size("max_body", DefaultMaxBody),
		Remember:    m.duration("remember", DefaultRemember),
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
	case ProviderStripe:
		if !strings.HasPrefix(secret, "whsec_") {
			return `does not start with "whsec_" as Stripe signing secrets do`
		}
	case ProviderStandardWebhooks:
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

func (l *loader) destination(path string, n ast.Node) Destination {
	m := l.mapping(path, n, append(append([]string{"name", "type", "timeout", "owner"}, httpOnly...), smtpOnly...)...)
	d := Destination{
		Name:    m.name("name"),
		Type:    m.oneOf("type", "", DestinationHTTP, DestinationSMTP),
		Timeout: m.duration("timeout", DefaultTimeout),
		Owner:   m.str("owner"),
	}
	foreign := smtpOnly
	switch d.Type {
	case DestinationHTTP:
		c := m.sub("create", "method", "url")
		d.Create = Endpoint{Method: strings.ToUpper(c.str("method")), URL: c.url("url", true, false)}
		if d.Create.Method == "" {
			d.Create.Method = "POST"
		} else if !slices.Contains([]string{"POST", "PUT", "PATCH"}, d.Create.Method) {
			l.errorf(c.at("method"), "%q is not one of POST, PUT, PATCH", d.Create.Method)
		}
		d.Auth.BearerEnv, d.Auth.Token = m.sub("auth", "bearer_env").env("bearer_env", false, false)
		idem := m.sub("idempotency", "header", "ttl")
		d.Idempotency = Idempotency{Header: idem.str("header"), TTL: idem.duration("ttl", DefaultIdempotencyTTL)}
		if d.Idempotency.Header == "" {
			d.Idempotency.Header = DefaultIdempotencyHeader
		} else if !validHeader(d.Idempotency.Header) {
			l.errorf(idem.at("header"), "%q is not an HTTP header name", d.Idempotency.Header)
		}
		d.ReferenceField = m.str("reference_field")
		if m.has("lookup") {
			lk := m.sub("lookup", "url", "consistency")
			d.Lookup = Lookup{URL: lk.url("url", true, true),
				Consistency: lk.oneOf("consistency", DefaultConsistency, ConsistencyStrong, ConsistencyEventual)}
		}
		d.ResultID = m.pointer("result_id", DefaultResultID)
	case DestinationSMTP:
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

func (l *loader) action(path string, n ast.Node) ActionRule {
	m := l.mapping(path, n, "name", "source", "on", "key", "destination", "params", "retry",
		"owner", "after", "resource", "occurred_at", "cancelled_by", "act_on_stale")
	a := ActionRule{
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
	a.Retry = RetryPolicy{Attempts: r.integer("attempts", DefaultRetryAttempts, 1, 1000),
		Within: r.duration("within", DefaultRetryWithin)}
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
func (l *loader) param(path, name string, n ast.Node) Param {
	p := Param{Name: name}
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
