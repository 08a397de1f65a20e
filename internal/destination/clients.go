package destination

import (
	"net/http"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// idleConnsPerHost is how many connections to one destination stay open between
// calls: enough for the engine's calls in flight (16 by default) and the lookups
// and checks beside them.
const idleConnsPerHost = 64

// NewClients returns a client for every configured destination, by name.
func NewClients(cfg *settings.Config) map[string]ledger.DestinationClient {
	out := make(map[string]ledger.DestinationClient, len(cfg.Destinations))
	// One transport for all HTTP destinations; each call sets its own timeout.
	// Connections stay open between calls: net/http keeps only 2 idle connections
	// per host by default, so with more calls in flight to one destination most
	// connections were closed after one call and a new one dialled for the next.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = idleConnsPerHost
	client := &http.Client{Transport: transport}
	secrets := settings.NewSecrets(cfg)
	for _, d := range cfg.Destinations {
		switch d.Type {
		case settings.DestinationHTTP:
			h := NewHTTP(d, client)
			h.secrets = secrets
			out[d.Name] = h
		case settings.DestinationSMTP:
			m := NewSMTP(d)
			m.secrets = secrets
			out[d.Name] = m
		}
	}
	return out
}
