package config

import (
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/provider"
	"github.com/oncehook/oncehook/internal/settings"
)

// Describe writes what cfg does, for people: each source's ingest URL, what protects
// each destination against acting twice, and each rule's routing, as `oncehook
// check` prints it.
func Describe(w io.Writer, cfg *settings.Config) {
	fmt.Fprint(w, "Sources (paste the URL into the provider):\n")
	for _, s := range cfg.Sources {
		fmt.Fprintf(w, "  %-20s %s/hooks/%s  (%s, client %s, %s; secrets from %s)\n",
			s.Name, cfg.BaseURL, s.Name, s.Provider, s.Client, s.Environment, s.SecretEnv)
		fmt.Fprintf(w, "  %-20s verified by %s\n", "", provider.Describe(s.Provider, s.Verify))
		if b := s.Backfill; b.On() {
			what := "events of its rules' types"
			if s.Provider == ledger.ProviderGitHub {
				what = "failed deliveries of " + b.Hook
			}
			fmt.Fprintf(w, "  %-20s backfill every %s: %s within %s, from %s\n", "", b.Every, what, b.Window, b.APIURL)
		}
	}
	fmt.Fprint(w, "\nDestinations (what protects against a double effect):\n")
	for _, d := range cfg.Destinations {
		fmt.Fprintf(w, "  %-20s %s: %s\n", d.Name, d.Type, Protection(d))
		fmt.Fprintf(w, "  %-20s %s\n", "", d.Breaker)
		fmt.Fprintf(w, "  %-20s %s\n", "", describeAlerts(cfg, d))
	}
	if risks := Risks(cfg); len(risks) > 0 {
		fmt.Fprint(w, "\nRisks (read before going live):\n")
		for _, r := range risks {
			fmt.Fprintf(w, "  %s\n", r)
		}
	}
	fmt.Fprint(w, "\nRouting:\n")
	for _, a := range cfg.Actions {
		line := fmt.Sprintf("  %s: %s on [%s] -> %s, key [%s]", a.Name, a.Source,
			strings.Join(a.On, ", "), a.Destination, strings.Join(a.Key, ", "))
		if a.After != "" {
			line += ", after " + a.After
		}
		if len(a.CancelledBy) > 0 {
			line += ", cancelled by [" + strings.Join(a.CancelledBy, ", ") + "]"
		}
		fmt.Fprintf(w, "%s, owner %s\n", line, a.Owner)
		if c := cfg.CutoverOf(a); c != nil {
			fmt.Fprintf(w, "    %s\n", describeCutover(*c, a, cfg))
		}
	}
	describeSignIn(w, cfg)
}

// describeAlerts says where an outage of d is told.
func describeAlerts(cfg *settings.Config, d settings.Destination) string {
	names := cfg.AlertChannelsOf(d.Name)
	switch {
	case len(names) > 0:
	case d.Owner != "":
		return "outages alert no one (no alerts; mailing the owner needs notify.smtp)"
	default:
		return "outages alert no one (no alerts and no owner)"
	}
	var where []string
	for _, n := range names {
		ch, _ := cfg.AlertChannel(n)
		switch {
		case ch.Kind == settings.AlertSlack:
			where = append(where, fmt.Sprintf("%s (Slack webhook from %s)", n, ch.URLEnv))
		case ch.Kind == settings.AlertPagerDuty:
			where = append(where, fmt.Sprintf("%s (PagerDuty, severity %s, routing key from %s)", n, ch.Severity, ch.RoutingKeyEnv))
		case ch.Kind == settings.AlertWebhook:
			where = append(where, fmt.Sprintf("%s (signed webhook to the URL in %s)", n, ch.URLEnv))
		case len(ch.To) > 0:
			where = append(where, fmt.Sprintf("%s (mail to %s)", n, strings.Join(ch.To, ", ")))
		default:
			where = append(where, fmt.Sprintf("%s (mail to the owner, %s)", n, d.Owner))
		}
	}
	return fmt.Sprintf("outages alert %s; opening again within %s continues one", strings.Join(where, ", "), cfg.Alerts.Quiet)
}

// describeSignIn says how people sign in to the dashboard and, for an identity
// provider, the redirect URL to register with it and what each rule gives.
func describeSignIn(w io.Writer, cfg *settings.Config) {
	s := cfg.SignIn
	if s.OIDC == nil {
		return
	}
	o := s.OIDC
	passwords := "local passwords too"
	if s.PasswordsOff {
		passwords = "local passwords off"
	}
	fmt.Fprintf(w, "\nSign-in: %s (%s; client id from %s, secret from %s), %s\n", o.Name, o.Issuer, o.ClientIDEnv, o.ClientSecretEnv, passwords)
	fmt.Fprintf(w, "  redirect URL to register: %s%s\n", cfg.BaseURL, settings.OIDCCallbackPath)
	for _, r := range o.Rules {
		clients := "every client"
		if len(r.Clients) > 0 {
			clients = "clients " + strings.Join(r.Clients, ", ")
		}
		fmt.Fprintf(w, "  %s %q: %s of %s\n", o.Claim, r.Value, r.Role, clients)
	}
}

// Protection says in one line what keeps destination d from acting twice when a
// call's outcome is unsure, and what is left to a person (docs/destinations.md).
func Protection(d settings.Destination) string {
	if d.Type == settings.DestinationSMTP {
		return "Message-ID from the operation key, no lookup: uncertain sends go to a person"
	}
	var parts []string
	switch {
	case strings.Contains(d.Create.URL, "{ref}") && d.Create.Method != "POST":
		parts = append(parts, "upsert by external id")
	case strings.HasSuffix(urlPath(d.Create.URL), "/upsert") && d.ReferenceField != "":
		parts = append(parts, "upsert by unique property")
	}
	if d.Idempotency.TTL > 0 {
		parts = append(parts, "key memory "+shortDuration(d.Idempotency.TTL.String()))
	}
	lk := d.Lookup
	switch {
	case lk.URL == "" && len(parts) == 0:
		return "nothing: uncertain calls go to a person (outcome unknown)"
	case lk.URL == "" && d.Idempotency.TTL > 0:
		parts = append(parts, "after it, uncertain calls go to a person")
	case lk.URL == "":
	case lk.Consistency == settings.ConsistencyStrong:
		parts = append(parts, "strong lookup")
	case lk.Settle > 0 && lk.SettleRetry:
		parts = append(parts, "eventual lookup settling after "+shortDuration(lk.Settle.String())+
			": not found before then is looked up again, after it retried with the same key (opt-in)")
	case lk.Settle > 0:
		parts = append(parts, "eventual lookup settling after "+shortDuration(lk.Settle.String())+
			": not found before then is looked up again, after it goes to the owner (the index may lag)")
	default:
		parts = append(parts, "eventual lookup: uncertain calls it does not find go to a person")
	}
	return strings.Join(parts, "; ")
}

// Risks lists what in cfg can act twice or never act, in a line each, for people
// to read before going live.
func Risks(cfg *settings.Config) []string {
	var out []string
	for _, d := range cfg.Destinations {
		if o := d.Auth.OAuth2; o != nil && isHubSpot(o) && o.Grant == settings.GrantAuthorizationCode && !slices.Contains(o.Scopes, "oauth") {
			out = append(out, d.Name+": HubSpot's authorize page refuses a public app that does not ask for the oauth scope; "+
				"add oauth to scopes, or Reconnect never succeeds and every action stays held")
		}
		if lk := d.Lookup; lk.SettleRetry {
			out = append(out, fmt.Sprintf("%s: settle {after: %s, then: retry} creates again a record its eventual lookup "+
				"has not shown %s after the call; no index promises to catch up by then",
				d.Name, shortDuration(lk.Settle.String()), shortDuration(lk.Settle.String())))
		}
	}
	return out
}

// isHubSpot reports whether o authorizes at HubSpot.
func isHubSpot(o *settings.OAuth2) bool {
	for _, s := range []string{o.AuthorizeURL, o.TokenURL} {
		if u, err := url.Parse(s); err == nil && (u.Hostname() == "app.hubspot.com" || u.Hostname() == "api.hubapi.com" ||
			strings.HasSuffix(u.Hostname(), ".hubspot.com")) {
			return true
		}
	}
	return false
}

// urlPath is the path of s, or "" when s is not a URL.
func urlPath(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return u.Path
}

// shortDuration drops the zero units Go prints: "24h0m0s" is "24h".
func shortDuration(s string) string {
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// describeCutover says what a cutover window does to an action's creates.
func describeCutover(c settings.Cutover, a settings.ActionRule, cfg *settings.Config) string {
	then := "looked up at " + a.Destination + " before any create"
	if d, ok := cfg.Destination(a.Destination); !ok || d.Lookup.URL == "" {
		then = "sent to a person first (" + a.Destination + " has no lookup)"
	}
	return fmt.Sprintf("cutover until %s: the operations of events from before %s (or without a provider time) are %s",
		c.Until.UTC().Format(time.RFC3339), c.From.UTC().Format(time.RFC3339), then)
}
