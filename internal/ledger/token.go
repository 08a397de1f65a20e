package ledger

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
)

// tokenPrefix marks oncehook API tokens so a leaked one is recognisable in a scan.
const tokenPrefix = "ohk_"

// CreateToken makes an API token with a role and returns it. Only its SHA-256 is
// stored, so it is shown once and cannot be recovered.
func CreateToken(ctx context.Context, pool *pgxpool.Pool, name, role string) (string, error) {
	if err := checkRole(role); err != nil {
		return "", err
	}
	if strings.TrimSpace(name) == "" {
		return "", Errorf(EINVALID, "A token needs a name (--name).")
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	token := tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(token))
	if _, err := db.New(pool).TokenInsert(ctx, db.TokenInsertParams{Name: name, Role: role, TokenSha256: sum[:]}); err != nil {
		return "", fmt.Errorf("store token: %w", err)
	}
	return token, nil
}

// AuthenticateToken returns the actor an API token stands for, or EUNAUTHORIZED.
func AuthenticateToken(ctx context.Context, pool *pgxpool.Pool, token string) (Actor, error) {
	if !strings.HasPrefix(token, tokenPrefix) {
		return Actor{}, Errorf(EUNAUTHORIZED, "The API token is not valid.")
	}
	sum := sha256.Sum256([]byte(token))
	t, err := db.New(pool).TokenGetByHash(ctx, sum[:])
	if db.IsNotFound(err) {
		return Actor{}, Errorf(EUNAUTHORIZED, "The API token is not valid.")
	}
	if err != nil {
		return Actor{}, &Error{Code: EUNAVAILABLE, Message: "Storage is unavailable; retry later.", Err: err}
	}
	return Actor{Name: "token:" + t.Name, Role: t.Role}, nil
}

func checkRole(role string) error {
	if role != RoleAdmin && role != RoleOperator {
		return Errorf(EINVALID, "The role must be admin or operator, not %q.", role)
	}
	return nil
}
