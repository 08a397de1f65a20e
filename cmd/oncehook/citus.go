package main

import (
	"context"
	"fmt"

	"github.com/oncehook/oncehook/db"
)

const citusUsage = `Usage: oncehook citus distribute [--data-dir DIR]

Distributes the tables of a database that was migrated before the citus extension
was created in it: every table with a client column sharded by client, co-located,
and every other table copied to every node (oncehook migrate and the server's start
do the same for a new database, and for tables a later release adds). It copies the
rows into the shards, so run it while no oncehook process runs. Without Citus it
changes nothing and says so.
`

func runCitus(ctx context.Context, env *environment, args []string) error {
	if len(args) == 0 || args[0] != "distribute" {
		fmt.Fprint(env.stderr, citusUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return fmt.Errorf("citus: expected 'distribute'")
	}
	fs := newFlags(env, "citus distribute", citusUsage)
	var df dbFlags
	df.register(fs, env)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	return withDatabase(ctx, env, df, func(d *database) error {
		mode, err := db.New(d.Pool).DatabaseDistribute(ctx)
		if err != nil {
			return fmt.Errorf("distribute: %w", err)
		}
		fmt.Fprintln(env.stdout, "database mode:", modeLine(mode))
		return nil
	})
}

// modeLine says in words which mode the database is in (db's DatabaseMode).
func modeLine(mode string) string {
	switch mode {
	case "citus":
		return "Citus, each client's tables distributed by client"
	case "citus-undistributed":
		return "Citus installed, tables not distributed yet (run oncehook citus distribute)"
	default:
		return "single Postgres"
	}
}
