package main

import (
	"context"
	"fmt"

	"github.com/oncehook/oncehook/internal/ledger"
)

const tokenUsage = `Usage: oncehook token create --name NAME --role admin|operator [--config FILE] [--data-dir DIR]

Creates an API token for the JSON API (Authorization: Bearer TOKEN) and prints it
once. Only its hash is stored: keep it somewhere safe.
`

func runToken(ctx context.Context, env *environment, args []string) error {
	if len(args) == 0 || args[0] != "create" {
		fmt.Fprint(env.stderr, tokenUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return fmt.Errorf("token: expected 'create'")
	}
	fs := newFlags(env, "token create", tokenUsage)
	var df dbFlags
	df.register(fs, env)
	fs.String("config", "", "config file (not needed to create a token)")
	name := fs.String("name", "", "what the token is for, shown in the audit trail")
	role := fs.String("role", ledger.RoleOperator, "admin or operator")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	return withDatabase(ctx, env, df, func(d *database) error {
		token, err := ledger.CreateToken(ctx, d.Pool, *name, *role)
		if err != nil {
			return err
		}
		fmt.Fprintln(env.stdout, token)
		return nil
	})
}
