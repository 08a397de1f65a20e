package accounts

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// Identity is what a verified ID token says about the person signing in.
type Identity struct {
	Issuer, Subject, Email string
	Values                 []string // the values of the configured claim (groups)
}

// SignInOIDC signs in the person an identity provider vouched for: it creates
// their user on the first sign-in and, on every one, sets their email, role and
// clients as the rules give them. Errors: EFORBIDDEN when no rule gives them
// access (any access they had is taken away) or their account is disabled;
// EUNAUTHORIZED when the token carries no usable email; ECONFLICT when another
// account here already has their email.
func SignInOIDC(ctx context.Context, pool *pgxpool.Pool, o *settings.OIDC, id Identity) (ledger.User, error) {
	q := db.New(pool)
	role, clients, ok := o.Access(id.Values)
	if !ok {
		if err := q.UserRevokeAccess(ctx, db.UserRevokeAccessParams{Role: settings.RoleViewer,
			OidcIssuer: id.Issuer, OidcSubject: id.Subject}); err != nil {
			return ledger.User{}, fmt.Errorf("revoke access: %w", err)
		}
		return ledger.User{}, ledger.Errorf(ledger.EFORBIDDEN, "Your %s account is in no group with access to oncehook. Ask an admin to add you to one.", o.Name)
	}
	email, err := cleanEmail(id.Email)
	if err != nil {
		return ledger.User{}, ledger.Errorf(ledger.EUNAUTHORIZED, "%s gave no email address for your account, so oncehook cannot name you. Ask an admin to check the sign-in settings.", o.Name)
	}
	params := db.UserSignInParams{Email: email, Role: role, Clients: append([]string{}, clients...),
		OidcIssuer: id.Issuer, OidcSubject: id.Subject}
	u, err := q.UserSignIn(ctx, params)
	if db.IsUniqueViolation(err) {
		// Two first sign-ins of one person at once: the email's index may refuse
		// the second before the subject's index finds the first, which has now
		// committed, so the second try updates it. A refusal again is an email
		// another account holds.
		u, err = q.UserSignIn(ctx, params)
	}
	if db.IsUniqueViolation(err) {
		return ledger.User{}, ledger.Errorf(ledger.ECONFLICT, "Another account here already has the email %s. Ask an admin.", email)
	}
	if err != nil {
		return ledger.User{}, fmt.Errorf("store user: %w", err)
	}
	if u.Disabled {
		return ledger.User{}, ledger.Errorf(ledger.EFORBIDDEN, "This account is disabled. Ask an admin to enable it.")
	}
	return ledger.UserOf(u), nil
}
