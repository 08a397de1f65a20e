package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/settings"
)

const tokenUsage = `Usage: oncehook token create --name NAME --role admin|operator|viewer [--clients A,B] [--expires 90d] [--config FILE] [--data-dir DIR]
       oncehook token list [--config FILE] [--data-dir DIR]
       oncehook token revoke --id ID [--config FILE] [--data-dir DIR]

create makes an API token for the JSON API (Authorization: Bearer TOKEN) and
prints it once; only its hash is stored, so keep it somewhere safe. An
operator's or viewer's token sees only the clients in --clients (clients of the
config's sources; --config, default oncehook.yaml); an admin's sees all. --expires
(days as 90d, or hours as 36h; default 90d, 0 for never) ends it by itself.
list shows every token: its role, when it was created, when it expires, when it
was last used, and whether it is active, expired or revoked. revoke ends one at
once. An expired or revoked token is refused with 401; each creation and
revocation is in the token audit (the dashboard's API tokens page).
`

// defaultTokenExpiry is how long a token lives unless told otherwise.
const defaultTokenExpiry = "90d"

func runToken(ctx context.Context, env *environment, args []string) error {
	sub := ""
	if len(args) > 0 {
		sub = args[0]
	}
	run, ok := map[string]func(context.Context, *environment, []string) error{
		"create": tokenCreate, "list": tokenList, "revoke": tokenRevoke}[sub]
	if !ok {
		fmt.Fprint(env.stderr, tokenUsage)
		if sub == "-h" || sub == "--help" {
			return nil
		}
		return fmt.Errorf("token: expected 'create', 'list' or 'revoke'")
	}
	return run(ctx, env, args[1:])
}

// tokenFlags are the flags every token command takes.
func tokenFlags(env *environment, name string) (*flag.FlagSet, *dbFlags) {
	fs := newFlags(env, "token "+name, tokenUsage)
	var df dbFlags
	df.register(fs, env)
	fs.String("config", "", "config file, whose sources name the clients (token create; default oncehook.yaml)")
	return fs, &df
}

func tokenCreate(ctx context.Context, env *environment, args []string) error {
	fs, df := tokenFlags(env, "create")
	name := fs.String("name", "", "what the token is for, shown in the audit trail")
	role := fs.String("role", settings.RoleOperator, "admin, operator or viewer")
	clientList := fs.String("clients", "", "an operator's or viewer's clients, comma-separated")
	expires := fs.String("expires", defaultTokenExpiry, "how long it lives: 90d, 36h; 0 for never")
	if err := fs.Parse(args); err != nil {
		return err
	}
	clients, err := scopeFlags(env, fs.Lookup("config").Value.String(), *role, *clientList)
	if err != nil {
		return fmt.Errorf("token create: %w", err)
	}
	life, err := parseLife(*expires)
	if err != nil {
		return err
	}
	return withDatabase(ctx, env, *df, func(d *database) error {
		token, _, err := accounts.IssueToken(ctx, d.Pool, accounts.TokenParams{Name: *name, Role: *role, Clients: clients, Expires: life,
			Actor: accounts.CommandLine})
		if err != nil {
			return err
		}
		fmt.Fprintln(env.stdout, token)
		return nil
	})
}

func tokenList(ctx context.Context, env *environment, args []string) error {
	fs, df := tokenFlags(env, "list")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return withDatabase(ctx, env, *df, func(d *database) error {
		ts, err := accounts.ListTokens(ctx, d.Pool)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(env.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tNAME\tROLE\tCLIENTS\tSTATE\tCREATED\tEXPIRES\tLAST USED")
		now := time.Now()
		for _, t := range ts {
			clients := strings.Join(t.Clients, ",")
			if clients == "" {
				clients = "all"
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Role, clients, t.State(now),
				t.CreatedAt.UTC().Format(time.RFC3339), stampOr(t.ExpiresAt, "never"), stampOr(t.LastUsedAt, "never"))
		}
		return w.Flush()
	})
}

func tokenRevoke(ctx context.Context, env *environment, args []string) error {
	fs, df := tokenFlags(env, "revoke")
	id := fs.Int64("id", 0, "the token's id, from token list")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *id <= 0 {
		return fmt.Errorf("token revoke: --id is required (see token list)")
	}
	return withDatabase(ctx, env, *df, func(d *database) error {
		t, err := accounts.RevokeToken(ctx, d.Pool, accounts.CommandLine, *id)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "revoked token %d (%s)\n", t.ID, t.Name)
		return nil
	})
}

// parseLife reads a token's lifetime: days as "90d", or a Go duration ("36h");
// "0" means it never expires.
func parseLife(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("token create: --expires %q: want days as 90d, hours as 36h, or 0", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("token create: --expires %q: want days as 90d, hours as 36h, or 0", s)
	}
	return d, nil
}

func stampOr(t *time.Time, none string) string {
	if t == nil {
		return none
	}
	return t.UTC().Format(time.RFC3339)
}
