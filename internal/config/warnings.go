package config

import (
	"fmt"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// unsignedType names, by provider, where the event type comes from when the
// provider's signature does not cover it.
var unsignedType = map[string]string{
	ledger.ProviderShopify: "Shopify's X-Shopify-Topic header",
	ledger.ProviderGitHub:  "GitHub's X-GitHub-Event header",
}

// Warnings are what is valid in cfg but unsafe: a rule cancelled by an event type
// its provider does not sign, with no when on the body, cancels on the sender's
// word, so one captured signed body re-sent under that type would cancel.
func Warnings(cfg *settings.Config) []string {
	var out []string
	for i, a := range cfg.Actions {
		src, ok := cfg.Source(a.Source)
		if !ok {
			continue
		}
		where, unsigned := unsignedType[src.Provider]
		if !unsigned {
			continue
		}
		for _, t := range a.CancelledBy {
			if len(a.CancelWhen[t]) > 0 {
				continue
			}
			out = append(out, fmt.Sprintf("actions[%d] (%s): cancelled_by %q relies only on %s, which is not signed: "+
				"any signed body of source %s re-sent under that type would cancel. Require what only such an event's "+
				"body holds: cancelled_by: [{type: %s, when: [{pointer: /cancelled_at}]}]", i, a.Name, t, where, src.Name, t))
		}
	}
	return out
}
