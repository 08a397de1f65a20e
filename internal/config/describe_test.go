package config

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/oncehook/oncehook/internal/ledger"
)

// Every recipe loads, and oncehook check says in one line what protects it.
func TestRecipesDescribeTheirProtection(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"hubspot.yaml":          "strong lookup",
		"hubspot-search.yaml":   "eventual lookup settling after 10m: not found before then is looked up again, after it retried with the same key",
		"salesforce.yaml":       "upsert by external id; strong lookup",
		"salesforce-oauth.yaml": "upsert by external id; strong lookup",
		"hubspot-oauth.yaml":    "strong lookup",
		"pipedrive.yaml":        "eventual lookup settling after 10m: not found before then is looked up again, after it retried with the same key",
		"postmark.yaml":         "eventual lookup settling after 15m: not found before then is looked up again, after it retried with the same key",
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
			if k == ledger.SecretKeyEnv || k == ledger.SecretKeyPreviousEnv {
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
