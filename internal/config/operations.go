package config

import (
	"fmt"
	"net/mail"
	"net/netip"

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
