package settings

import "slices"

// Roles of people and API tokens.
const (
	RoleAdmin    = "admin"
	RoleOperator = "operator"
	RoleViewer   = "viewer" // reads the clients in scope, acts on nothing
)

// Clients are the clients the config's sources name, in config order.
func (c *Config) Clients() []string {
	var out []string
	for _, s := range c.Sources {
		if !slices.Contains(out, s.Client) {
			out = append(out, s.Client)
		}
	}
	return out
}
