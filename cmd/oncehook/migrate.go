package main

import (
	"context"
	"fmt"
)

const migrateUsage = `Usage: oncehook migrate [--config FILE] [--data-dir DIR]

Applies every pending database migration and exits. The server also migrates at start.
`

func runMigrate(ctx context.Context, env *environment, args []string) error {
	fs := newFlags(env, "migrate", migrateUsage)
	var df dbFlags
	df.register(fs, env)
	fs.String("config", "", "config file (accepted for symmetry; migrate does not need it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return withDatabase(ctx, env, df, func(d *database) error {
		fmt.Fprintln(env.stdout, "migrations applied; database mode:", modeLine(d.Mode))
		return nil
	})
}
