package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/oncehook/oncehook/internal/money"
	"github.com/oncehook/oncehook/internal/settings"
)

// Every recipe loads, and oncehook check says in one line what protects it.
func TestRecipesDescribeTheirProtection(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"hubspot.yaml":          "upsert by unique property; strong lookup",
		"hubspot-search.yaml":   "eventual lookup settling after 10m: not found before then is looked up again, after it goes to the owner (the index may lag)",
		"salesforce.yaml":       "upsert by external id; strong lookup",
		"salesforce-oauth.yaml": "upsert by external id; strong lookup",
		"hubspot-oauth.yaml":    "upsert by unique property; strong lookup",
		"pipedrive.yaml":        "eventual lookup settling after 10m: not found before then is looked up again, after it goes to the owner (the index may lag)",
		"postmark.yaml":         "eventual lookup settling after 15m: not found before then is looked up again, after it goes to the owner (the index may lag)",
		"resend.yaml":           "key memory 24h; after it, uncertain calls go to a person",
		"sendgrid.yaml":         "nothing: uncertain calls go to a person (outcome unknown)",
		"mailgun.yaml":          "nothing: uncertain calls go to a person (outcome unknown)",
	}
	files, err := filepath.Glob("../../examples/destinations/*.yaml")
	if err != nil || len(files) != len(want) {
		t.Fatalf("recipes %v (%v), want %d", files, err, len(want))
	}
	got := map[string]string{}
	for _, f := range files {
		cfg, err := Load(f, func(k string) string {
			if k == settings.SecretKeyEnv || k == settings.SecretKeyPreviousEnv {
				return "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // 32 bytes
			}
			return "whsec_" + strings.ToLower(k)
		})
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		got[filepath.Base(f)] = Protection(cfg.Destinations[0])
		var b strings.Builder
		Describe(&b, cfg)
		if !strings.Contains(b.String(), Protection(cfg.Destinations[0])) {
			t.Errorf("%s: check output lacks the protection line:\n%s", f, b.String())
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("protection lines (-want +got):\n%s", diff)
	}
}

// A plain settle reports the absence past it to the owner; only settle: {after,
// then: retry} repeats the create by itself, and check prints that as a risk.
func TestSettleOptInIsARisk(t *testing.T) {
	t.Parallel()
	const src = "sources: [{name: s, client: c, provider: stripe, environment: test, secret_env: S}]"
	withSettle := func(settle string) []byte {
		return lines(src, "destinations:",
			"  - name: crm",
			"    type: http",
			"    create: {url: 'http://crm/x'}",
			"    lookup: {url: 'http://crm/s?q={ref}', consistency: eventual, settle: "+settle+"}")
	}
	env := envFrom(map[string]string{"S": "whsec_x"})
	tests := []struct {
		name, settle string
		want         time.Duration
		retry        bool
		risk         string
	}{
		{"PlainSettleGoesToTheOwner", "10m", 10 * time.Minute, false, ""},
		{"ThenPersonIsThePlainForm", "{after: 10m, then: person}", 10 * time.Minute, false, ""},
		{"ThenRetryOptsIn", "{after: 15m, then: retry}", 15 * time.Minute, true,
			"crm: settle {after: 15m, then: retry} creates again a record its eventual lookup has not shown 15m after the call"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse("t.yaml", withSettle(tt.settle), env)
			if err != nil {
				t.Fatal(err)
			}
			lk := cfg.Destinations[0].Lookup
			if lk.Settle != tt.want || lk.SettleRetry != tt.retry {
				t.Errorf("settle %s: %s retry %v, want %s retry %v", tt.settle, lk.Settle, lk.SettleRetry, tt.want, tt.retry)
			}
			var b strings.Builder
			Describe(&b, cfg)
			if tt.risk == "" && strings.Contains(b.String(), "Risks") || tt.risk != "" && !strings.Contains(b.String(), tt.risk) {
				t.Errorf("check output, want risk %q:\n%s", tt.risk, b.String())
			}
		})
	}
	_, err := Parse("t.yaml", withSettle("{then: again}"), env)
	checkErrorLines(t, err, []string{
		`t.yaml:6:66: destinations[0].lookup.settle: after is required: how long after the call an absence is reported`,
		`t.yaml:6:75: destinations[0].lookup.settle.then: "again" is not one of person, retry`,
	})
}

// A money param needs a pointer to the amount and a currency: a pointer or a code
// ISO 4217 lists.
func TestMoneyParamLoads(t *testing.T) {
	t.Parallel()
	const head = "sources: [{name: s, client: c, provider: stripe, environment: test, secret_env: S}]\n" +
		"destinations: [{name: crm, type: http, create: {url: 'http://crm/x'}}]\n"
	env := envFrom(map[string]string{"S": "whsec_x"})
	cfg, err := Parse("t.yaml", []byte(head+
		"actions: [{name: a, source: s, on: [e], key: [/id], destination: crm, params: {v: {money: /amt, currency: JPY, as: number}}}]\n"), env)
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.Actions[0].Params[0].Money; m == nil || *m != (money.Money{Amount: "/amt", Currency: "JPY", AsNumber: true}) {
		t.Errorf("money param %+v", m)
	}
	_, err = Parse("t.yaml", []byte(head+
		"actions: [{name: a, source: s, on: [e], key: [/id], destination: crm, params: {v: {money: amt, currency: XYZ, as: float}}}]\n"), env)
	checkErrorLines(t, err, []string{
		`t.yaml:3:84: actions[0].params.v.money: "amt" is not a JSON pointer: it must start with "/"`,
		`t.yaml:3:96: actions[0].params.v.currency: "XYZ" is neither a JSON pointer nor an ISO 4217 currency code`,
		`t.yaml:3:111: actions[0].params.v.as: "float" is not one of string, number`,
	})
}

// HubSpot refuses to authorize a public app that does not ask for the oauth scope:
// check says so for a HubSpot OAuth destination without it.
func TestHubSpotOAuthWithoutTheOauthScopeIsARisk(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../examples/destinations/hubspot-oauth.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		if k == settings.SecretKeyEnv || k == settings.SecretKeyPreviousEnv {
			return "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
		}
		return "whsec_" + strings.ToLower(k)
	}
	const risk = "hubspot: HubSpot's authorize page refuses a public app that does not ask for the oauth scope"
	for _, tt := range []struct {
		name, yaml string
		risky      bool
	}{
		{"TheRecipeAsksForIt", string(raw), false},
		{"WithoutItCheckWarns", strings.Replace(string(raw), "scopes: [oauth, ", "scopes: [", 1), true},
	} {
		cfg, err := Parse("hubspot-oauth.yaml", []byte(tt.yaml), env)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var b strings.Builder
		Describe(&b, cfg)
		if strings.Contains(b.String(), risk) != tt.risky {
			t.Errorf("%s: check output, want the oauth scope risk %v:\n%s", tt.name, tt.risky, b.String())
		}
	}
}

// Postmark's message search looks in one message stream (outbound unless
// messagestream names another): the loader refuses a recipe whose create sends on
// a stream its lookup does not search.
func TestPostmarkLookupSearchesTheCreatesStream(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../examples/destinations/postmark.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := func(k string) string { return "whsec_" + strings.ToLower(k) }
	if _, err := Parse("postmark.yaml", raw, env); err != nil {
		t.Fatalf("the recipe: %v", err)
	}
	for _, tt := range []struct{ name, from, to, want string }{
		{"AnotherStream", "MessageStream: {const: outbound}", "MessageStream: {const: welcome}",
			`sends on message stream "welcome" but the lookup of destination "postmark" searches "outbound": add messagestream=welcome to its url`},
		{"NoStreamInTheLookupIsOutbound", "&messagestream=outbound", "", ""},
		{"AStreamFromTheEvent", "MessageStream: {const: outbound}", "MessageStream: /data/object/metadata/stream",
			`searches one message stream (outbound): the create's MessageStream must be a {const: ...}`},
	} {
		yaml := strings.Replace(string(raw), tt.from, tt.to, 1)
		_, err := Parse("postmark.yaml", []byte(yaml), env)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
}

// lookup.fetch reads listed candidates one by one: it needs their list, an id in
// each, and {id} in its URL.
func TestLookupFetchLoads(t *testing.T) {
	t.Parallel()
	const head = "sources: [{name: s, client: c, provider: stripe, environment: test, secret_env: S}]\n" +
		"destinations:\n  - name: crm\n    type: http\n    create: {url: 'http://crm/x'}\n"
	env := envFrom(map[string]string{"S": "whsec_x"})
	cfg, err := Parse("t.yaml", []byte(head+
		"    lookup: {url: 'http://crm/s?q={ref}', records: /items, fetch: {url: 'http://crm/d/{id}', id: /item/id, record: /data}}\n"), env)
	if err != nil {
		t.Fatal(err)
	}
	if f := cfg.Destinations[0].Lookup.Fetch; f != (settings.LookupFetch{URL: "http://crm/d/{id}", ID: "/item/id", Record: "/data"}) {
		t.Errorf("fetch %+v", f)
	}
	_, err = Parse("t.yaml", []byte(head+"    lookup: {url: 'http://crm/s?q={ref}', fetch: {url: 'http://crm/d'}}\n"), env)
	checkErrorLines(t, err, []string{
		`t.yaml:6:43: destinations[0].lookup.fetch: id is required: the pointer in a listed record to its id`,
		`t.yaml:6:43: destinations[0].lookup.fetch: needs records: the list of candidates it reads one by one`,
		`t.yaml:6:51: destinations[0].lookup.fetch.url: "http://crm/d" has no {id}, where the listed record's id goes`,
	})
}
