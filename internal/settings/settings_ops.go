package settings

import (
	"fmt"
	"time"
)

// Retention is how long oncehook keeps what it stored. Delivery identities and bodies
// follow each source's remember window; this section covers the rest.
type Retention struct {
	// Actions is how long closed actions (confirmed, resolved, cancelled) are kept,
	// with their attempts and audit trail. Default 9600h (400 days).
	Actions time.Duration
	// DropBodiesAfter, when set, removes an event's body this long after it was
	// routed, keeping its identity and hash (so repeats are still recognised).
	DropBodiesAfter time.Duration
	// Every is how often `oncehook serve` prunes. Default 1h.
	Every time.Duration
}

// ClientSettings are one client's own settings.
type ClientSettings struct {
	Retention ClientRetention
}

// ClientRetention overrides the shared retention windows for one client's
// rows: 0 keeps the shared window. A shorter window is applied by deleting the
// client's rows; a longer one carries them forward past the shared days'
// partitions (docs/operations.md, "Retention per client").
type ClientRetention struct {
	Actions         time.Duration // closed actions, with their attempts and audit
	DropBodiesAfter time.Duration // event bodies, counted from the day they were written
}

// ActionsWindow is how long client's closed actions are kept.
func (c *Config) ActionsWindow(client string) time.Duration {
	if w := c.PerClient[client].Retention.Actions; w > 0 {
		return w
	}
	return c.Retention.Actions
}

// ClientBodiesWindow is how long client's event bodies are kept when the
// client has a window of its own, and 0 when it has the shared one.
func (c *Config) ClientBodiesWindow(client string) time.Duration {
	return c.PerClient[client].Retention.DropBodiesAfter
}

// Sessions are the dashboard's sign-in sessions.
type Sessions struct {
	Idle     time.Duration // signed out after this long without a request; default 30m
	Lifetime time.Duration // signed out this long after signing in; default 12h
}

// Notify tells owners about actions that start needing a person.
type Notify struct {
	Every          time.Duration // at most one digest per owner per interval; default 15m
	UncertainAfter time.Duration // an uncertain action is reported after this long; default 30m
	SMTP           NotifySMTP    // optional
	Webhook        NotifyWebhook // optional
}

// NotifySMTP is the mail server digests go through.
type NotifySMTP struct {
	Addr, From  string
	UsernameEnv string
	PasswordEnv string
	Username    string `yaml:"-" json:"-"`
	Password    string `yaml:"-" json:"-"`
}

// NotifyWebhook is an outgoing webhook (for chat tools), signed the Standard
// Webhooks way with the secret named by SecretEnv.
type NotifyWebhook struct {
	URL       string
	SecretEnv string
	Secret    string `yaml:"-" json:"-"`
}

// Destination is the smtp destination that sends the digests.
func (s NotifySMTP) Destination() Destination {
	return Destination{Name: "notify", Type: DestinationSMTP, Addr: s.Addr, From: s.From,
		Username: s.Username, Password: s.Password, Timeout: 10 * time.Second}
}

// Enabled reports whether any channel is configured.
func (n Notify) Enabled() bool { return n.SMTP.Addr != "" || n.Webhook.URL != "" }

// Defaults for the operations sections.
const (
	DefaultActionRetention = 400 * 24 * time.Hour
	DefaultPruneEvery      = time.Hour
	DefaultNotifyEvery     = 15 * time.Minute
	DefaultUncertainAfter  = 30 * time.Minute
	DefaultSessionIdle     = 30 * time.Minute
	DefaultSessionLifetime = 12 * time.Hour
	// DefaultConnectionsPerAddress is enough for a provider's parallel
	// deliveries and a person's browser, not for one address to hold the server.
	DefaultConnectionsPerAddress = 256
)

type (
	plainNotifySMTP    NotifySMTP
	plainNotifyWebhook NotifyWebhook
)

// Format prints s as fmt would with its credentials redacted.
func (s NotifySMTP) Format(f fmt.State, verb rune) {
	p := plainNotifySMTP(s)
	p.Username, p.Password = Redact(s.Username), Redact(s.Password)
	fmt.Fprintf(f, fmt.FormatString(f, verb), p)
}

// String is s printed with %+v, credentials redacted.
func (s NotifySMTP) String() string { return fmt.Sprintf("%+v", s) }

// Format prints w as fmt would with its secret redacted.
func (w NotifyWebhook) Format(f fmt.State, verb rune) {
	p := plainNotifyWebhook(w)
	p.Secret = Redact(w.Secret)
	fmt.Fprintf(f, fmt.FormatString(f, verb), p)
}

// String is w printed with %+v, the secret redacted.
func (w NotifyWebhook) String() string { return fmt.Sprintf("%+v", w) }
