package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
)

// tokenPrefix marks oncehook API tokens so a leaked one is recognisable in a scan.
const tokenPrefix = "ohk_"

// Token states, as the list shows them.
const (
	TokenActive  = "active"
	TokenExpired = "expired"
	TokenRevoked = "revoked"
)

// Token is an API token as people see it: never its value, which is shown once.
type Token struct {
	ID         int64
	Name       string
	Role       string
	Clients    []string // none for an admin's
	CreatedAt  time.Time
	ExpiresAt  *time.Time // nil: never
	LastUsedAt *time.Time // nil: never used
	RevokedAt  *time.Time
}

// State is TokenActive, TokenExpired or TokenRevoked at now.
func (t Token) State(now time.Time) string {
	switch {
	case t.RevokedAt != nil:
		return TokenRevoked
	case t.ExpiresAt != nil && !t.ExpiresAt.After(now):
		return TokenExpired
	}
	return TokenActive
}

// TokenParams are what a new token is made of.
type TokenParams struct {
	Name    string
	Role    string
	Clients []string      // an operator's or a viewer's clients, checked by CheckScope first
	Expires time.Duration // from now; 0 means never
	Actor   ledger.Actor  // who creates it, for the audit
}

// CreateToken makes an API token with a role that never expires and returns it,
// audited as made by the command line. See IssueToken.
func CreateToken(ctx context.Context, pool *pgxpool.Pool, name, role string, clients ...string) (string, error) {
	tok, _, err := IssueToken(ctx, pool, TokenParams{Name: name, Role: role, Clients: clients, Actor: CommandLine})
	return tok, err
}

// CommandLine is the actor of the oncehook commands, which only whoever can
// reach the database runs.
var CommandLine = ledger.Actor{Name: "oncehook (command line)", Role: settings.RoleAdmin}

// IssueToken makes an API token and returns it with its record. Only its SHA-256
// is stored, so it is shown once and cannot be recovered. The creation is in the
// token audit. Errors: EFORBIDDEN unless p.Actor is an admin; EINVALID for a
// missing name, an unknown role or a negative expiry.
func IssueToken(ctx context.Context, pool *pgxpool.Pool, p TokenParams) (string, Token, error) {
	if p.Actor.Role != settings.RoleAdmin {
		return "", Token{}, ledger.Errorf(ledger.EFORBIDDEN, "Only admins can create API tokens.")
	}
	clients, err := ledger.ScopeShape(p.Role, p.Clients)
	if err != nil {
		return "", Token{}, err
	}
	if strings.TrimSpace(p.Name) == "" {
		return "", Token{}, ledger.Errorf(ledger.EINVALID, "A token needs a name.")
	}
	if err := ledger.CheckText("name", p.Name); err != nil {
		return "", Token{}, err
	}
	if p.Expires < 0 {
		return "", Token{}, ledger.Errorf(ledger.EINVALID, "A token cannot expire in the past.")
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", Token{}, fmt.Errorf("generate token: %w", err)
	}
	token := tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(token))
	var expires *time.Time
	if p.Expires > 0 {
		at := time.Now().Add(p.Expires)
		expires = &at
	}
	var row db.ApiToken
	err = db.WithTx(ctx, pool, func(q *db.Queries) error {
		var err error
		if row, err = q.TokenInsert(ctx, db.TokenInsertParams{Name: p.Name, Role: p.Role, Clients: clients, TokenSha256: sum[:],
			ExpiresAt: expires}); err != nil {
			return fmt.Errorf("store token: %w", err)
		}
		return q.TokenAuditInsert(ctx, db.TokenAuditInsertParams{TokenID: row.ID, Actor: p.Actor.Label(), Act: "create"})
	})
	if err != nil {
		return "", Token{}, err
	}
	return token, tokenOf(row), nil
}

// AuthenticateToken returns the actor an API token stands for, or EUNAUTHORIZED
// for an unknown, revoked or expired one, and marks it used.
func AuthenticateToken(ctx context.Context, pool *pgxpool.Pool, token string) (ledger.Actor, error) {
	if !strings.HasPrefix(token, tokenPrefix) {
		return ledger.Actor{}, ledger.Errorf(ledger.EUNAUTHORIZED, "The API token is not valid.")
	}
	sum := sha256.Sum256([]byte(token))
	q := db.New(pool)
	row, err := q.TokenGetByHash(ctx, sum[:])
	if db.IsNotFound(err) {
		return ledger.Actor{}, ledger.Errorf(ledger.EUNAUTHORIZED, "The API token is not valid, has expired or was revoked.")
	}
	if err != nil {
		return ledger.Actor{}, &ledger.Error{Code: ledger.EUNAVAILABLE, Message: "Storage is unavailable; retry later.", Err: err}
	}
	t := row.ApiToken
	if row.TouchDue {
		if err := q.TokenTouch(ctx, t.ID); err != nil {
			return ledger.Actor{}, &ledger.Error{Code: ledger.EUNAVAILABLE, Message: "Storage is unavailable; retry later.", Err: err}
		}
	}
	return ledger.Actor{Name: "token:" + t.Name, Role: t.Role, Clients: t.Clients}, nil
}

// ListTokens returns every API token, oldest first, revoked and expired ones too.
func ListTokens(ctx context.Context, pool *pgxpool.Pool) ([]Token, error) {
	rows, err := db.New(pool).TokenList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	out := make([]Token, len(rows))
	for i, r := range rows {
		out[i] = tokenOf(r)
	}
	return out, nil
}

// RevokeToken ends token id at once, audited as actor's. Errors: EFORBIDDEN
// unless actor is an admin; ENOTFOUND for no such token; ECONFLICT when it was
// revoked already.
func RevokeToken(ctx context.Context, pool *pgxpool.Pool, actor ledger.Actor, id int64) (Token, error) {
	if actor.Role != settings.RoleAdmin {
		return Token{}, ledger.Errorf(ledger.EFORBIDDEN, "Only admins can revoke API tokens.")
	}
	var row db.ApiToken
	err := db.WithTx(ctx, pool, func(q *db.Queries) error {
		var err error
		row, err = q.TokenRevoke(ctx, id)
		if db.IsNotFound(err) {
			if _, gerr := q.TokenGet(ctx, id); db.IsNotFound(gerr) {
				return ledger.Errorf(ledger.ENOTFOUND, "No API token has the id %d.", id)
			}
			return ledger.Errorf(ledger.ECONFLICT, "API token %d was revoked already.", id)
		}
		if err != nil {
			return fmt.Errorf("revoke token: %w", err)
		}
		return q.TokenAuditInsert(ctx, db.TokenAuditInsertParams{TokenID: id, Actor: actor.Label(), Act: "revoke"})
	})
	return tokenOf(row), err
}

// TokenAuditLine is one creation or revocation of a token.
type TokenAuditLine struct {
	Token string // its name
	ID    int64  // its id
	Actor string
	Act   string // create | revoke
	At    time.Time
}

// TokenAudit returns the latest n lines of the token audit, newest first.
func TokenAudit(ctx context.Context, pool *pgxpool.Pool, n int) ([]TokenAuditLine, error) {
	rows, err := db.New(pool).TokenAuditList(ctx, int32(n))
	if err != nil {
		return nil, fmt.Errorf("list token audit: %w", err)
	}
	out := make([]TokenAuditLine, len(rows))
	for i, r := range rows {
		out[i] = TokenAuditLine{Token: r.TokenName, ID: r.TokenID, Actor: r.Actor, Act: r.Act, At: r.At}
	}
	return out, nil
}

// tokenOf is an API token row without its hash.
func tokenOf(r db.ApiToken) Token {
	return Token{ID: r.ID, Name: r.Name, Role: r.Role, Clients: r.Clients, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
		LastUsedAt: r.LastUsedAt, RevokedAt: r.RevokedAt}
}
