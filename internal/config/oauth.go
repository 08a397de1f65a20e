package config

import (
	"fmt"

	"github.com/oncehook/oncehook/internal/settings"
)

// oauth2 reads auth.oauth2 (docs/destinations.md, "OAuth2 destinations"), nil when absent.
func (l *loader) oauth2(auth fields) *settings.OAuth2 {
	if !auth.has("oauth2") {
		return nil
	}
	m := auth.sub("oauth2", "grant", "token_url", "authorize_url", "client_id_env", "client_secret_env", "scopes", "client_auth")
	o := &settings.OAuth2{
		Grant:      m.oneOf("grant", "", settings.GrantAuthorizationCode, settings.GrantClientCredentials),
		TokenURL:   m.url("token_url", true, false),
		Scopes:     m.strs("scopes", false),
		ClientAuth: m.oneOf("client_auth", settings.ClientAuthBasic, settings.ClientAuthBasic, settings.ClientAuthBody),
	}
	o.ClientIDEnv, o.ClientID = m.env("client_id_env", true, false)
	o.ClientSecretEnv, o.ClientSecret = m.env("client_secret_env", true, false)
	switch o.Grant {
	case settings.GrantAuthorizationCode:
		o.AuthorizeURL = m.url("authorize_url", true, false)
	case settings.GrantClientCredentials:
		if m.has("authorize_url") {
			l.errorf(m.at("authorize_url"), "is used by the authorization_code grant only")
		}
	}
	return o
}

// secretKeys reads ONCEHOOK_SECRET_KEY (and ONCEHOOK_SECRET_KEY_PREVIOUS) when a
// destination stores OAuth2 tokens, reporting a missing or malformed key at the
// first such destination: a start-up error, not a failure at the first refresh.
func (l *loader) secretKeys(c *settings.Config) {
	for i, d := range c.Destinations {
		if d.Auth.OAuth2 == nil {
			continue
		}
		keys, err := settings.ParseSecretKeys(l.getenv(settings.SecretKeyEnv), l.getenv(settings.SecretKeyPreviousEnv))
		if err != nil {
			l.errorf(joinPath(joinPath(destPath(i), "auth"), "oauth2"), "%s", err.Error())
			return
		}
		c.SecretKeys = keys
		return
	}
}

func destPath(i int) string { return fmt.Sprintf("destinations[%d]", i) }
