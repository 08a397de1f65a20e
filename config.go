package oncehook

import (
	"fmt"
	"log/slog"
	"time"
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
	SecretKeys   SecretKeys `yaml:"-" json:"-"` // set when a destination uses oauth2
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
	Token     string  `yaml:"-" json:"-"`
	OAuth2    *OAuth2 // see oauth.go
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

// Redacted stands in for a secret wherever one would be printed.
const Redacted = "[redacted]"

func redact(s string) string {
	if s == "" {
		return "" // shows that the value is missing, which is no secret
	}
	return Redacted
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
