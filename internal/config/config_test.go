package config

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/oncehook/oncehook/internal/jsonpointer"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// examplePath is the example config at the top of the repository.
const examplePath = "../../examples/oncehook.example.yaml"

// exampleEnv holds one value per variable oncehook.example.yaml names. The values
// are distinctive so that a leak is easy to find in any output.
var exampleEnv = map[string]string{
	"STRIPE_WEBHOOK_SECRET":   "whsec_stripeOLD1,whsec_stripeNEW2",
	"GITHUB_WEBHOOK_SECRET":   "gh-secret-3",
	"SHOPIFY_WEBHOOK_SECRET":  "shpss-secret-4",
	"STANDARD_WEBHOOK_SECRET": "whsec_c3RhbmRhcmQtc2VjcmV0LTU=", // base64("standard-secret-5")
	"CRM_TOKEN":               "crm-token-6",
}

func envFrom(m map[string]string) func(string) string {
	return func(name string) string { return m[name] }
}

// lines builds a YAML snippet whose line numbers are the argument positions + 1.
func lines(ls ...string) []byte { return []byte(strings.Join(ls, "\n") + "\n") }

func TestLoadConfig(t *testing.T) {
	t.Parallel()

	t.Run("ExampleLoadsWithItsValues", func(t *testing.T) {
		t.Parallel()
		got, err := Load(examplePath, envFrom(exampleEnv))
		if err != nil {
			t.Fatal(err)
		}
		want := &settings.Config{
			Path:    examplePath,
			Listen:  "127.0.0.1:8080",
			BaseURL: "http://127.0.0.1:8080",
			Sources: []settings.Source{
				{Name: "stripe-live", Client: "acme", Provider: "stripe", Account: "acct_123", Environment: "live",
					SecretEnv: "STRIPE_WEBHOOK_SECRET", Secrets: []string{"whsec_stripeOLD1", "whsec_stripeNEW2"},
					Tolerance: 5 * time.Minute, MaxBody: 256 << 10, Remember: 720 * time.Hour},
				{Name: "github", Client: "acme", Provider: "github", Account: "acme-org", Environment: "live",
					SecretEnv: "GITHUB_WEBHOOK_SECRET", Secrets: []string{"gh-secret-3"},
					Tolerance: 5 * time.Minute, MaxBody: 25_000_000, Remember: 720 * time.Hour},
				{Name: "shopify", Client: "acme", Provider: "shopify", Account: "acme.myshopify.com", Environment: "live",
					SecretEnv: "SHOPIFY_WEBHOOK_SECRET", Secrets: []string{"shpss-secret-4"},
					Tolerance: 5 * time.Minute, MaxBody: 1 << 20, Remember: 720 * time.Hour},
				{Name: "billing", Client: "acme", Provider: "standard-webhooks", Environment: "live",
					SecretEnv: "STANDARD_WEBHOOK_SECRET", Secrets: []string{"whsec_c3RhbmRhcmQtc2VjcmV0LTU="},
					Tolerance: 5 * time.Minute, MaxBody: 1 << 20, Remember: 720 * time.Hour},
			},
			Destinations: []settings.Destination{
				{Name: "crm", Type: "http",
					Create: settings.Endpoint{Method: "POST", URL: "http://127.0.0.1:9090/opportunities", Encoding: "json",
						ResultID: settings.ResultID{Pointer: "/id"}},
					Auth:           settings.Auth{BearerEnv: "CRM_TOKEN", Token: "crm-token-6"},
					Idempotency:    settings.Idempotency{Header: "Idempotency-Key", TTL: 24 * time.Hour},
					ReferenceField: "/source_ref",
					Lookup: settings.Lookup{Method: "GET", URL: "http://127.0.0.1:9090/opportunities?source_ref={ref}",
						Reference: "/source_ref", ResultID: "/id", Consistency: "strong"},
					Errors:  []settings.ErrorRule{{Status: 422, Pointer: "/error", Equals: "amount must be positive", HasEquals: true, Means: "rejected"}},
					Limits:  settings.Limits{Concurrency: 8, PerSecond: 50},
					Timeout: 5 * time.Second, Owner: "crm-admin@example.com", Breaker: defaultBreaker,
					Corrections: settings.Corrections{Approve: settings.ApproveAnotherPerson}},
				{Name: "mail", Type: "smtp", Addr: "127.0.0.1:2525", From: "hello@example.com",
					Timeout: 10 * time.Second, Owner: "ops@example.com", Breaker: defaultBreaker},
			},
			Actions: []settings.ActionRule{
				{Name: "open_opportunity", Source: "stripe-live", On: []string{"checkout.session.completed"},
					Key: []string{"/data/object/metadata/enquiry_id"}, Destination: "crm",
					Params: []settings.Param{
						{Name: "enquiry_id", Pointer: "/data/object/metadata/enquiry_id"},
						{Name: "amount", Pointer: "/data/object/amount_total"},
					},
					Retry: settings.RetryPolicy{Attempts: 8, Within: 72 * time.Hour}, Owner: "sales-ops@example.com",
					Resource: "/data/object/id", OccurredAt: "/created", CancelledBy: []string{"checkout.session.expired"}},
				{Name: "send_welcome_email", Source: "stripe-live", On: []string{"checkout.session.completed"},
					Key: []string{"/data/object/metadata/enquiry_id"}, After: "open_opportunity", Destination: "mail",
					Params: []settings.Param{
						{Name: "to", Pointer: "/data/object/customer_details/email"},
						{Name: "subject", Const: "Welcome"},
						{Name: "text", Const: "Thanks!"},
					},
					Retry: settings.RetryPolicy{Attempts: 8, Within: 72 * time.Hour}, Owner: "ops@example.com"},
				{Name: "record_order", Source: "shopify", On: []string{"orders/create"}, Key: []string{"/id"},
					Destination: "crm", Params: []settings.Param{{Name: "order_id", Pointer: "/id"},
						{Name: "total", Pointer: "/total_price"}, {Name: "kind", Const: "order"}},
					Retry: settings.RetryPolicy{Attempts: 8, Within: 72 * time.Hour}, Owner: "crm-admin@example.com",
					Resource: "/id", OccurredAt: "/updated_at", CancelledBy: []string{"orders/cancelled"},
					CancelWhen: map[string][]settings.Condition{"orders/cancelled": {{Pointer: "/cancelled_at"}}}},
				{Name: "open_support_case", Source: "github", On: []string{"issues.opened"},
					Key: []string{"/repository/full_name", "/issue/number"}, Destination: "crm",
					Params: []settings.Param{{Name: "title", Pointer: "/issue/title"},
						{Name: "repository", Pointer: "/repository/full_name"}, {Name: "kind", Const: "support_case"}},
					Retry: settings.RetryPolicy{Attempts: 8, Within: 72 * time.Hour}, Owner: "support@example.com"},
				{Name: "send_receipt", Source: "billing", On: []string{"invoice.paid"}, Key: []string{"/data/invoice_id"},
					Destination: "mail", Params: []settings.Param{{Name: "to", Pointer: "/data/email"},
						{Name: "subject", Const: "Your receipt"}, {Name: "text", Const: "Thank you for your payment."}},
					Retry: settings.RetryPolicy{Attempts: 8, Within: 72 * time.Hour}, Owner: "ops@example.com"},
			},
			Retention:             settings.Retention{Actions: 400 * 24 * time.Hour, Every: time.Hour},
			Notify:                settings.Notify{Every: 15 * time.Minute, UncertainAfter: 30 * time.Minute},
			Alerts:                settings.Alerts{Quiet: settings.DefaultAlertQuiet},
			Sessions:              settings.Sessions{Idle: 30 * time.Minute, Lifetime: 12 * time.Hour},
			ConnectionsPerAddress: settings.DefaultConnectionsPerAddress,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("LoadConfig mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("MissingFileIsInvalid", func(t *testing.T) {
		t.Parallel()
		_, err := Load("testdata/no-such-config.yaml", envFrom(exampleEnv))
		if ledger.ErrorCode(err) != ledger.EINVALID || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Load(missing) = %v (code %q), want EINVALID wrapping fs.ErrNotExist", err, ledger.ErrorCode(err))
		}
	})
}

func TestParseConfigDefaults(t *testing.T) {
	t.Parallel()
	got, err := Parse("min.yaml", lines(
		"sources:",
		"  - {name: s, client: c, provider: standard-webhooks, environment: test, secret_env: S}",
		"destinations:",
		"  - {name: crm, type: http, create: {url: 'https://crm.example/records'}, lookup: {url: 'https://crm.example/records?ref={ref}'}, owner: crm@example.com}",
		"  - {name: mail, type: smtp, addr: 'localhost:25', from: a@example.com}",
		"actions:",
		"  - {name: a, source: s, on: e, key: [/id], destination: crm}",
	), envFrom(map[string]string{"S": "whsec_c2VjcmV0"}))
	if err != nil {
		t.Fatal(err)
	}
	want := &settings.Config{
		Path: "min.yaml", Listen: "127.0.0.1:8080", BaseURL: "http://127.0.0.1:8080",
		Sources: []settings.Source{{Name: "s", Client: "c", Provider: "standard-webhooks", Environment: "test",
			SecretEnv: "S", Secrets: []string{"whsec_c2VjcmV0"},
			Tolerance: 5 * time.Minute, MaxBody: 1 << 20, Remember: 720 * time.Hour}},
		Destinations: []settings.Destination{
			{Name: "crm", Type: "http", Create: settings.Endpoint{Method: "POST", URL: "https://crm.example/records",
				Encoding: "json", ResultID: settings.ResultID{Pointer: "/id"}},
				// No key memory unless the destination declares one (docs/destinations.md).
				Lookup:  settings.Lookup{Method: "GET", URL: "https://crm.example/records?ref={ref}", ResultID: "/id", Consistency: "eventual"},
				Timeout: 10 * time.Second, Owner: "crm@example.com", Breaker: defaultBreaker},
			{Name: "mail", Type: "smtp", Addr: "localhost:25", From: "a@example.com", Timeout: 10 * time.Second,
				Breaker: defaultBreaker},
		},
		Actions: []settings.ActionRule{{Name: "a", Source: "s", On: []string{"e"}, Key: []string{"/id"}, Destination: "crm",
			Retry: settings.RetryPolicy{Attempts: 8, Within: 72 * time.Hour}, Owner: "crm@example.com"}},
		Retention:             settings.Retention{Actions: 400 * 24 * time.Hour, Every: time.Hour},
		Notify:                settings.Notify{Every: 15 * time.Minute, UncertainAfter: 30 * time.Minute},
		Alerts:                settings.Alerts{Quiet: settings.DefaultAlertQuiet},
		Sessions:              settings.Sessions{Idle: 30 * time.Minute, Lifetime: 12 * time.Hour},
		ConnectionsPerAddress: settings.DefaultConnectionsPerAddress,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults mismatch (-want +got):\n%s", diff)
	}
}

func TestParseConfigValues(t *testing.T) {
	t.Parallel()
	env := envFrom(map[string]string{"S": "whsec_a", "U": " user ", "P": " pass "})
	const head = "sources: [{name: s, client: c, provider: stripe, environment: test, secret_env: S}]\n"
	tests := []struct {
		name string
		yaml string
		get  func(*settings.Config) any
		want any
	}{
		{"ListenAnyInterfaceLinksToLocalhost", head + "listen: ':9000'\n",
			func(c *settings.Config) any { return []string{c.Listen, c.BaseURL} }, []string{":9000", "http://localhost:9000"}},
		{"BaseURLLosesTrailingSlash", head + "base_url: https://hooks.example.com/\n",
			func(c *settings.Config) any { return c.BaseURL }, "https://hooks.example.com"},
		{"SizesInEveryUnit", "sources:\n" +
			"  - {name: a, client: c, provider: github, environment: t, secret_env: S, max_body: 512B}\n" +
			"  - {name: b, client: c, provider: github, environment: t, secret_env: S, max_body: 10MB}\n" +
			"  - {name: c, client: c, provider: github, environment: t, secret_env: S, max_body: 2048}\n",
			func(c *settings.Config) any {
				return []int64{c.Sources[0].MaxBody, c.Sources[1].MaxBody, c.Sources[2].MaxBody}
			},
			[]int64{512, 10_000_000, 2048}},
		{"AliasesResolve", "sources:\n" +
			"  - &src {name: a, client: c, provider: github, environment: t, secret_env: S, tolerance: &tol 90s}\n" +
			"  - {name: b, client: c, provider: github, environment: t, secret_env: S, tolerance: *tol}\n",
			func(c *settings.Config) any { return c.Sources[1].Tolerance }, 90 * time.Second},
		{"SMTPCredentialsKeepPasswordSpaces", head + "destinations: [{name: m, type: smtp, addr: 'h:25', from: a@b.example, username_env: U, password_env: P}]\n",
			func(c *settings.Config) any { d := c.Destinations[0]; return []string{d.Username, d.Password} }, []string{"user", " pass "}},
		{"ParamFormsKeepTheirOrder", head +
			"destinations: [{name: d, type: http, create: {url: 'http://x/y'}}]\n" +
			"actions:\n" +
			"  - {name: first, source: s, on: [e], key: [/id], destination: d}\n" +
			"  - name: second\n" +
			"    source: s\n" +
			"    on: [e]\n" +
			"    key: [/id, /a~1b]\n" +
			"    destination: d\n" +
			"    after: first\n" +
			"    params:\n" +
			"      z: /data/z\n" +
			"      list: {const: [1, two, {k: true}, null]}\n" +
			"      ref: {result: first}\n" +
			"      stage: {result: first, pointer: /stage}\n" +
			"      a: {const: 2.5}\n",
			func(c *settings.Config) any { return c.Actions[1].Params },
			[]settings.Param{
				{Name: "z", Pointer: "/data/z"},
				{Name: "list", Const: []any{uint64(1), "two", map[string]any{"k": true}, nil}},
				{Name: "ref", Result: "first"},
				{Name: "stage", Result: "first", ResultPointer: "/stage"},
				{Name: "a", Const: 2.5},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse("t.yaml", []byte(tt.yaml), env)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, tt.get(c)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseConfigSecrets(t *testing.T) {
	t.Parallel()

	t.Run("ListOfVariablesKeepsCommasInASecret", func(t *testing.T) {
		t.Parallel()
		c, err := Parse("t.yaml", lines(
			"sources:",
			"  - name: s",
			"    client: c",
			"    provider: github",
			"    environment: test",
			"    secret_env: [GH_OLD, GH_NEW]",
		), envFrom(map[string]string{"GH_OLD": " old,with,commas ", "GH_NEW": "new-secret"}))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"old,with,commas", "new-secret"}, c.Sources[0].Secrets); diff != "" {
			t.Errorf("Secrets mismatch (-want +got):\n%s", diff)
		}
		if got := c.Sources[0].SecretEnv; got != "GH_OLD,GH_NEW" {
			t.Errorf("SecretEnv = %q, want both names", got)
		}
	})

	t.Run("ListOfVariablesReportsEachAtItsLine", func(t *testing.T) {
		t.Parallel()
		_, err := Parse("t.yaml", lines(
			"sources:",
			"  - name: s",
			"    client: c",
			"    provider: stripe",
			"    environment: test",
			"    secret_env:",
			"      - PRESENT",
			"      - ABSENT",
			"      - whsec_pasted",
			"      - NOT_STRIPE",
		), envFrom(map[string]string{"PRESENT": "whsec_a,b", "NOT_STRIPE": "sk_live_x"}))
		checkErrorLines(t, err, []string{
			"t.yaml:8:9: sources[0].secret_env[1]: environment variable ABSENT is not set or empty",
			"t.yaml:9:9: sources[0].secret_env[2]: must name an environment variable (A-Z, 0-9, _), not hold the secret itself",
			`t.yaml:10:9: sources[0].secret_env[3]: the secret in NOT_STRIPE does not start with "whsec_" as Stripe signing secrets do`,
		})
		if strings.Contains(err.Error(), "sk_live") {
			t.Errorf("error reveals a secret:\n%v", err)
		}
	})

	t.Run("RotationSecretsSplit", func(t *testing.T) {
		t.Parallel()
		c, err := Parse("t.yaml", lines(
			"sources: [{name: s, client: c, provider: stripe, environment: test, secret_env: S}]",
		), envFrom(map[string]string{"S": " whsec_old , whsec_new,"}))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"whsec_old", "whsec_new"}, c.Sources[0].Secrets); diff != "" {
			t.Errorf("Secrets mismatch (-want +got):\n%s", diff)
		}
	})

	t.Run("MissingVariableNamedNotValued", func(t *testing.T) {
		t.Parallel()
		env := map[string]string{"PRESENT": "whsec_present-value", "CRM_TOKEN": "", "P": "pw-value"}
		_, err := Parse("t.yaml", lines(
			"sources:",
			"  - {name: s, client: c, provider: stripe, environment: test, secret_env: PRESENT}",
			"  - {name: t, client: c, provider: github, environment: test, secret_env: ABSENT}",
			"destinations:",
			"  - name: crm",
			"    type: http",
			"    create: {url: 'http://crm/x'}",
			"    auth: {bearer_env: CRM_TOKEN}",
			"  - {name: m, type: smtp, addr: 'h:25', from: a@b.example, username_env: NOUSER, password_env: P}",
		), envFrom(env))
		want := []string{
			"t.yaml:3:63: sources[1].secret_env: environment variable ABSENT is not set or empty",
			"t.yaml:8:12: destinations[0].auth.bearer_env: environment variable CRM_TOKEN is not set or empty",
			"t.yaml:9:60: destinations[1].username_env: environment variable NOUSER is not set or empty",
		}
		checkErrorLines(t, err, want)
		for _, v := range env {
			if v != "" && strings.Contains(err.Error(), v) {
				t.Errorf("error reveals the value %q:\n%v", v, err)
			}
		}
	})

	t.Run("SecretPastedInPlaceOfNameIsNotRepeated", func(t *testing.T) {
		t.Parallel()
		_, err := Parse("t.yaml", lines(
			"sources: [{name: s, client: c, provider: stripe, environment: test, secret_env: whsec_pasted123}]",
		), envFrom(nil))
		checkErrorLines(t, err, []string{
			"t.yaml:1:69: sources[0].secret_env: must name an environment variable (A-Z, 0-9, _), not hold the secret itself",
		})
	})

	t.Run("WrongKindOfSecretIsDescribedNotShown", func(t *testing.T) {
		t.Parallel()
		_, err := Parse("t.yaml", lines(
			"sources:",
			"  - {name: s, client: c, provider: stripe, environment: test, secret_env: S}",
			"  - {name: t, client: c, provider: standard-webhooks, environment: test, secret_env: S}",
		), envFrom(map[string]string{"S": "whsec_ok,sk_live_notasigningsecret!"}))
		checkErrorLines(t, err, []string{
			`t.yaml:2:63: sources[0].secret_env: secret 2 in S does not start with "whsec_" as Stripe signing secrets do`,
			`t.yaml:3:74: sources[1].secret_env: secret 1 in S is not base64 after an optional "whsec_"`,
			`t.yaml:3:74: sources[1].secret_env: secret 2 in S is not base64 after an optional "whsec_"`,
		})
		if strings.Contains(err.Error(), "sk_live") {
			t.Errorf("error reveals a secret:\n%v", err)
		}
	})

	t.Run("NeverPrinted", func(t *testing.T) {
		t.Parallel()
		c, err := Load(examplePath, envFrom(map[string]string{
			"STRIPE_WEBHOOK_SECRET": "whsec_stripeOLD1,whsec_stripeNEW2", "GITHUB_WEBHOOK_SECRET": "gh-secret-3",
			"SHOPIFY_WEBHOOK_SECRET": "shpss-secret-4", "STANDARD_WEBHOOK_SECRET": "whsec_c3RhbmRhcmQtc2VjcmV0LTU=",
			"CRM_TOKEN": "crm-token-6",
		}))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
			out = append(out, fmt.Sprintf(verb, c), fmt.Sprintf(verb, *c), fmt.Sprintf(verb, c.Sources),
				fmt.Sprintf(verb, c.Destinations[0]), fmt.Sprintf(verb, c.Destinations[0].Auth))
		}
		out = append(out, c.Sources[0].String(), c.Destinations[0].String())
		js, _ := json.Marshal(c)
		var logs bytes.Buffer
		slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "cfg", c, "src", c.Sources[0], "dst", c.Destinations[0])
		slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "cfg", c, "src", c.Sources[0], "dst", c.Destinations[0])
		out = append(out, string(js), logs.String())
		all := strings.Join(out, "\n")
		for _, v := range []string{"whsec_stripeOLD1", "whsec_stripeNEW2", "gh-secret-3", "shpss-secret-4", "c3RhbmRhcmQtc2VjcmV0LTU", "crm-token-6"} {
			if strings.Contains(all, v) || strings.Contains(all, hex.EncodeToString([]byte(v))) {
				t.Errorf("secret %q printed", v)
			}
		}
		if !strings.Contains(fmt.Sprintf("%+v", c), "Secrets:[[redacted] [redacted]]") {
			t.Errorf("%%+v does not show the redacted secrets: %+v", c)
		}
	})
}

// Header values, basic passwords and usernames read from the environment are
// secrets like a bearer token: never printed, logged or encoded.
func TestRecipeCredentialsNeverPrinted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ file, auth string }{
		{"postmark.yaml", ""},
		{"mailgun.yaml", ""},
		{"mailgun.yaml", "{basic: {username_env: MAILGUN_USER, password_env: MAILGUN_API_KEY}}"},
	} {
		raw, err := os.ReadFile("../../examples/destinations/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		yaml := string(raw)
		if tc.auth != "" {
			yaml = strings.Replace(yaml, "auth: {basic: {username: api, password_env: MAILGUN_API_KEY}}", "auth: "+tc.auth, 1)
		}
		secrets := map[string]string{"STRIPE_WEBHOOK_SECRET": "whsec_recipe1", "POSTMARK_SERVER_TOKEN": "pm-token-7",
			"MAILGUN_API_KEY": "mg-key-8", "MAILGUN_USER": "mg-user-9"}
		c, err := Parse(tc.file, []byte(yaml), envFrom(secrets))
		if err != nil {
			t.Fatal(err)
		}
		d := c.Destinations[0]
		var out []string
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
			out = append(out, fmt.Sprintf(verb, c), fmt.Sprintf(verb, d), fmt.Sprintf(verb, d.Auth))
		}
		js, _ := json.Marshal(c)
		var logs bytes.Buffer
		slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "cfg", c, "dst", d)
		all := strings.Join(append(out, string(js), logs.String()), "\n")
		for _, v := range []string{"pm-token-7", "mg-key-8", "mg-user-9"} {
			if strings.Contains(all, v) || strings.Contains(all, hex.EncodeToString([]byte(v))) {
				t.Errorf("%s: secret %q printed", tc.file, v)
			}
		}
		if tc.auth != "" && d.Auth.Basic.User() != "mg-user-9" {
			t.Errorf("basic user = %q, want the one from MAILGUN_USER", d.Auth.Basic.User())
		}
	}
}

// checkErrorLines asserts err is EINVALID and its message is exactly want.
func checkErrorLines(t *testing.T, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("err = nil, want:\n%s", strings.Join(want, "\n"))
	}
	if code := ledger.ErrorCode(err); code != ledger.EINVALID {
		t.Errorf("code = %q, want %q", code, ledger.EINVALID)
	}
	if diff := cmp.Diff(want, strings.Split(err.Error(), "\n")); diff != "" {
		t.Errorf("error lines mismatch (-want +got):\n%s", diff)
	}
}

func TestConfigLookups(t *testing.T) {
	t.Parallel()
	c, err := Load(examplePath, envFrom(exampleEnv))
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := c.Source("github"); !ok || s.Provider != ledger.ProviderGitHub {
		t.Errorf(`Source("github") = %v, %v`, s, ok)
	}
	if d, ok := c.Destination("mail"); !ok || d.Addr != "127.0.0.1:2525" {
		t.Errorf(`Destination("mail") = %v, %v`, d, ok)
	}
	if a, ok := c.Action("send_welcome_email"); !ok || a.After != "open_opportunity" {
		t.Errorf(`Action("send_welcome_email") = %v, %v`, a, ok)
	}
	if _, ok := c.Source("nope"); ok {
		t.Error(`Source("nope") found`)
	}
	if _, ok := c.Destination("nope"); ok {
		t.Error(`Destination("nope") found`)
	}
	if _, ok := c.Action("nope"); ok {
		t.Error(`Action("nope") found`)
	}
}

// fuzzEnv satisfies every provider's secret shape, so the fuzzer explores the file.
func fuzzEnv(string) string { return "whsec_c2VjcmV0" }

func FuzzParseConfig(f *testing.F) {
	if data, err := os.ReadFile(examplePath); err == nil {
		f.Add(data)
	}
	f.Add([]byte("sources: [{name: s, client: c, provider: github, environment: t, secret_env: S}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("f.yaml", data, fuzzEnv)
		if err != nil {
			if ledger.ErrorCode(err) != ledger.EINVALID || !strings.HasPrefix(err.Error(), "f.yaml:") {
				t.Fatalf("error %q has code %q, want EINVALID with the file name", err, ledger.ErrorCode(err))
			}
			return
		}
		checkConfigValid(t, c)
	})
}

// checkConfigValid restates the rules of a valid config on the parsed result, so the
// fuzzer proves that nothing invalid gets through, not only that nothing panics.
func checkConfigValid(t *testing.T, c *settings.Config) {
	t.Helper()
	fail := func(format string, args ...any) { t.Helper(); t.Fatalf(format, args...) }
	if len(c.Sources) == 0 || c.Listen == "" || c.BaseURL == "" {
		fail("no sources, listen or base_url: %+v", c)
	}
	pointer := func(p string, optional bool) {
		if p == "" && optional {
			return
		}
		if !strings.HasPrefix(p, "/") || jsonpointer.Valid(p) != nil {
			fail("invalid pointer %q", p)
		}
	}
	seen := map[string]bool{}
	for _, s := range c.Sources {
		if !validName.MatchString(s.Name) || seen["s"+s.Name] || s.Client == "" || s.Environment == "" ||
			!slices.Contains(providers, s.Provider) || len(s.Secrets) == 0 ||
			s.Tolerance <= 0 || s.MaxBody <= 0 || s.Remember <= 0 {
			fail("invalid source %+v", s)
		}
		seen["s"+s.Name] = true
	}
	for _, d := range c.Destinations {
		ok := validName.MatchString(d.Name) && !seen["d"+d.Name] && d.Timeout > 0
		switch d.Type {
		case settings.DestinationHTTP:
			ok = ok && d.Create.URL != "" && d.Create.Method != "" && d.Create.Encoding != "" && (d.Idempotency.Header != "") == (d.Idempotency.TTL > 0)
			ok = ok && (d.Lookup.URL == "" || d.Lookup.Method != "" && d.Lookup.Consistency != "" && d.Lookup.ResultID != "")
			pointer(d.Create.ResultID.Pointer, d.Create.ResultID.Header != "")
		case settings.DestinationSMTP:
			ok = ok && d.Addr != "" && d.From != ""
		default:
			ok = false
		}
		if !ok {
			fail("invalid destination %+v", d)
		}
		seen["d"+d.Name] = true
	}
	for _, a := range c.Actions {
		src, okS := c.Source(a.Source)
		_, okD := c.Destination(a.Destination)
		if !validName.MatchString(a.Name) || seen["a"+a.Name] || !okS || !okD || len(a.On) == 0 || len(a.Key) == 0 ||
			a.Retry.Attempts < 1 || a.Retry.Within <= 0 {
			fail("invalid action %+v (source %v)", a, src)
		}
		seen["a"+a.Name] = true
		for _, k := range a.Key {
			pointer(k, false)
		}
		pointer(a.Resource, true)
		pointer(a.OccurredAt, true)
		var chain []string
		for b, ok := c.Action(a.After); ok; b, ok = c.Action(b.After) {
			if b.Source != a.Source || b.Name == a.Name || slices.Contains(chain, b.Name) {
				fail("bad after chain from %q: %v", a.Name, append(chain, b.Name))
			}
			chain = append(chain, b.Name)
		}
		if a.After != "" && len(chain) == 0 {
			fail("after %q names no action", a.After)
		}
		for _, p := range a.Params {
			switch {
			case p.Pointer != "":
				pointer(p.Pointer, false)
			case p.Result != "":
				if !slices.Contains(chain, p.Result) {
					fail("param %q result %q is not on the after chain %v", p.Name, p.Result, chain)
				}
				pointer(p.ResultPointer, true)
			}
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	t.Parallel()
	const src = "sources: [{name: s, client: c, provider: stripe, environment: test, secret_env: S}]"
	const dst = "destinations: [{name: crm, type: http, create: {url: 'http://crm/x'}}]"
	tests := []struct {
		name string
		yaml []byte
		want []string
	}{
		{"DestinationsAsTheyReallyAre", lines(
			src,
			"destinations:",
			"  - name: api",
			"    type: http",
			"    create: {url: 'http://api/x', encoding: xml, result_id: {head: X}}",
			"    auth: {bearer_env: T, basic: {password_env: P}}",
			"    idempotency: always",
			"    lookup: {method: PUT, url: 'http://api/s', body: {q: x}, consistency: strong, settle: 1m}",
			"    errors: [{means: rejected}, {status: 600, pointer: /a, equals: [1], means: maybe}, {status: 400, equals: x, means: exists}]",
			"    limits: {concurrency: 0, per_second: fast}",
			"  - {name: form, type: http, create: {url: 'http://api/f', encoding: form}, corrections: {approve: me}}",
			"actions:",
			"  - {name: a, source: s, on: [e], key: [/id], destination: form, params: {nested: {b: /x}, list: [/y]}}",
		), []string{
			`t.yaml:5:35: destinations[0].create.encoding: "xml" is not one of json, form`,
			`t.yaml:5:50: destinations[0].create.result_id: header is required`,
			`t.yaml:5:62: destinations[0].create.result_id.head: unknown field (known: header)`,
			`t.yaml:6:5: destinations[0].auth: set one of bearer_env, header, basic and oauth2, not 2`,
			`t.yaml:6:12: destinations[0].auth.bearer_env: environment variable T is not set or empty`,
			`t.yaml:6:27: destinations[0].auth.basic: set one of username and username_env`,
			`t.yaml:6:35: destinations[0].auth.basic.password_env: environment variable P is not set or empty`,
			`t.yaml:7:5: destinations[0].idempotency: "always": write none, or {header: Idempotency-Key, ttl: 24h} when the destination remembers keys`,
			`t.yaml:8:14: destinations[0].lookup.method: "PUT" is not one of GET, POST`,
			`t.yaml:8:27: destinations[0].lookup.url: "http://api/s" has no {ref}, where the operation key goes (in the URL or the body)`,
			`t.yaml:8:48: destinations[0].lookup.body: only a POST lookup has a body`,
			`t.yaml:8:83: destinations[0].lookup.settle: applies to an eventual lookup only: a strong lookup's absence counts at once`,
			`t.yaml:9:15: destinations[0].errors[0]: needs a status or a pointer: a rule matching every reply would hide the decision table`,
			`t.yaml:9:34: destinations[0].errors[1].status: "600" is not a whole number from 100 to 599`,
			`t.yaml:9:60: destinations[0].errors[1].equals: must be a string, number or boolean, not a list`,
			`t.yaml:9:73: destinations[0].errors[1].means: "maybe" is not one of rejected, rate_limited, unavailable, unauthorized, uncertain, exists`,
			`t.yaml:9:102: destinations[0].errors[2].equals: needs a pointer: the reply field it is compared with`,
			`t.yaml:10:14: destinations[0].limits.concurrency: "0" is not a whole number from 1 to 10000`,
			`t.yaml:10:30: destinations[0].limits.per_second: "fast" is not a positive number of calls per second`,
			`t.yaml:11:91: destinations[1].corrections.approve: "me" is not one of another_person, self`,
			`t.yaml:13:75: actions[0].params.nested: destination "form" sends a form, which holds flat fields only`,
			`t.yaml:13:92: actions[0].params.list: destination "form" sends a form, which holds flat fields only`,
		}},
		{"NoRepeatAfterAReplyThatMayHaveActed", lines(
			src,
			"destinations:",
			"  - name: api",
			"    type: http",
			"    create: {url: 'http://api/x'}",
			"    errors: [{status: 500, means: unavailable}, {status: 200, means: rate_limited}, {status: 503, means: unavailable}, {status: 502, means: uncertain}]",
		), []string{
			`t.yaml:6:28: destinations[0].errors[0].means: a 500 reply may come after the destination acted, so unavailable would call again without a lookup; use uncertain (reconcile first), exists or rejected`,
			`t.yaml:6:63: destinations[0].errors[1].means: a 200 reply may come after the destination acted, so rate_limited would call again without a lookup; use uncertain (reconcile first), exists or rejected`,
		}},
		{"ProviderNotInList", lines(
			"sources:",
			"  - name: a",
			"    client: c",
			"    provider: strype",
			"    environment: test",
			"    secret_env: S",
		), []string{`t.yaml:4:5: sources[0].provider: "strype" is not one of stripe, github, shopify, standard-webhooks, hmac, calendly, clerk, discord, gitlab, hubspot, intercom, linear, mailgun, paddle, postmark, resend, sendgrid, slack, square, twilio, typeform, zendesk, zoom`}},
		{"TrustedProxiesAreAddresses", lines(
			src,
			"trusted_proxies: [10.0.0.0/8, 192.0.2.1, proxy.example.com]",
			"connections_per_address: -1",
		), []string{
			`t.yaml:2:42: trusted_proxies[2]: "proxy.example.com" is not a CIDR such as 10.0.0.0/8 or an address`,
			`t.yaml:3:1: connections_per_address: "-1" is not a whole number from 0 to 1048576`,
		}},
		{"UnknownFieldsAtTheirLine", lines(
			src,
			"destinations:",
			"  - name: crm",
			"    type: http",
			"    create: {url: 'http://crm/x', verb: POST}",
			"    retries: 3",
			"lisen: ':80'",
		), []string{
			"t.yaml:5:35: destinations[0].create.verb: unknown field (known: method, url, encoding, result_id)",
			"t.yaml:6:5: destinations[0].retries: unknown field (known: name, type, timeout, owner, corrections, breaker, alerts, create, auth, idempotency, reference_field, lookup, result_id, check, errors, rate_limit_reset, limits, addr, from, username_env, password_env)",
			"t.yaml:7:1: lisen: unknown field (known: listen, base_url, sources, destinations, actions, retention, clients, notify, alerts, sessions, trusted_proxies, connections_per_address, sign_in)",
		}},
		{"RequiredFieldsAtTheirMapping", lines(
			"sources:",
			"  - name: a",
			"    provider: github",
			"destinations:",
			"  - {name: d}",
			"actions:",
			"  - name: x",
		), []string{
			"t.yaml:2:5: sources[0]: client is required",
			"t.yaml:2:5: sources[0]: environment is required",
			"t.yaml:2:5: sources[0]: secret_env is required",
			"t.yaml:5:6: destinations[0]: type is required",
			"t.yaml:7:5: actions[0]: source is required",
			"t.yaml:7:5: actions[0]: on is required",
			"t.yaml:7:5: actions[0]: key is required",
			"t.yaml:7:5: actions[0]: destination is required",
		}},
		{"EmptyFileNeedsASource", []byte("# nothing yet\n"), []string{
			"t.yaml:1:1: sources: at least one source is required",
		}},
		{"NamesAreUniqueAndURLSafe", lines(
			"sources:",
			"  - {name: s, client: c, provider: github, environment: t, secret_env: S}",
			"  - {name: s, client: c, provider: github, environment: t, secret_env: S}",
			"  - {name: 'a b', client: c, provider: github, environment: t, secret_env: S}",
		), []string{
			`t.yaml:3:6: sources[1].name: "s" is already the name of sources[0] (line 2)`,
			`t.yaml:4:6: sources[2].name: "a b" must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit`,
		}},
		{"DurationsAndSizes", lines(
			"sources:",
			"  - name: s",
			"    client: c",
			"    provider: github",
			"    environment: t",
			"    secret_env: S",
			"    tolerance: 5",
			"    remember: 30d",
			"    max_body: 1.5MiB",
			"  - {name: t, client: c, provider: github, environment: t, secret_env: S, tolerance: -1m, max_body: 99999999999GiB}",
		), []string{
			`t.yaml:7:5: sources[0].tolerance: "5" is not a duration like 90s, 5m or 72h (30 days is 720h)`,
			`t.yaml:8:5: sources[0].remember: "30d" is not a duration like 90s, 5m or 72h (30 days is 720h)`,
			`t.yaml:9:5: sources[0].max_body: "1.5MiB" is not a size like 512B, 256KiB or 10MB`,
			`t.yaml:10:75: sources[1].tolerance: "-1m" must be positive`,
			`t.yaml:10:91: sources[1].max_body: size "99999999999GiB" is too large`,
		}},
		{"ListenIsHostPort", lines(src, "listen: localhost", "base_url: ftp://x"), []string{
			`t.yaml:2:1: listen: "localhost" is not host:port`,
			`t.yaml:3:1: base_url: "ftp://x" is not an absolute http or https URL`,
		}},
		{"HTTPNeedsCreateURLAndLookupRef", lines(
			src,
			"destinations:",
			"  - name: crm",
			"    type: http",
			"    lookup: {url: 'http://crm/x?ref=1', consistency: maybe}",
			"    idempotency: {header: 'Bad Header'}",
			"    result_id: id",
			"    addr: 'h:25'",
		), []string{
			"t.yaml:3:5: destinations[0].create: url is required",
			`t.yaml:5:14: destinations[0].lookup.url: "http://crm/x?ref=1" has no {ref}, where the operation key goes (in the URL or the body)`,
			`t.yaml:5:41: destinations[0].lookup.consistency: "maybe" is not one of strong, eventual`,
			"t.yaml:6:5: destinations[0].idempotency: ttl is required: how long the destination remembers a key (its documentation says)",
			`t.yaml:6:19: destinations[0].idempotency.header: "Bad Header" is not an HTTP header name`,
			`t.yaml:7:5: destinations[0].result_id: "id" is not a JSON pointer: it must start with "/"`,
			"t.yaml:8:5: destinations[0].addr: is not used by http destinations",
		}},
		{"SMTPNeedsAddrAndFrom", lines(
			src,
			"destinations:",
			"  - name: mail",
			"    type: smtp",
			"    create: {url: 'http://x/y'}",
			"    username_env: U",
			"  - {name: mail2, type: smtp, addr: ':25', from: not-an-address}",
		), []string{
			"t.yaml:3:5: destinations[0]: addr is required",
			"t.yaml:3:5: destinations[0]: from is required",
			"t.yaml:3:5: destinations[0]: username_env and password_env go together",
			"t.yaml:5:5: destinations[0].create: is not used by smtp destinations",
			"t.yaml:6:5: destinations[0].username_env: environment variable U is not set or empty",
			`t.yaml:7:31: destinations[1].addr: ":25" is not host:port`,
			`t.yaml:7:44: destinations[1].from: "not-an-address" is not an email address`,
		}},
		{"PointersFollowRFC6901", lines(
			src, dst,
			"actions:",
			"  - name: a",
			"    source: s",
			"    on: [e]",
			"    key: [data/id, /a~2b]",
			"    destination: crm",
			"    resource: /x~",
			"    params: {p: /ok~0~1, q: 'plain text', r: 5}",
		), []string{
			`t.yaml:7:11: actions[0].key[0]: "data/id" is not a JSON pointer: it must start with "/"`,
			`t.yaml:7:20: actions[0].key[1]: JSON pointer "/a~2b" has a "~" that is not ~0 or ~1`,
			`t.yaml:9:5: actions[0].resource: JSON pointer "/x~" has a "~" that is not ~0 or ~1`,
			`t.yaml:10:26: actions[0].params.q: "plain text" is not a JSON pointer ("/a/b"); write {const: "plain text"} for a fixed value`,
			`t.yaml:10:43: actions[0].params.r: "5" is not a JSON pointer ("/a/b"); write {const: "5"} for a fixed value`,
		}},
		{"ReferencesResolve", lines(
			src, dst,
			"actions:",
			"  - {name: a, source: nope, on: [e], key: [/id], destination: crm}",
			"  - {name: b, source: s, on: [e], key: [/id], destination: mailer, after: ghost}",
		), []string{
			`t.yaml:4:15: actions[0].source: no source is named "nope" (sources: s)`,
			`t.yaml:5:47: actions[1].destination: no destination is named "mailer" (destinations: crm)`,
			`t.yaml:5:68: actions[1].after: no action is named "ghost" (actions: a, b)`,
		}},
		{"AfterStaysOnOneSourceWithoutCycles", lines(
			"sources:",
			"  - {name: s, client: c, provider: github, environment: t, secret_env: S}",
			"  - {name: t, client: c, provider: github, environment: t, secret_env: S}",
			dst,
			"actions:",
			"  - {name: a, source: s, on: [e], key: [/id], destination: crm, after: c}",
			"  - {name: b, source: s, on: [e], key: [/id], destination: crm, after: a}",
			"  - {name: c, source: s, on: [e], key: [/id], destination: crm, after: b}",
			"  - {name: d, source: t, on: [e], key: [/id], destination: crm, after: a}",
			"  - {name: e, source: s, on: [e], key: [/id], destination: crm, after: e}",
		), []string{
			"t.yaml:6:65: actions[0].after: after forms a cycle: a -> c -> b -> a",
			`t.yaml:9:65: actions[3].after: "a" acts on source "s", not "t": after links rules of one source`,
			"t.yaml:10:65: actions[4].after: after forms a cycle: e -> e",
		}},
		{"ResultOnlyFromTheAfterChain", lines(
			src, dst,
			"actions:",
			"  - {name: a, source: s, on: [e], key: [/id], destination: crm}",
			"  - {name: b, source: s, on: [e], key: [/id], destination: crm}",
			"  - name: c",
			"    source: s",
			"    on: [e]",
			"    key: [/id]",
			"    destination: crm",
			"    after: a",
			"    params:",
			"      fromA: {result: a}",
			"      fromB: {result: b, pointer: /x}",
			"      both: {const: 1, result: a}",
			"      neither: {pointer: /x}",
		), []string{
			`t.yaml:14:15: actions[2].params.fromB.result: "b" is not on this action's after chain (c -> a): only a result it waits for exists in time`,
			`t.yaml:15:14: actions[2].params.both.const: "1" is not a JSON pointer ("/a/b"); write {const: "1"} for a fixed value`,
			`t.yaml:15:24: actions[2].params.both.result: "a" is not a JSON pointer ("/a/b"); write {const: "a"} for a fixed value`,
		}},
		{"RuleFieldsCheckEachOther", lines(
			src,
			"destinations:",
			"  - {name: crm, type: http, create: {url: 'http://crm/x'}, reference_field: ref}",
			"  - {name: mail, type: smtp, addr: 'h:25', from: a@b.example}",
			"actions:",
			"  - name: a",
			"    source: s",
			"    on: [e, e]",
			"    key: /id",
			"    destination: crm",
			"    params: {ref: /id}",
			"    cancelled_by: [e]",
			"    occurred_at: /t",
			"    retry: {attempts: 0}",
			"    act_on_stale: 'yes'",
			"  - {name: b, source: s, on: [e], key: [/id], destination: mail, params: {subject: {const: Hi}}}",
		), []string{
			`t.yaml:8:13: actions[0].on[1]: "e" is listed twice`,
			`t.yaml:11:14: actions[0].params.ref: is where reference_field /ref of destination "crm" puts the operation key`,
			"t.yaml:12:5: actions[0].cancelled_by: needs resource: it applies per resource",
			`t.yaml:12:20: actions[0].cancelled_by[0]: "e" also starts this action (on)`,
			"t.yaml:13:5: actions[0].occurred_at: needs resource: it applies per resource",
			`t.yaml:14:13: actions[0].retry.attempts: "0" is not a whole number from 1 to 1000`,
			`t.yaml:15:5: actions[0].act_on_stale: must be true or false, not "yes"`,
			`t.yaml:16:66: actions[1].params: a mail needs a "to" param`,
		}},
		{"YAMLSyntax", lines(src, "destinations: [", "actions: 1"), []string{
			"t.yaml:2:15: invalid YAML: sequence end token ']' not found",
		}},
		{"YAMLFeaturesOutsideTheSchema", lines(
			"sources:",
			"  - name: s",
			"    <<: {client: c}",
			"    provider: *missing",
			"---",
			"listen: ':1'",
		), []string{
			"t.yaml:2:5: sources[0]: client is required",
			"t.yaml:2:5: sources[0]: provider is required",
			"t.yaml:2:5: sources[0]: environment is required",
			"t.yaml:2:5: sources[0]: secret_env is required",
			"t.yaml:3:5: sources[0]: merge keys (<<) are not supported; alias the whole value instead",
			"t.yaml:4:5: sources[0].provider: alias *missing has no anchor &missing before it",
			"t.yaml:6:1: the config is one YAML document; this is a second one",
		}},
		{"WrongShapes", lines(
			"sources: {name: s}",
			"destinations: [plain]",
			"actions: [{name: [a]}]",
		), []string{
			"t.yaml:1:1: sources: must be a list, not a mapping",
			"t.yaml:1:1: sources: at least one source is required",
			`t.yaml:2:16: destinations[0]: must be a mapping, not "plain"`,
			"t.yaml:2:16: destinations[0]: name is required",
			"t.yaml:2:16: destinations[0]: type is required",
			"t.yaml:3:12: actions[0].name: must be a string, not a list",
			"t.yaml:3:12: actions[0]: source is required",
			"t.yaml:3:12: actions[0]: on is required",
			"t.yaml:3:12: actions[0]: key is required",
			"t.yaml:3:12: actions[0]: destination is required",
		}},
		{"ConstExpansionIsBounded", lines(
			src, dst,
			"actions:",
			"  - name: a",
			"    source: s",
			"    on: [e]",
			"    key: [/id]",
			"    destination: crm",
			"    params:",
			"      l0: {const: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]}",
			"      l1: {const: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]}",
			"      l2: {const: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]}",
			"      l3: {const: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]}",
			"      l4: {const: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]}",
		), []string{
			"t.yaml:13:12: actions[0].params.l3.const: is nested too deeply or expands too far",
		}},
		{"SelfAliasIsBounded", lines(
			src, dst,
			"actions: [{name: a, source: s, on: [e], key: [/id], destination: crm, params: {x: {const: &x [*x]}}}]",
		), []string{
			"t.yaml:3:84: actions[0].params.x.const: is nested too deeply or expands too far",
		}},
		{"TopLevelIsAMapping", lines("- a", "- b"), []string{
			"t.yaml:1:1: the config must be a mapping of listen, sources, destinations and actions, not a list",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("t.yaml", tt.yaml, envFrom(map[string]string{"S": "whsec_x"}))
			checkErrorLines(t, err, tt.want)
		})
	}
}

func TestParseConfigBackfill(t *testing.T) {
	t.Parallel()
	env := envFrom(map[string]string{"S": "whsec_a", "G": "gh", "KEY": "rk_test_read_events", "TOKEN": "ghp_x", "BAD": "pk_live_x",
		"APP_KEY": "-----BEGIN RSA PRIVATE KEY-----\nMIIB\n-----END RSA PRIVATE KEY-----"})
	c, err := Parse("t.yaml", lines(
		"sources:",
		"  - name: s",
		"    client: c",
		"    provider: stripe",
		"    environment: test",
		"    secret_env: S",
		"    backfill: {api_key_env: KEY, api_url: 'http://127.0.0.1:12111/'}",
		"  - name: g",
		"    client: c",
		"    provider: github",
		"    environment: test",
		"    secret_env: G",
		"    backfill: {token_env: TOKEN, hook: orgs/acme/hooks/42, every: 5m, window: 24h}",
	), env)
	if err != nil {
		t.Fatal(err)
	}
	want := []settings.Backfill{
		{Every: 15 * time.Minute, Window: 72 * time.Hour, APIURL: "http://127.0.0.1:12111", APIKeyEnv: "KEY", APIKey: "rk_test_read_events"},
		{Every: 5 * time.Minute, Window: 24 * time.Hour, APIURL: "https://api.github.com", TokenEnv: "TOKEN", Token: "ghp_x", Hook: "orgs/acme/hooks/42"},
	}
	if diff := cmp.Diff(want, []settings.Backfill{c.Sources[0].Backfill, c.Sources[1].Backfill}); diff != "" {
		t.Errorf("backfill (-want +got):\n%s", diff)
	}
	if s := fmt.Sprintf("%+v", c.Sources[0]); strings.Contains(s, "rk_test") {
		t.Errorf("a source prints its API key: %s", s)
	}

	_, err = Parse("t.yaml", lines(
		"sources:",
		"  - {name: a, client: c, provider: stripe, environment: t, secret_env: S, backfill: {api_key_env: BAD, window: 800h}}",
		"  - {name: b, client: c, provider: github, environment: t, secret_env: G, backfill: {token_env: TOKEN, hook: repos/acme/hooks/1}}",
		"  - {name: d, client: c, provider: shopify, environment: t, secret_env: G, backfill: {token_env: TOKEN}}",
		"  - {name: e, client: c, provider: stripe, environment: t, secret_env: S, backfill: {api_key_env: KEY, every: 2h, window: 1h}}",
		"  - {name: f, client: c, provider: github, environment: t, secret_env: G, backfill: {token_env: APP_KEY, hook: app}}",
	), env)
	checkErrorLines(t, err, []string{
		`t.yaml:2:86: sources[0].backfill.api_key_env: the key in BAD does not start with "sk_" or "rk_" as Stripe API keys do`,
		"t.yaml:2:104: sources[0].backfill.window: Stripe keeps events for 30 days: at most 720h",
		`t.yaml:3:104: sources[1].backfill.hook: "repos/acme/hooks/1" is not repos/OWNER/REPO/hooks/ID, orgs/ORG/hooks/ID or app`,
		"t.yaml:4:76: sources[2].backfill: shopify offers no API that lists missed webhooks; only stripe and github sources can backfill",
		"t.yaml:5:115: sources[3].backfill.window: must be at least every (2h0m0s), or events between passes are never looked at",
		"t.yaml:6:86: sources[4].backfill.token_env: APP_KEY holds a GitHub App's private key: set the source's account to the App's id or client id, the issuer of its tokens",
	})
}

func TestListenOnPort(t *testing.T) {
	t.Parallel()
	const src = "sources: [{name: s, client: c, provider: stripe, environment: test, secret_env: S}]\n"
	tests := []struct {
		name, yaml, port string
		want             []string // listen, base_url
	}{
		{"PortListensOnEveryInterface", "listen: 127.0.0.1:8080\n" + src, "9123", []string{":9123", "http://localhost:9123"}},
		{"BaseURLGivenStays", "base_url: https://hooks.example.com\n" + src, "9123", []string{":9123", "https://hooks.example.com"}},
		{"NoPortChangesNothing", "listen: 127.0.0.1:8081\n" + src, "", []string{"127.0.0.1:8081", "http://127.0.0.1:8081"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse("t.yaml", []byte(tt.yaml), envFrom(map[string]string{"S": "whsec_a"}))
			if err != nil {
				t.Fatal(err)
			}
			if err := ListenOnPort(c, tt.port); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, []string{c.Listen, c.BaseURL}); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("NotAPortIsAnError", func(t *testing.T) {
		t.Parallel()
		c := &settings.Config{Listen: "127.0.0.1:8080"}
		err := ListenOnPort(c, "http")
		if ledger.ErrorCode(err) != ledger.EINVALID || !strings.Contains(err.Error(), `PORT="http" is not a port number`) {
			t.Fatalf("err = %v, want the bad PORT named", err)
		}
		if c.Listen != "127.0.0.1:8080" {
			t.Errorf("listen = %q after a bad PORT, want it unchanged", c.Listen)
		}
	})
}

// defaultBreaker is the breaker of a destination that sets none: Convoy's
// numbers (docs/destinations.md).
var defaultBreaker = settings.BreakerSettings{FailureRate: 0.7, MinCalls: 10, Window: 5 * time.Minute,
	OpenFor: 30 * time.Second, MaxOpenFor: 10 * time.Minute}

// TestParseConfigBreaker: a destination's breaker is off, the defaults, or the
// settings it names with the defaults for the rest; bad values name their place.
func TestParseConfigBreaker(t *testing.T) {
	t.Parallel()
	parse := func(breaker string) (*settings.Config, error) {
		return Parse("b.yaml", lines(
			"sources: [{name: s, client: c, provider: stripe, environment: test, secret_env: S}]",
			"destinations:",
			"  - {name: crm, type: http, create: {url: 'http://crm/x'}"+breaker+"}",
		), envFrom(map[string]string{"S": "whsec_x"}))
	}
	for _, c := range []struct {
		yaml string
		want settings.BreakerSettings
	}{
		{"", defaultBreaker},
		{", breaker: off", settings.BreakerSettings{Off: true, FailureRate: 0.7, MinCalls: 10, Window: 5 * time.Minute,
			OpenFor: 30 * time.Second, MaxOpenFor: 10 * time.Minute}},
		{", breaker: {failure_rate: 0.5, min_calls: 20}", settings.BreakerSettings{FailureRate: 0.5, MinCalls: 20,
			Window: 5 * time.Minute, OpenFor: 30 * time.Second, MaxOpenFor: 10 * time.Minute}},
		{", breaker: {window: 1m, open_for: 20m, max_open_for: 1h}", settings.BreakerSettings{FailureRate: 0.7, MinCalls: 10,
			Window: time.Minute, OpenFor: 20 * time.Minute, MaxOpenFor: time.Hour}},
	} {
		cfg, err := parse(c.yaml)
		if err != nil {
			t.Fatalf("%q: %v", c.yaml, err)
		}
		if diff := cmp.Diff(c.want, cfg.Destinations[0].Breaker); diff != "" {
			t.Errorf("%q (-want +got):\n%s", c.yaml, diff)
		}
		// oncehook check says it under the destination.
		var b strings.Builder
		Describe(&b, cfg)
		if !strings.Contains(b.String(), "\n  "+strings.Repeat(" ", 20)+" "+c.want.String()+"\n") {
			t.Errorf("%q: check does not say %q:\n%s", c.yaml, c.want.String(), b.String())
		}
	}
	if got := defaultBreaker.String(); got != "breaker opens at 70% unwell of at least 10 calls in 5m; probes after 30s, doubling up to 10m" {
		t.Errorf("the default breaker reads %q", got)
	}
	if got := (settings.BreakerSettings{Off: true}).String(); got != "breaker off" {
		t.Errorf("an off breaker reads %q", got)
	}
	for _, c := range []struct{ yaml, want string }{
		{", breaker: on", `b.yaml:3:60: destinations[0].breaker: "on": write off, or {failure_rate: 0.7, min_calls: 10, window: 5m, open_for: 30s, max_open_for: 10m}`},
		{", breaker: {failure_rate: 70}", `destinations[0].breaker.failure_rate: "70" is not a fraction above 0 and at most 1 (0.7 is 70%)`},
		{", breaker: {min_calls: 0}", `destinations[0].breaker.min_calls: "0" is not a whole number from 1 to 1000000`},
		{", breaker: {open_for: 5m, max_open_for: 1m}", `destinations[0].breaker.max_open_for: is shorter than open_for (5m0s): the wait only grows`},
		{", breaker: {half_open: 1}", `destinations[0].breaker.half_open: unknown field`},
	} {
		_, err := parse(c.yaml)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want it to say %s", c.yaml, err, c.want)
		}
	}
}

// TestParseConfigCutover: a cutover window on a source applies to its actions,
// an action's own replaces it, oncehook check says what it does to each action,
// and bad windows name their place.
func TestParseConfigCutover(t *testing.T) {
	t.Parallel()
	parse := func(source, action string) (*settings.Config, error) {
		return Parse("c.yaml", lines(
			"sources: [{name: s, client: c, provider: stripe, environment: test, secret_env: S"+source+"}]",
			"destinations:",
			"  - {name: crm, type: http, create: {url: 'http://crm/x'}, lookup: {url: 'http://crm/x?ref={ref}', consistency: strong}}",
			"  - {name: mail, type: smtp, addr: 'mail:25', from: a@example.com}",
			"actions:",
			"  - {name: open, source: s, on: [a], key: [/id], destination: crm"+action+"}",
			"  - {name: tell, source: s, on: [a], key: [/id], destination: mail, params: {to: /email, subject: {const: Hi}, text: {const: Hi}}}",
		), envFrom(map[string]string{"S": "whsec_x"}))
	}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	cfg, err := parse(", cutover: {from: 2026-12-01T00:00:00Z, until: 2026-12-04T00:00:00Z}",
		", cutover: {from: 2026-12-01T00:00:00Z, until: 2026-12-08T00:00:00Z}")
	if err != nil {
		t.Fatal(err)
	}
	if c := cfg.CutoverOf(cfg.Actions[0]); c == nil || !c.From.Equal(t0) || !c.Until.Equal(t0.Add(7*24*time.Hour)) {
		t.Errorf("the action's own window: %+v", c)
	}
	if c := cfg.CutoverOf(cfg.Actions[1]); c == nil || !c.Until.Equal(t0.Add(3*24*time.Hour)) {
		t.Errorf("the source's window: %+v", c)
	}
	var b strings.Builder
	Describe(&b, cfg)
	for _, want := range []string{
		"cutover until 2026-12-08T00:00:00Z: the operations of events from before 2026-12-01T00:00:00Z (or without a provider time) are looked up at crm before any create",
		"cutover until 2026-12-04T00:00:00Z: the operations of events from before 2026-12-01T00:00:00Z (or without a provider time) are sent to a person first (mail has no lookup)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("check does not say %q:\n%s", want, b.String())
		}
	}
	early := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		occurred *time.Time
		received time.Time
		want     bool
	}{
		{&early, t0.Add(time.Hour), true},           // a retry of last night's event
		{&t0, t0.Add(time.Hour), false},             // from the window's start on: oncehook's own
		{nil, t0.Add(time.Hour), true},              // GitHub: no provider time
		{&early, t0.Add(8 * 24 * time.Hour), false}, // after the window
		{nil, t0.Add(7 * 24 * time.Hour), false},    // at its end
	} {
		if got := cfg.CutoverOf(cfg.Actions[0]).Covers(c.occurred, c.received); got != c.want {
			t.Errorf("Covers(%v, %v) = %v, want %v", c.occurred, c.received, got, c.want)
		}
	}
	for _, c := range []struct{ yaml, want string }{
		{", cutover: {from: 2026-12-04T00:00:00Z, until: 2026-12-01T00:00:00Z}", `sources[0].cutover.until: is not after from (2026-12-04T00:00:00Z)`},
		{", cutover: {from: yesterday, until: 2026-12-01T00:00:00Z}", `sources[0].cutover.from: "yesterday" is not a time like 2026-12-01T00:00:00Z`},
		{", cutover: {until: 2026-12-01T00:00:00Z}", `sources[0].cutover: from is required`},
		{", cutover: {from: 2026-12-01T00:00:00Z, until: 2026-12-04T00:00:00Z, by: x}", `sources[0].cutover.by: unknown field`},
	} {
		_, err := parse(c.yaml, "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want it to say %s", c.yaml, err, c.want)
		}
	}
}

// TestParseConfigAlerts: alert channels of each kind, named by destinations
// (the owner's mail without), secrets from the environment, oncehook check
// saying where each outage goes, and bad channels named by their place.
func TestParseConfigAlerts(t *testing.T) {
	t.Parallel()
	env := envFrom(map[string]string{"S": "whsec_x", "SLACK_URL": "https://hooks.slack.example/services/T/B/X",
		"PD_KEY": "R0UTINGKEY", "HOOK_URL": "https://ops.example/alerts", "HOOK_SECRET": "whsec_c2VjcmV0"})
	parse := func(alerts, crm string) (*settings.Config, error) {
		return Parse("a.yaml", lines(
			"sources: [{name: s, client: c, provider: stripe, environment: test, secret_env: S}]",
			"destinations:",
			"  - {name: crm, type: http, create: {url: 'http://crm/x'}"+crm+"}",
			"  - {name: erp, type: http, create: {url: 'http://erp/x'}, owner: erp@example.com}",
			"notify: {smtp: {addr: '127.0.0.1:2525', from: oncehook@example.com}}",
			alerts,
		), env)
	}
	const channels = "alerts: {quiet: 5m, channels: [{name: ops, kind: slack, url_env: SLACK_URL}, " +
		"{name: pager, kind: pagerduty, routing_key_env: PD_KEY, severity: critical}, " +
		"{name: hook, kind: webhook, url_env: HOOK_URL, secret_env: HOOK_SECRET}, {name: desk, kind: mail, to: [desk@example.com]}]}"
	cfg, err := parse(channels, ", owner: crm@example.com, alerts: [ops, pager, hook, desk]")
	if err != nil {
		t.Fatal(err)
	}
	want := settings.Alerts{Quiet: 5 * time.Minute, Channels: []settings.AlertChannel{
		{Name: "ops", Kind: settings.AlertSlack, URLEnv: "SLACK_URL", URL: "https://hooks.slack.example/services/T/B/X"},
		{Name: "pager", Kind: settings.AlertPagerDuty, RoutingKeyEnv: "PD_KEY", RoutingKey: "R0UTINGKEY", Severity: "critical"},
		{Name: "hook", Kind: settings.AlertWebhook, URLEnv: "HOOK_URL", URL: "https://ops.example/alerts",
			SecretEnv: "HOOK_SECRET", Secret: "whsec_c2VjcmV0"},
		{Name: "desk", Kind: settings.AlertMail, To: []string{"desk@example.com"}},
	}}
	if diff := cmp.Diff(want, cfg.Alerts); diff != "" {
		t.Errorf("alerts (-want +got):\n%s", diff)
	}
	if got := cfg.AlertChannelsOf("crm"); !slices.Equal(got, []string{"ops", "pager", "hook", "desk"}) {
		t.Errorf("crm's outages go to %v", got)
	}
	if got := cfg.AlertChannelsOf("erp"); !slices.Equal(got, []string{settings.AlertOwnerMail}) {
		t.Errorf("erp names no channel; its outages go to %v, want its owner's mail", got)
	}
	var b strings.Builder
	Describe(&b, cfg)
	for _, line := range []string{
		"outages alert ops (Slack webhook from SLACK_URL), pager (PagerDuty, severity critical, routing key from PD_KEY), " +
			"hook (signed webhook to the URL in HOOK_URL), desk (mail to desk@example.com); opening again within 5m0s continues one",
		"outages alert owner-mail (mail to the owner, erp@example.com); opening again within 5m0s continues one",
	} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("check does not say %q:\n%s", line, b.String())
		}
	}
	for _, secret := range []string{"hooks.slack.example", "R0UTINGKEY", "ops.example", "c2VjcmV0"} {
		if strings.Contains(b.String(), secret) {
			t.Errorf("check prints the secret %q", secret)
		}
	}
	// Defaults: no alerts section, a quiet time of 10 minutes.
	if cfg, err := parse("", ", owner: crm@example.com"); err != nil || cfg.Alerts.Quiet != settings.DefaultAlertQuiet {
		t.Errorf("without alerts: %v, quiet %v", err, cfg.Alerts.Quiet)
	}
	for _, c := range []struct{ alerts, crm, want string }{
		{channels, ", alerts: [ops, pages]", `a.yaml:3:`},
		{channels, ", alerts: [ops, pages]", `destinations[0].alerts[1]: no alert channel is named "pages" (alerts.channels: desk, hook, ops, pager)`},
		{channels, ", alerts: [owner-mail]", `destinations[0].alerts[0]: "owner-mail" mails the destination's owner, and "crm" has none`},
		{"alerts: {channels: [{name: m, kind: mail}]}", ", alerts: [m]", `channel "m" mails the destination's owner, and "crm" has none`},
		{"alerts: {channels: [{name: ops, kind: slack, url_env: NOPE}]}", "", `alerts.channels[0].url_env: environment variable NOPE is not set or empty`},
		{"alerts: {channels: [{name: ops, kind: slack, url_env: PD_KEY}]}", "", `environment variable PD_KEY does not hold an absolute http or https URL`},
		{"alerts: {channels: [{name: ops, kind: slack, url_env: 'https://hooks.slack.example/x'}]}", "", `alerts.channels[0].url_env: must name an environment variable`},
		{"alerts: {channels: [{name: ops, kind: teams}]}", "", `alerts.channels[0].kind: "teams" is not one of slack, pagerduty, webhook, mail`},
		{"alerts: {channels: [{name: p, kind: pagerduty, routing_key_env: PD_KEY, severity: high}]}", "", `alerts.channels[0].severity: "high" is not one of critical, error, warning, info`},
		{"alerts: {channels: [{name: p, kind: pagerduty, routing_key_env: PD_KEY, url_env: SLACK_URL}]}", "", `alerts.channels[0].url_env: is not used by pagerduty channels`},
		{"alerts: {channels: [{name: owner-mail, kind: mail}]}", "", `alerts.channels[0].name: "owner-mail" is the owner's mail`},
		{"alerts: {channels: [{name: d, kind: mail, to: [not-an-address]}]}", "", `alerts.channels[0].to[0]: "not-an-address" is not an email address`},
		{"alerts: {quiet: soon}", "", `alerts.quiet:`},
	} {
		_, err := parse(c.alerts, c.crm)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q %q: %v, want it to say %s", c.alerts, c.crm, err, c.want)
		}
	}
	// Without notify.smtp no mail goes: a mail channel is refused, and an owner
	// is no channel.
	noSMTP := func(crm string) (*settings.Config, error) {
		return Parse("n.yaml", lines(
			"sources: [{name: s, client: c, provider: stripe, environment: test, secret_env: S}]",
			"destinations: [{name: crm, type: http, create: {url: 'http://crm/x'}, owner: crm@example.com"+crm+"}]",
			"alerts: {channels: [{name: m, kind: mail, to: [a@example.com]}]}",
		), env)
	}
	if _, err := noSMTP(", alerts: [m]"); err == nil || !strings.Contains(err.Error(),
		`n.yaml:2:`) || !strings.Contains(err.Error(), `destinations[0].alerts[0]: channel "m" sends mail, and notify.smtp is not set`) {
		t.Errorf("a mail channel without notify.smtp: %v", err)
	}
	cfg, err = noSMTP("")
	if err != nil || len(cfg.AlertChannelsOf("crm")) != 0 {
		t.Fatalf("an owner without notify.smtp: %v, channels %v, want none", err, cfg.AlertChannelsOf("crm"))
	}
	b.Reset()
	Describe(&b, cfg)
	if !strings.Contains(b.String(), "outages alert no one (no alerts; mailing the owner needs notify.smtp)") {
		t.Errorf("check does not say why an owner without notify.smtp hears nothing:\n%s", b.String())
	}
}

// TestParseConfigClients: a client's own retention windows, and the mistakes a
// clients section can hold, each at its line.
func TestParseConfigClients(t *testing.T) {
	t.Parallel()
	env := envFrom(map[string]string{"S": "whsec_x"})
	src := "sources: [{name: s, client: acme, provider: stripe, environment: test, secret_env: S}, " +
		"{name: g, client: globex, provider: stripe, environment: test, secret_env: S}]"
	cfg, err := Parse("c.yaml", lines(src, "retention: {actions: 2400h, drop_bodies_after: 240h}",
		"clients:", "  globex: {retention: {actions: 72h, drop_bodies_after: 48h}}"), env)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]settings.ClientSettings{"globex": {Retention: settings.ClientRetention{
		Actions: 72 * time.Hour, DropBodiesAfter: 48 * time.Hour}}}
	if diff := cmp.Diff(want, cfg.PerClient); diff != "" {
		t.Errorf("clients (-want +got):\n%s", diff)
	}
	if got := cfg.ActionsWindow("globex"); got != 72*time.Hour {
		t.Errorf("globex keeps closed actions %s, want its own 72h", got)
	}
	if got := cfg.ActionsWindow("acme"); got != 2400*time.Hour {
		t.Errorf("acme keeps closed actions %s, want the shared 2400h", got)
	}
	_, err = Parse("c.yaml", lines(src, "clients:", "  initech: {retention: {actions: 72h}}",
		"  globex: {retention: {bodies: 1h, actions: -1h}}", "  acme: {}"), env)
	for _, w := range []string{
		`c.yaml:3:3: clients.initech: no source has the client "initech" (clients: acme, globex)`,
		`c.yaml:4:24: clients.globex.retention.bodies: unknown field (known: actions, drop_bodies_after)`,
		`c.yaml:4:36: clients.globex.retention.actions: "-1h" must be positive`,
		`c.yaml:5:3: clients.acme: says nothing: give it retention: {actions: ..., drop_bodies_after: ...}`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("want %q in:\n%v", w, err)
		}
	}
}
