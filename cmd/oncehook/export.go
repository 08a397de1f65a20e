package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/cutover"
)

const exportUsage = `Usage: oncehook export --config FILE --client CLIENT [--bodies] [--out LEDGER]

Writes CLIENT's ledger as one file of JSON lines (to the standard output, or
--out): its actions with their states, keys, records, params and owners, its
delivery identities (with the events' bodies when --bodies), the links
between them, the audit trail (notes and assignments included) and the
snoozes. oncehook import --ledger LEDGER loads it into another oncehook, so
that nothing performed here is performed there again (docs/cutover.md). The
config's rules are not in it: copy the client's part of the config.
`

func runExport(ctx context.Context, env *environment, args []string) error {
	fs := newFlags(env, "export", exportUsage)
	var df dbFlags
	df.register(fs, env)
	configPath := fs.String("config", "oncehook.yaml", "config file")
	client := fs.String("client", "", "the client whose ledger to write (required)")
	bodies := fs.Bool("bodies", false, "write the events' bodies too")
	out := fs.String("out", "", "the file to write (default: the standard output)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *client == "" {
		return errors.New("export needs --client: the client whose ledger to write")
	}
	cfg, err := config.Load(*configPath, env.getenv)
	if err != nil {
		return err
	}
	var w io.Writer = env.stdout
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			return fmt.Errorf("create the ledger file: %w", err)
		}
		defer f.Close()
		w = f
	}
	return withDatabase(ctx, env, df, func(d *database) error {
		// One snapshot: a ledger that changes while it is written is written as
		// it stood when the export began.
		tx, err := d.Pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return fmt.Errorf("begin the export's snapshot: %w", err)
		}
		defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read only
		rep, err := cutover.Export(ctx, db.New(tx), cfg, *client, *bodies, w)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.stderr, "exported the ledger of %s: %d actions, %d delivery identities, %d links, %d audit entries, %d snoozes\n",
			*client, rep.Actions, rep.Events, rep.Links, rep.Audit, rep.Snoozes)
		return nil
	})
}
