package oncehook

import "net/http"

// NewDestinationClients returns a client for every configured destination, by name.
func NewDestinationClients(cfg *Config) map[string]DestinationClient {
	out := make(map[string]DestinationClient, len(cfg.Destinations))
	// One transport for all HTTP destinations; each call sets its own timeout.
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	for _, d := range cfg.Destinations {
		switch d.Type {
		case DestinationHTTP:
			out[d.Name] = NewHTTPDestination(d, client)
		case DestinationSMTP:
			out[d.Name] = NewSMTPDestination(d)
		}
	}
	return out
}
