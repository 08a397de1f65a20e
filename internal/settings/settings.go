// Package settings is the config's schema: the types a parsed oncehook.yaml is
// made of (Config, its sources, destinations and action rules, sign-in,
// notifications, retention), their defaults, and the secrets they hold, which
// print redacted. internal/config loads and checks a file into them; the core and
// the stages read them. It sits below the core and imports only jsonpointer and
// money.
package settings

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/oncehook/oncehook/internal/jsonpointer"
	"github.com/oncehook/oncehook/internal/money"
)

// Config is a parsed and validated oncehook.yaml (docs/configuration.md). Secrets are
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
	// PerClient holds what one client has of its own (yaml clients: {NAME: ...}),
	// by client; a client without an entry has the shared settings.
	PerClient  map[string]ClientSettings
	Notify     Notify
	Alerts     Alerts
	Sessions   Sessions
	SignIn     SignIn
	SecretKeys SecretKeys `yaml:"-" json:"-"` // set when a destination uses oauth2
	// TrustedProxies are the reverse proxies whose X-Forwarded-For names the
	// client; a request from anywhere else is its peer's.
	TrustedProxies []netip.Prefix
	// ConnectionsPerAddress caps the open connections from one address (trusted
	// proxies excepted); 0 means no cap. Default DefaultConnectionsPerAddress.
	ConnectionsPerAddress int
}

// Trusted reports whether ip is one of the trusted proxies.
func (c *Config) Trusted(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range c.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Source is one client + provider + provider account + environment posting to
// POST /hooks/{Name}. Its Format and LogValue omit Secrets.
type Source struct {
	Name        string
	Client      string
	Provider    string // ProviderStripe, ProviderGitHub, ProviderShopify, ProviderStandardWebhooks, ProviderHMAC or a preset's name
	Account     string // optional
	Environment string
	SecretEnv   string   // yaml secret_env: the variable holding the secrets (a list: its names, comma-joined)
	Secrets     []string `yaml:"-" json:"-"` // every live secret (comma-separated during rotation, or one per listed variable)
	Tolerance   time.Duration
	MaxBody     int64         // bytes; yaml max_body "256KiB"
	Remember    time.Duration // how long delivery identities are kept
	Backfill    Backfill      // optional: Every == 0 means none
	// Verify describes the scheme of provider hmac and of the presets; nil for the
	// built-in stripe, github, shopify and standard-webhooks, verified by name.
	Verify *VerifySpec
	// Cutover, if set, makes the creates of its actions reconcile first (see
	// Cutover); an action's own window replaces it.
	Cutover *Cutover
}

// Cutover is the window in which an earlier system may have done what an event
// asks for (docs/cutover.md): an event received before Until whose provider
// time is before From, or that has no provider time of its own (GitHub), makes
// its new actions look the operation up before any create, or, where the
// destination has no lookup, wait for a person.
type Cutover struct {
	From, Until time.Time
}

// Covers reports whether an event received at received, with its provider's
// time occurred (nil: the provider gives none), falls in the window.
func (c Cutover) Covers(occurred *time.Time, received time.Time) bool {
	if !received.Before(c.Until) {
		return false
	}
	return occurred == nil || occurred.Before(c.From)
}

// Backfill is how a source asks its provider for what it should have received
// (docs/providers.md, "Backfill"): Stripe's events list, or a GitHub hook's deliveries. Its
// Format (through Source) omits APIKey and Token.
type Backfill struct {
	Every     time.Duration // between passes; default 15m
	Window    time.Duration // how far back each pass looks; default 72h
	APIURL    string        // default https://api.stripe.com or https://api.github.com
	APIKeyEnv string        // stripe: the variable holding a key that can read events
	APIKey    string        `yaml:"-" json:"-"`
	TokenEnv  string        // github: the variable holding a token that can read the hook
	Token     string        `yaml:"-" json:"-"`
	Hook      string        // github: repos/OWNER/REPO/hooks/ID, orgs/ORG/hooks/ID or app
}

// On reports whether the source is backfilled.
func (b Backfill) On() bool { return b.Every > 0 }

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

// Destination is where actions are performed. Its Format and LogValue omit every
// credential (docs/configuration.md, docs/destinations.md). The config loader applies every
// default, so the clients use a Destination as it is.
type Destination struct {
	Name           string
	Type           string // DestinationHTTP or DestinationSMTP
	Create         Endpoint
	Auth           Auth
	Idempotency    Idempotency // the zero value is "none", the default
	ReferenceField string      // JSON pointer into the body carrying the operation key; "" for none
	Lookup         Lookup      // optional: URL == "" means no lookup
	Check          Request     // what Reconnect calls; URL == "" means the lookup of a key that exists nowhere, else OPTIONS on the create URL
	Errors         []ErrorRule // the destination's own words, checked in order before the default classification
	RateLimitReset ResetHeader // a reset header read like Retry-After; Header == "" for none
	Limits         Limits
	Timeout        time.Duration
	Owner          string // who reconnects it when its credentials fail
	// Breaker parks the destination's work while it is down (breaker.go); the
	// zero value is the defaults.
	Breaker BreakerSettings
	// Corrections says who may approve a person's correction of a rejected request.
	Corrections Corrections
	// Alerts names the alert channels its outages go to (Config.Alerts); none
	// means its owner's mail (AlertOwnerMail).
	Alerts []string

	// smtp only
	Addr, From  string
	UsernameEnv string
	PasswordEnv string
	Username    string `yaml:"-" json:"-"`
	Password    string `yaml:"-" json:"-"`
}

// Corrections is a destination's rule for corrected requests: Approve is
// ApproveAnotherPerson (the default; also the zero value) or ApproveSelf.
type Corrections struct {
	Approve string
}

// Create encodings.
const (
	EncodingJSON = "json" // application/json, nested params
	EncodingForm = "form" // application/x-www-form-urlencoded, flat params only
)

// Endpoint is the request that creates a record.
type Endpoint struct {
	Method   string // POST, PUT or PATCH
	URL      string // may hold "{ref}", the operation key path-escaped
	Encoding string // EncodingJSON or EncodingForm
	ResultID ResultID
}

// ResultID says where a reply carries the record id: a JSON pointer into the reply
// document, or a reply header.
type ResultID struct {
	Pointer string
	Header  string
}

// String is the pointer, or "header NAME".
func (r ResultID) String() string {
	if r.Header != "" {
		return "header " + r.Header
	}
	return r.Pointer
}

// Auth holds an http destination's credentials: at most one of a bearer token, a
// header, or basic auth. Its Format omits every value.
type Auth struct {
	BearerEnv string
	Token     string `yaml:"-" json:"-"`
	Header    HeaderAuth
	Basic     BasicAuth
	OAuth2    *OAuth2 // see oauth.go
}

// HeaderAuth is a credential sent as a header of its own (X-Postmark-Server-Token).
type HeaderAuth struct {
	Name     string
	ValueEnv string
	Value    string `yaml:"-" json:"-"`
}

// BasicAuth is HTTP basic authentication; the username is written in the config
// (Username) or read from UsernameEnv (EnvUsername, then treated as a secret).
type BasicAuth struct {
	Username    string
	UsernameEnv string
	EnvUsername string `yaml:"-" json:"-"`
	PasswordEnv string
	Password    string `yaml:"-" json:"-"`
}

// User is the username sent.
func (b BasicAuth) User() string {
	if b.UsernameEnv != "" {
		return b.EnvUsername
	}
	return b.Username
}

// Secrets lists every credential value of a, for removing them from text.
func (a Auth) Secrets() []string {
	var out []string
	for _, s := range []string{a.Token, a.Header.Value, a.Basic.Password} {
		if s != "" {
			out = append(out, s)
		}
	}
	if a.Basic.EnvUsername != "" {
		out = append(out, a.Basic.EnvUsername)
	}
	if a.OAuth2 != nil && a.OAuth2.ClientSecret != "" {
		out = append(out, a.OAuth2.ClientSecret)
	}
	return out
}

// Idempotency is how an http destination recognises a repeated request. The zero
// value ("idempotency: none", the default) sends no key header and claims no memory.
type Idempotency struct {
	Header string        // the header carrying the operation key
	TTL    time.Duration // how long the destination remembers a key
}

// Lookup finds a record by operation key to reconcile an uncertain outcome.
type Lookup struct {
	Method      string        // GET or POST
	URL         string        // "{ref}" is replaced by the operation key, escaped
	Body        any           // POST only: a JSON template, "{ref}" replaced in any string
	Records     string        // pointer to a list of records; "" means the reply is the record (or a list of them)
	Reference   string        // pointer in a record to its reference, which must equal the key; "" unchecked
	ResultID    string        // pointer in a record to its id
	Consistency string        // ConsistencyStrong or ConsistencyEventual
	Settle      time.Duration // eventual only: absence is reported once this has passed since the attempt; 0 never
	// Fetch, when its URL is set, reads each listed record again by its id, and
	// Reference and ResultID apply to the record fetched: a search that lists
	// candidates without naming which field matched (Pipedrive's) is then checked
	// on the record itself.
	Fetch LookupFetch
	// SettleRetry is settle's opt-in (then: retry): absence past Settle repeats the
	// create with the same key instead of going to the owner.
	SettleRetry bool
}

// LookupFetch is a GET of one listed record by its id.
type LookupFetch struct {
	URL    string // "{id}" is replaced by the listed record's id, escaped
	ID     string // pointer in a listed record to its id
	Record string // pointer in the reply to the record; "" means the reply
}

// Request is a bodiless request, such as the credentials check.
type Request struct {
	Method string
	URL    string
}

// What an errors rule says a reply means (docs/destinations.md).
const (
	MeansRejected     = "rejected"
	MeansRateLimited  = "rate_limited"
	MeansUnavailable  = "unavailable"
	MeansUnauthorized = "unauthorized"
	MeansUncertain    = "uncertain"
	MeansExists       = "exists"
)

// ErrorRule classifies a reply in the destination's own words: it applies when the
// status matches (0: any), and the value at Pointer (when set) equals Equals (when
// set; compared as text, so 406 and "406" match), holds Contains (when set: for
// words inside a message, as HubSpot's duplicate "already has that value"), or
// else is present.
type ErrorRule struct {
	Status    int
	Pointer   string
	Equals    string
	HasEquals bool
	Contains  string
	Means     string
}

// Units of a reset header.
const (
	ResetSeconds      = "seconds"      // seconds from now
	ResetEpoch        = "epoch"        // a Unix time in seconds
	ResetMilliseconds = "milliseconds" // milliseconds from now
)

// ResetHeader is a rate-limit header telling when to come back, read beside
// Retry-After.
type ResetHeader struct {
	Header string
	Unit   string
}

// Limits bound the calls to one destination from one process; zero means no bound.
type Limits struct {
	Concurrency int
	PerSecond   float64
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
	// When are conditions on the body of an event that starts this action: all
	// must hold, or the event starts nothing here.
	When []Condition
	// CancelWhen are, by cancelling event type, conditions on its body that must
	// all hold for it to cancel: an event type that is not signed (Shopify's
	// topic, GitHub's event header) is otherwise only the sender's word.
	CancelWhen map[string][]Condition
	// Cutover, if set, is this action's window (see Cutover); else its source's.
	Cutover *Cutover
}

// Condition is a test on an event's body: the value at Pointer exists and is
// not null, or, with HasEquals, reads as Equals (as PointerString reads it:
// strings as they are, integers digit for digit, booleans as true or false).
type Condition struct {
	Pointer   string
	Equals    string
	HasEquals bool
}

// Holds reports whether c holds for the decoded document doc.
func (c Condition) Holds(doc any) bool {
	if !c.HasEquals {
		v, ok := jsonpointer.Get(doc, c.Pointer)
		return ok && v != nil
	}
	s, ok := jsonpointer.String(doc, c.Pointer)
	return ok && s == c.Equals
}

// AllHold reports whether every condition holds for doc (true for none).
func AllHold(cs []Condition, doc any) bool {
	for _, c := range cs {
		if !c.Holds(doc) {
			return false
		}
	}
	return true
}

// RetryPolicy is the budget of automatic attempts: both limits apply.
type RetryPolicy struct {
	Attempts int           // default 8
	Within   time.Duration // default 72h
}

// Param is one named value of the rendered request. Exactly one form is set:
// Pointer (a field of the event), Result (a predecessor's result), Object (a nested
// object of params, in YAML order), List (a list of params, unnamed), or none of
// them, in which case Const is the value (possibly nil).
type Param struct {
	Name          string
	Pointer       string       // "/a/b" into the event
	Const         any          // {const: v}
	Result        string       // {result: action}: a rule on this rule's after chain
	ResultPointer string       // {result: action, pointer: /x}; "" means its record id
	Money         *money.Money // {money: /amount, currency: /currency}: minor units to a major-unit decimal
	Object        []Param
	List          []Param
	IsObject      bool // Object is set (possibly empty)
	IsList        bool // List is set (possibly empty)
}

// HasResult reports whether p or a param nested in it names a predecessor's result.
func (p Param) HasResult() bool {
	if p.Result != "" {
		return true
	}
	for _, q := range append(slices.Clip(p.Object), p.List...) {
		if q.HasResult() {
			return true
		}
	}
	return false
}

// Defaults, documented in examples/oncehook.example.yaml.
const (
	DefaultListen            = "127.0.0.1:8080"
	DefaultTolerance         = 5 * time.Minute
	DefaultMaxBody           = 1 << 20
	DefaultRemember          = 720 * time.Hour
	DefaultIdempotencyHeader = "Idempotency-Key" // when idempotency names a ttl but no header
	DefaultResultID          = "/id"
	DefaultMethod            = "POST"
	DefaultLookupMethod      = "GET"
	DefaultEncoding          = EncodingJSON
	DefaultTimeout           = 10 * time.Second
	DefaultRetryAttempts     = 8
	DefaultRetryWithin       = 72 * time.Hour
	DefaultConsistency       = ConsistencyEventual
	DefaultBackfillEvery     = 15 * time.Minute
	DefaultBackfillWindow    = 72 * time.Hour
	DefaultStripeAPIURL      = "https://api.stripe.com"
	DefaultGitHubAPIURL      = "https://api.github.com"
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
// Alerts are where an outage of a destination is told: the channels, and the
// quiet time within which a breaker that opens again after closing continues
// the same outage (one alert opened, one resolved).
type Alerts struct {
	Quiet    time.Duration
	Channels []AlertChannel
}

// AlertChannel is one place outage alerts go: a Slack incoming webhook,
// PagerDuty's Events API v2, a signed webhook, or mail.
type AlertChannel struct {
	Name string
	Kind string // AlertSlack, AlertPagerDuty, AlertWebhook or AlertMail
	// slack and webhook: the URL, from the environment (a Slack webhook's URL
	// is its secret)
	URLEnv string
	URL    string `yaml:"-" json:"-"`
	// pagerduty: the integration's routing key, the severity of its events, and
	// the Events API's URL ("" for PagerDuty's own)
	RoutingKeyEnv string
	RoutingKey    string `yaml:"-" json:"-"`
	Severity      string
	EventsURL     string
	// webhook: the Standard Webhooks signing secret (whsec_...)
	SecretEnv string
	Secret    string `yaml:"-" json:"-"`
	// mail: the addresses; none means the destination's owner
	To []string
}

// The kinds of alert channel.
const (
	AlertSlack     = "slack"
	AlertPagerDuty = "pagerduty"
	AlertWebhook   = "webhook"
	AlertMail      = "mail"
)

// AlertOwnerMail is the channel of a destination that names none: its owner's
// mail, at once. A channel may not take the name.
const AlertOwnerMail = "owner-mail"

// DefaultAlertQuiet is the quiet time when alerts.quiet is not set.
const DefaultAlertQuiet = 10 * time.Minute

// AlertChannelsOf names the channels an outage of destination goes to: those
// it names, else its owner's mail (through notify.smtp), else none.
func (c *Config) AlertChannelsOf(destination string) []string {
	d, ok := c.Destination(destination)
	switch {
	case !ok:
		return nil
	case len(d.Alerts) > 0:
		return d.Alerts
	case d.Owner != "" && c.Notify.SMTP.Addr != "":
		return []string{AlertOwnerMail}
	}
	return nil
}

// AlertChannel returns the channel called name; AlertOwnerMail is a mail
// channel to the destination's owner.
func (c *Config) AlertChannel(name string) (AlertChannel, bool) {
	if name == AlertOwnerMail {
		return AlertChannel{Name: name, Kind: AlertMail}, true
	}
	for _, ch := range c.Alerts.Channels {
		if ch.Name == name {
			return ch, true
		}
	}
	return AlertChannel{}, false
}

func (c *Config) Destination(name string) (Destination, bool) {
	for _, d := range c.Destinations {
		if d.Name == name {
			return d, true
		}
	}
	return Destination{}, false
}

// Action returns the action rule called name.
// CutoverOf is the cutover window of rule's actions: its own, else its
// source's; nil without one.
func (c *Config) CutoverOf(rule ActionRule) *Cutover {
	if rule.Cutover != nil {
		return rule.Cutover
	}
	if src, ok := c.Source(rule.Source); ok {
		return src.Cutover
	}
	return nil
}

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

// Redact is Redacted in place of a secret s, or "" for a secret that is missing.
func Redact(s string) string {
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
		p.Secrets[i] = Redact(v)
	}
	p.Backfill.APIKey, p.Backfill.Token = Redact(s.Backfill.APIKey), Redact(s.Backfill.Token)
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
	p.Auth = redactAuth(d.Auth)
	p.Username, p.Password = Redact(d.Username), Redact(d.Password)
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

// Format prints a as fmt would, every verb included, with the credentials redacted.
func (a Auth) Format(f fmt.State, verb rune) {
	fmt.Fprintf(f, fmt.FormatString(f, verb), plainAuth(redactAuth(a)))
}

// redactAuth is a with every credential value replaced by "[redacted]".
func redactAuth(a Auth) Auth {
	a.Token, a.Header.Value, a.Basic.Password = Redact(a.Token), Redact(a.Header.Value), Redact(a.Basic.Password)
	a.Basic.EnvUsername = Redact(a.Basic.EnvUsername)
	return a
}

// String is a printed with %+v, the credentials redacted.
func (a Auth) String() string { return fmt.Sprintf("%+v", a) }

// Owners lists every owner the config names (destinations, action rules), sorted,
// each once.
func (c *Config) Owners() []string {
	var out []string
	for _, d := range c.Destinations {
		out = append(out, d.Owner)
	}
	for _, a := range c.Actions {
		out = append(out, a.Owner)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > 0 && out[0] == "" {
		out = out[1:]
	}
	return out
}

// Who may approve a correction, per destination (corrections.approve).
const (
	ApproveAnotherPerson = "another_person" // the default: four eyes
	ApproveSelf          = "self"
)
