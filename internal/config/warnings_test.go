package config_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/settings"
)

// unsignedConfig has a Shopify, a GitHub and a Stripe source, each with a rule
// cancelled by an event type; %s is the Shopify rule's cancelled_by.
const unsignedConfig = `
sources:
  - {name: shop, client: c, provider: shopify, environment: live, secret_env: S}
  - {name: gh, client: c, provider: github, environment: live, secret_env: S}
  - {name: pay, client: c, provider: stripe, environment: live, secret_env: S}
destinations: [{name: crm, type: http, create: {url: 'http://crm/x'}}]
actions:
  - {name: order, source: shop, on: [orders/create], key: [/id], destination: crm, resource: /id, cancelled_by: %s}
  - {name: issue, source: gh, on: [issues.opened], key: [/issue/id], destination: crm, resource: /issue/id, cancelled_by: [issues.deleted]}
  - {name: checkout, source: pay, on: [checkout.session.completed], key: [/id], destination: crm, resource: /id,
     cancelled_by: [checkout.session.expired]}
`

// TestWarningsForUnsignedCancellations: a cancellation on an event type the
// provider does not sign (Shopify's topic, GitHub's event header) is warned
// about unless a when bears it out; Stripe's type is in the signed body.
func TestWarningsForUnsignedCancellations(t *testing.T) {
	t.Parallel()
	env := func(string) string { return "whsec_dGVzdA==" }
	for _, c := range []struct {
		cancelledBy string
		want        []string // the rules warned about
	}{
		{"[orders/cancelled]", []string{"order", "issue"}},
		{"[{type: orders/cancelled, when: [{pointer: /cancelled_at}]}]", []string{"issue"}},
	} {
		cfg, err := config.Parse("t.yaml", []byte(strings.Replace(unsignedConfig, "%s", c.cancelledBy, 1)), env)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, w := range config.Warnings(cfg) {
			got = append(got, strings.TrimSuffix(strings.Fields(w)[1], "):")[1:])
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("cancelled_by %s: warned rules (-want +got):\n%s\n%q", c.cancelledBy, diff, config.Warnings(cfg))
		}
		if c.want[0] == "order" && !strings.Contains(config.Warnings(cfg)[0], "X-Shopify-Topic") {
			t.Errorf("the warning does not name the unsigned header: %s", config.Warnings(cfg)[0])
		}
	}
}

// TestWhenConditionsParsed: when on a rule and on a cancelling type, read into
// conditions; a condition without a pointer, or with a list to equal, is refused.
func TestWhenConditionsParsed(t *testing.T) {
	t.Parallel()
	env := func(string) string { return "whsec_dGVzdA==" }
	good := strings.Replace(unsignedConfig, "%s", "[{type: orders/cancelled, when: [{pointer: /cancelled_at}, {pointer: /financial_status, equals: voided}]}]", 1)
	good = strings.Replace(good, "key: [/id], destination: crm, resource: /id, cancelled_by:", "key: [/id], destination: crm, resource: /id, when: [{pointer: /test, equals: false}], cancelled_by:", 1)
	cfg, err := config.Parse("t.yaml", []byte(good), env)
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Actions[0]
	want := settings.ActionRule{When: []settings.Condition{{Pointer: "/test", Equals: "false", HasEquals: true}},
		CancelledBy: []string{"orders/cancelled"}, CancelWhen: map[string][]settings.Condition{"orders/cancelled": {
			{Pointer: "/cancelled_at"}, {Pointer: "/financial_status", Equals: "voided", HasEquals: true}}}}
	got := settings.ActionRule{When: a.When, CancelledBy: a.CancelledBy, CancelWhen: a.CancelWhen}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	bad := strings.Replace(unsignedConfig, "%s", "[{type: orders/cancelled, when: [{equals: x}, {pointer: /a, equals: [1]}]}]", 1)
	_, err = config.Parse("t.yaml", []byte(bad), env)
	for _, msg := range []string{"pointer is required", "equals: must be a string, number or boolean, not a list"} {
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("bad conditions: %v, want %q", err, msg)
		}
	}
}
