package main

import (
	"context"
	"fmt"

	"github.com/oncehook/oncehook/internal/partitions"
	"github.com/oncehook/oncehook/internal/retention"
	"github.com/oncehook/oncehook/internal/store"
)

const migrateUsage = `Usage: oncehook migrate [--config FILE] [--data-dir DIR]

Applies every pending database migration, then moves the bytes of events stored
before the inbox kept them apart (migration 00038) into their daily partitions, and
the attempts and audit written before they were partitioned by day (00039) into
today's, in batches of 1,000, printing its progress, and exits (after a server
moving them, if one is). Stopped at any point, it has moved whole batches: run it
again to go on. The server also migrates at start, moves the bodies left in the
background while it serves, and the attempts and audit on its first retention pass.
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
		// A server moving them already is waited for: this ends with every body moved.
		r, err := partitions.MoveOld(ctx, d.Pool, store.For(d.Pool), true, func(total int) {
			fmt.Fprintf(env.stdout, "moved the bodies of %d events stored before event_bodies\n", total)
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "every event's body is in event_bodies (%d moved now)\n", r.Bodies)
		rows, err := retention.MoveOldRows(ctx, d.Pool, true, func(total int64) {
			fmt.Fprintf(env.stdout, "moved the attempts and audit of %d actions into their days\n", total)
		})
		if err != nil {
			return err
		}
		if !rows.Dropped {
			fmt.Fprintf(env.stdout, "moved the attempts and audit of %d actions; some were held by a worker: "+
				"the next retention pass moves them\n", rows.Actions)
			return nil
		}
		fmt.Fprintf(env.stdout, "every action's attempts and audit are in their days' partitions (%d actions moved now)\n",
			rows.Actions)
		return nil
	})
}
