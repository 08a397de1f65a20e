package config

import (
	"fmt"
	"net/mail"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/oncehook/oncehook/internal/settings"
)

func (l *loader) sessions(m fields) settings.Sessions {
	s := m.sub("sessions", "idle", "lifetime")
	out := settings.Sessions{Idle: s.duration("idle", settings.DefaultSessionIdle), Lifetime: s.duration("lifetime", settings.DefaultSessionLifetime)}
	if out.Idle > out.Lifetime {
		l.errorf(s.at("idle"), "the idle timeout (%s) is longer than the lifetime (%s)", out.Idle, out.Lifetime)
	}
	return out
}

func (l *loader) retention(m fields) settings.Retention {
	r := m.sub("retention", "actions", "drop_bodies_after", "every")
	return settings.Retention{
		Actions:         r.duration("actions", settings.DefaultActionRetention),
		DropBodiesAfter: r.duration("drop_bodies_after", 0),
		Every:           r.duration("every", settings.DefaultPruneEvery),
	}
}

// clients reads each client's own settings: clients: {NAME: {retention:
// {actions, drop_bodies_after}}}. Each name is a client of the sources.
func (l *loader) clients(m fields, c *settings.Config) map[string]settings.ClientSettings {
	cm := l.mapping("clients", m.vals["clients"])
	if len(cm.keys) == 0 {
		return nil
	}
	known := c.Clients()
	out := map[string]settings.ClientSettings{}
	for _, name := range cm.keys {
		if !slices.Contains(known, name) {
			l.errorf(cm.at(name), "no source has the client %q (clients: %s)", name, strings.Join(known, ", "))
		}
		one := l.mapping(cm.at(name), cm.vals[name], "retention")
		r := one.sub("retention", "actions", "drop_bodies_after")
		if !one.has("retention") {
			l.errorf(cm.at(name), "says nothing: give it retention: {actions: ..., drop_bodies_after: ...}")
		}
		out[name] = settings.ClientSettings{Retention: settings.ClientRetention{
			Actions: r.duration("actions", 0), DropBodiesAfter: r.duration("drop_bodies_after", 0)}}
	}
	return out
}

// alerts reads where the outages of destinations are told (settings.Alerts).
func (l *loader) alerts(m fields) settings.Alerts {
	a := m.sub("alerts", "quiet", "channels")
	out := settings.Alerts{Quiet: a.duration("quiet", settings.DefaultAlertQuiet)}
	for i, n := range l.list(a.at("channels"), a.vals["channels"]) {
		path := fmt.Sprintf("%s[%d]", a.at("channels"), i)
		c := l.mapping(path, n, "name", "kind", "url_env", "routing_key_env", "severity", "url", "secret_env", "to")
		ch := settings.AlertChannel{Name: c.name("name"),
			Kind: c.oneOf("kind", "", settings.AlertSlack, settings.AlertPagerDuty, settings.AlertWebhook, settings.AlertMail)}
		if ch.Name == settings.AlertOwnerMail {
			l.errorf(c.at("name"), "%q is the owner's mail, which every destination has: name the channel otherwise", ch.Name)
		}
		used := map[string]bool{}
		switch ch.Kind {
		case settings.AlertSlack:
			ch.URLEnv, ch.URL = c.env("url_env", true, false)
			l.checkAlertURL(c.at("url_env"), ch.URLEnv, ch.URL)
			used["url_env"] = true
		case settings.AlertPagerDuty:
			ch.RoutingKeyEnv, ch.RoutingKey = c.env("routing_key_env", true, false)
			ch.Severity = c.oneOf("severity", "error", "critical", "error", "warning", "info")
			ch.EventsURL = c.url("url", false, false)
			used["routing_key_env"], used["severity"], used["url"] = true, true, true
		case settings.AlertWebhook:
			ch.URLEnv, ch.URL = c.env("url_env", true, false)
			l.checkAlertURL(c.at("url_env"), ch.URLEnv, ch.URL)
			ch.SecretEnv, ch.Secret = c.env("secret_env", true, false)
			used["url_env"], used["secret_env"] = true, true
		case settings.AlertMail:
			ch.To = c.strs("to", false)
			for j, to := range ch.To {
				if _, err := mail.ParseAddress(to); err != nil {
					l.errorf(fmt.Sprintf("%s[%d]", c.at("to"), j), "%q is not an email address", to)
				}
			}
			used["to"] = true
		}
		for _, k := range []string{"url_env", "routing_key_env", "severity", "url", "secret_env", "to"} {
			if c.has(k) && !used[k] && ch.Kind != "" {
				l.errorf(c.at(k), "is not used by %s channels", ch.Kind)
			}
		}
		out.Channels = append(out.Channels, ch)
	}
	return out
}

// checkAlertURL checks that the URL an alert channel reads from the
// environment is an absolute http(s) URL, without repeating it (it is a secret).
func (l *loader) checkAlertURL(path, env, value string) {
	if value == "" {
		return
	}
	if u, err := url.Parse(value); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		l.errorf(path, "environment variable %s does not hold an absolute http or https URL", env)
	}
}

func (l *loader) notify(m fields) settings.Notify {
	n := m.sub("notify", "every", "uncertain_after", "smtp", "webhook")
	out := settings.Notify{
		Every:          n.duration("every", settings.DefaultNotifyEvery),
		UncertainAfter: n.duration("uncertain_after", settings.DefaultUncertainAfter),
	}
	if n.has("smtp") {
		s := n.sub("smtp", "addr", "from", "username_env", "password_env")
		out.SMTP.Addr = s.hostPort("addr", "", true)
		if out.SMTP.From = s.required("from"); out.SMTP.From != "" {
			if _, err := mail.ParseAddress(out.SMTP.From); err != nil {
				l.errorf(s.at("from"), "%q is not an email address", out.SMTP.From)
			}
		}
		if s.has("username_env") != s.has("password_env") {
			l.errorf(s.path, "username_env and password_env go together")
		}
		out.SMTP.UsernameEnv, out.SMTP.Username = s.env("username_env", false, false)
		out.SMTP.PasswordEnv, out.SMTP.Password = s.env("password_env", false, true)
	}
	if n.has("webhook") {
		w := n.sub("webhook", "url", "secret_env")
		out.Webhook.URL = w.url("url", true, false)
		out.Webhook.SecretEnv, out.Webhook.Secret = w.env("secret_env", true, false)
	}
	return out
}

// trustedProxies reads the CIDRs (or single addresses) of the reverse proxies
// whose X-Forwarded-For names the client.
func (l *loader) trustedProxies(m fields) []netip.Prefix {
	var out []netip.Prefix
	for i, s := range m.strs("trusted_proxies", false) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				l.errorf(fmt.Sprintf("trusted_proxies[%d]", i), "%q is not a CIDR such as 10.0.0.0/8 or an address", s)
				continue
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out
}
