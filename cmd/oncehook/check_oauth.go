package main

import (
	"context"
	"fmt"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/oauthstore"
	"github.com/oncehook/oncehook/internal/settings"
)

// describeTokens prints whether each OAuth2 destination has tokens stored, when
// DATABASE_URL names the database. A key that cannot open them is an error, as it
// would be for serve.
func describeTokens(ctx context.Context, env *environment, cfg *settings.Config) error {
	var names []string
	for _, d := range cfg.Destinations {
		if d.Auth.OAuth2 != nil {
			names = append(names, d.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	w := env.stdout
	fmt.Fprint(w, "\nOAuth2 tokens:\n")
	dsn := env.getenv("DATABASE_URL")
	if dsn == "" {
		fmt.Fprint(w, "  not checked: set DATABASE_URL to the server's database to see them\n")
		return nil
	}
	pool, err := db.Open(ctx, dsn, 2)
	if err != nil {
		return fmt.Errorf("open the database: %w", err)
	}
	defer pool.Close()
	status, err := oauthstore.New(pool, cfg.SecretKeys).Status(ctx)
	if err != nil {
		return fmt.Errorf("read the stored oauth2 tokens: %w", err)
	}
	for _, name := range names {
		st := status[name]
		switch {
		case !st.Connected:
			fmt.Fprintf(w, "  %-20s none stored: connect it with Reconnect on /destinations (client_credentials: the first call fetches them)\n", name)
		case st.ExpiresAt.IsZero():
			fmt.Fprintf(w, "  %-20s stored (no expiry given; refreshed after a 401), %d refreshes\n", name, st.Refreshes)
		default:
			fmt.Fprintf(w, "  %-20s stored, access token expires %s, %d refreshes\n", name,
				st.ExpiresAt.UTC().Format(time.RFC3339), st.Refreshes)
		}
	}
	return nil
}
