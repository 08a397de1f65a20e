package settings

import "slices"

// SignIn is the config's sign_in section: how people sign in to the dashboard.
type SignIn struct {
	// PasswordsOff (yaml passwords: false) refuses local passwords: only the
	// identity provider signs people in, the form is gone and POST /login is
	// refused, for the accounts `oncehook user add` made too. The zero value
	// accepts them.
	PasswordsOff bool
	OIDC         *OIDC // nil: no identity provider
}

// OIDC is an OpenID Connect identity provider people sign in through.
type OIDC struct {
	Name            string // the button reads "Sign in with <Name>"
	Issuer          string // the issuer URL (yaml issuer, or issuer_env), discovery at Issuer + /.well-known/openid-configuration
	ClientIDEnv     string
	ClientID        string `yaml:"-" json:"-"`
	ClientSecretEnv string
	ClientSecret    string   `yaml:"-" json:"-"`
	Scopes          []string // asked for besides openid, email and profile
	Claim           string   // the ID token's claim whose values the rules match, default "groups"
	Rules           []AccessRule
}

// OIDCCallbackPath is where the identity provider sends people back: the
// redirect URL to register with it is base_url + OIDCCallbackPath.
const OIDCCallbackPath = "/login/oidc/callback"

// DefaultOIDCClaim is the claim the rules match when the config names none.
const DefaultOIDCClaim = "groups"

// AccessRule gives a role (and, but for admins, clients) to the people whose
// claim holds Value.
type AccessRule struct {
	Value   string // yaml group
	Role    string
	Clients []string
}

// roleRank orders the roles by what they allow.
var roleRank = map[string]int{RoleViewer: 1, RoleOperator: 2, RoleAdmin: 3}

// Access is the role and clients the rules give a person whose claim holds
// values: the most privileged role among the matching rules, with the clients of
// every matching rule of that role (none for an admin, who sees every client).
// ok is false when no rule matches.
func (o *OIDC) Access(values []string) (role string, clients []string, ok bool) {
	for _, r := range o.Rules {
		if !slices.Contains(values, r.Value) {
			continue
		}
		switch {
		case roleRank[r.Role] > roleRank[role]:
			role, clients = r.Role, slices.Clone(r.Clients)
		case r.Role == role:
			clients = append(clients, r.Clients...)
		}
	}
	if role == "" {
		return "", nil, false
	}
	if role == RoleAdmin {
		return role, []string{}, true
	}
	slices.Sort(clients)
	return role, slices.Compact(clients), true
}
