package oauthstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// TokenStore keeps the OAuth2 grants of destinations in Postgres, sealed with the
// secret keys, and lets one process at a time refresh a destination's grant (the
// processes of one deployment share the database, not memory).
type TokenStore struct {
	pool *pgxpool.Pool
	keys settings.SecretKeys
	now  func() time.Time
}

// New returns the store of the grants in pool, sealed with keys.
func New(pool *pgxpool.Pool, keys settings.SecretKeys) *TokenStore {
	return &TokenStore{pool: pool, keys: keys, now: time.Now}
}

type sealedToken struct {
	Access  string `json:"a"`
	Refresh string `json:"r,omitempty"`
	Type    string `json:"t,omitempty"`
}

// Token returns the stored grant of destination, ErrNotConnected when there is
// none, or ErrWrongSecretKey when the keys cannot open it.
func (s *TokenStore) Token(ctx context.Context, destination string) (ledger.OAuthToken, error) {
	row, err := db.New(s.pool).OAuthTokenGet(ctx, destination)
	if db.IsNotFound(err) {
		return ledger.OAuthToken{}, ledger.ErrNotConnected
	}
	if err != nil {
		return ledger.OAuthToken{}, fmt.Errorf("read the oauth2 grant: %w", err)
	}
	t, _, err := s.unseal(row)
	return t, err
}

// Refresh replaces the grant of destination when due says the stored one needs it,
// with the grant fetch obtains from the stored one. It holds the grant's row lock
// from reading to committing, so concurrent refreshers in any process wait and then
// find the fresh grant (due is asked again after the lock is taken). The new grant
// is committed before it is returned: a rotated refresh token is never used before
// it is saved. A fetch that returns no refresh token keeps the old one.
func (s *TokenStore) Refresh(ctx context.Context, destination string, due func(ledger.OAuthToken) bool,
	fetch func(context.Context, ledger.OAuthToken) (ledger.OAuthToken, error)) (t ledger.OAuthToken, refreshed bool, err error) {
	err = db.WithTx(ctx, s.pool, func(q *db.Queries) error {
		if err := q.OAuthTokenEnsure(ctx, destination); err != nil {
			return fmt.Errorf("make the oauth2 grant row: %w", err)
		}
		row, err := q.OAuthTokenLock(ctx, destination)
		if err != nil {
			return fmt.Errorf("lock the oauth2 grant: %w", err)
		}
		cur, _, err := s.unseal(row)
		if err != nil && !errors.Is(err, ledger.ErrNotConnected) {
			return err
		}
		if !due(cur) {
			t = cur
			return nil
		}
		next, err := fetch(ctx, cur)
		if err != nil {
			return err
		}
		if next.Refresh == "" {
			next.Refresh = cur.Refresh
		}
		if err := s.save(ctx, q, destination, next, cur.Access != ""); err != nil {
			return err
		}
		t, refreshed = next, true
		return nil
	})
	if err != nil {
		return ledger.OAuthToken{}, false, err
	}
	return t, refreshed, nil
}

// Save stores a new grant of destination (a first connection or a reconnection).
func (s *TokenStore) Save(ctx context.Context, destination string, t ledger.OAuthToken) error {
	return s.save(ctx, db.New(s.pool), destination, t, false)
}

func (s *TokenStore) save(ctx context.Context, q *db.Queries, destination string, t ledger.OAuthToken, refreshed bool) error {
	plain, err := json.Marshal(sealedToken{Access: t.Access, Refresh: t.Refresh, Type: t.Type})
	if err != nil {
		return fmt.Errorf("encode the oauth2 grant: %w", err)
	}
	sealed, err := s.keys.Seal(plain, []byte(destination))
	if err != nil {
		return fmt.Errorf("seal the oauth2 grant: %w", err)
	}
	if t.ObtainedAt.IsZero() {
		t.ObtainedAt = s.now()
	}
	p := db.OAuthTokenSaveParams{Destination: destination, Sealed: sealed, ObtainedAt: &t.ObtainedAt, Refreshed: refreshed}
	if !t.Expiry.IsZero() {
		p.ExpiresAt = &t.Expiry
	}
	if err := q.OAuthTokenSave(ctx, p); err != nil {
		return fmt.Errorf("store the oauth2 grant: %w", err)
	}
	return nil
}

// unseal opens a stored row; rotated says it was sealed with the previous key.
func (s *TokenStore) unseal(row db.OauthToken) (ledger.OAuthToken, bool, error) {
	if row.Sealed == nil {
		return ledger.OAuthToken{}, false, ledger.ErrNotConnected
	}
	plain, rotated, err := s.keys.Open(row.Sealed, []byte(row.Destination))
	if err != nil {
		return ledger.OAuthToken{}, false, fmt.Errorf("destination %s: %w", row.Destination, err)
	}
	var st sealedToken
	if err := json.Unmarshal(plain, &st); err != nil {
		return ledger.OAuthToken{}, false, fmt.Errorf("decode the oauth2 grant of %s: %w", row.Destination, err)
	}
	t := ledger.OAuthToken{Access: st.Access, Refresh: st.Refresh, Type: st.Type}
	if row.ExpiresAt != nil {
		t.Expiry = *row.ExpiresAt
	}
	if row.ObtainedAt != nil {
		t.ObtainedAt = *row.ObtainedAt
	}
	return t, rotated, nil
}

// GrantStatus is what `oncehook check` and the pages say about a stored grant.
type GrantStatus struct {
	Connected bool      // a grant is stored
	ExpiresAt time.Time // zero when the provider gave no expiry
	Refreshes int64
}

// Open checks at start that the keys open every stored grant, re-sealing with the
// current key those sealed with the previous one (key rotation), and returns each
// destination's status. ErrWrongSecretKey (wrapped, naming the destination) means
// the configured key is not the one the grants were stored with.
func (s *TokenStore) Open(ctx context.Context) (map[string]GrantStatus, error) {
	return s.grants(ctx, true)
}

// Status is Open without writing anything, for `oncehook check`.
func (s *TokenStore) Status(ctx context.Context) (map[string]GrantStatus, error) {
	return s.grants(ctx, false)
}

func (s *TokenStore) grants(ctx context.Context, reseal bool) (map[string]GrantStatus, error) {
	q := db.New(s.pool)
	rows, err := q.OAuthTokenList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the oauth2 grants: %w", err)
	}
	out := make(map[string]GrantStatus, len(rows))
	for _, row := range rows {
		st := GrantStatus{Refreshes: row.Refreshes}
		t, rotated, err := s.unseal(row)
		switch {
		case errors.Is(err, ledger.ErrNotConnected):
		case err != nil:
			return nil, err
		default:
			st.Connected, st.ExpiresAt = true, t.Expiry
		}
		if rotated && reseal {
			plain, _, _ := s.keys.Open(row.Sealed, []byte(row.Destination))
			resealed, err := s.keys.Seal(plain, []byte(row.Destination))
			if err != nil {
				return nil, fmt.Errorf("re-seal the oauth2 grant of %s: %w", row.Destination, err)
			}
			if _, err := q.OAuthTokenReseal(ctx, db.OAuthTokenResealParams{Destination: row.Destination,
				Resealed: resealed, Sealed: row.Sealed}); err != nil {
				return nil, fmt.Errorf("re-seal the oauth2 grant of %s: %w", row.Destination, err)
			}
		}
		out[row.Destination] = st
	}
	return out, nil
}

// OpenTokens returns the token store of cfg's OAuth2 destinations, after checking
// at start that ONCEHOOK_SECRET_KEY opens every stored grant (re-sealing those
// still sealed with ONCEHOOK_SECRET_KEY_PREVIOUS), and marks each
// authorization_code destination without a grant disconnected until its first
// Reconnect. A wrong key is an error here, at start, not at the first call.
func OpenTokens(ctx context.Context, pool *pgxpool.Pool, cfg *settings.Config) (*TokenStore, error) {
	s := New(pool, cfg.SecretKeys)
	if !cfg.SecretKeys.Set() {
		return s, nil
	}
	status, err := s.Open(ctx)
	if err != nil {
		return nil, fmt.Errorf("open the stored oauth2 grants: %w", err)
	}
	q := db.New(pool)
	for _, d := range cfg.Destinations {
		if d.Auth.OAuth2 == nil || d.Auth.OAuth2.Grant != settings.GrantAuthorizationCode || status[d.Name].Connected {
			continue
		}
		if err := q.DestinationAwaitConnection(ctx, db.DestinationAwaitConnectionParams{Name: d.Name,
			Reason: "not connected yet: an admin connects it with Reconnect"}); err != nil {
			return nil, fmt.Errorf("mark %s as waiting for its first connection: %w", d.Name, err)
		}
	}
	return s, nil
}
