package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/internal/settings"
)

func oauthConfig(grant string) []byte {
	authorize := ""
	if grant == settings.GrantAuthorizationCode {
		authorize = `        authorize_url: https://login.example.com/authorize`
	}
	return lines(
		"sources:",
		"  - {name: s, client: c, provider: github, environment: live, secret_env: GH_SECRET}",
		"destinations:",
		"  - name: sf",
		"    type: http",
		"    create: {url: \"https://crm.example.com/x\"}",
		"    auth:",
		"      oauth2:",
		"        grant: "+grant,
		"        token_url: https://login.example.com/token",
		"        client_id_env: SF_CLIENT_ID",
		"        client_secret_env: SF_CLIENT_SECRET",
		"        scopes: [api, refresh_token]",
		authorize,
		"actions:",
		"  - {name: a, source: s, on: [push], key: [/id], destination: sf}",
	)
}

func TestParseOAuth2(t *testing.T) {
	t.Parallel()
	env := map[string]string{"GH_SECRET": "gh", "SF_CLIENT_ID": "client-id-1", "SF_CLIENT_SECRET": "client-secret-2",
		settings.SecretKeyEnv: "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="} // 32 bytes

	t.Run("AuthorizationCodeLoads", func(t *testing.T) {
		t.Parallel()
		cfg, err := Parse("x.yaml", oauthConfig(settings.GrantAuthorizationCode), envFrom(env))
		if err != nil {
			t.Fatal(err)
		}
		o := cfg.Destinations[0].Auth.OAuth2
		if o == nil || o.ClientSecret != "client-secret-2" || o.AuthorizeURL != "https://login.example.com/authorize" ||
			len(o.Scopes) != 2 || !cfg.SecretKeys.Set() {
			t.Fatalf("parsed %+v, keys set %v", o, cfg.SecretKeys.Set())
		}
		printed := fmt.Sprintf("%v %+v %#v %s", cfg, cfg.Destinations[0], o, cfg.SecretKeys)
		for _, secret := range []string{"client-secret-2", env[settings.SecretKeyEnv]} {
			if strings.Contains(printed, secret) {
				t.Errorf("printing the config shows a secret: %s", printed)
			}
		}
	})
	for _, tc := range []struct {
		name, key, want string
	}{
		{"MissingKeyIsAStartUpError", "", "x.yaml:8:7: destinations[0].auth.oauth2: ONCEHOOK_SECRET_KEY is not set"},
		{"MalformedKeyIsAStartUpError", "bm90LTMyLWJ5dGVz", "x.yaml:8:7: destinations[0].auth.oauth2: ONCEHOOK_SECRET_KEY must be 32 random bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := map[string]string{}
			for k, v := range env {
				e[k] = v
			}
			e[settings.SecretKeyEnv] = tc.key
			_, err := Parse("x.yaml", oauthConfig(settings.GrantClientCredentials), envFrom(e))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if tc.key != "" && strings.Contains(err.Error(), tc.key) {
				t.Errorf("the error repeats the key: %v", err)
			}
		})
	}
	t.Run("AuthorizeURLNeededForTheCodeGrant", func(t *testing.T) {
		t.Parallel()
		data := strings.Replace(string(oauthConfig(settings.GrantClientCredentials)), "client_credentials", "authorization_code", 1)
		if _, err := Parse("x.yaml", []byte(data), envFrom(env)); err == nil || !strings.Contains(err.Error(), "authorize_url") {
			t.Fatalf("error %v, want one about authorize_url", err)
		}
	})
}
