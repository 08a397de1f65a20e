package config

import (
	"fmt"
	"io"
	"strings"

	"github.com/oncehook/oncehook"
)

// Describe writes what cfg does, for people: each source's ingest URL and each
// rule's routing, as `oncehook check` prints it.
func Describe(w io.Writer, cfg *oncehook.Config) {
	fmt.Fprint(w, "Sources (paste the URL into the provider):\n")
	for _, s := range cfg.Sources {
		fmt.Fprintf(w, "  %-20s %s/hooks/%s  (%s, client %s, %s; secrets from %s)\n",
			s.Name, cfg.BaseURL, s.Name, s.Provider, s.Client, s.Environment, s.SecretEnv)
		if b := s.Backfill; b.On() {
			what := "events of its rules' types"
			if s.Provider == oncehook.ProviderGitHub {
				what = "failed deliveries of " + b.Hook
			}
			fmt.Fprintf(w, "  %-20s backfill every %s: %s within %s, from %s\n", "", b.Every, what, b.Window, b.APIURL)
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
	}
}
