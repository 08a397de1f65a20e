package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/config"
)

const checkUsage = `Usage: oncehook check --config FILE

Validates a config without starting anything and prints each source's ingest
path, what protects each destination against a double effect, and each rule's
routing. Exits non-zero with file, line and reason when the
config is invalid. Secrets must be set in the environment as for serve, unless
--skip-env lists the unset ones instead. For CI.

With --owners it also reaches the database (DATABASE_URL, or the embedded one)
and lists the owners the config names that have no account: nobody can sign in
as them to see their actions under /mine.

With DATABASE_URL set, it also says whether each OAuth2 destination has tokens
stored there and whether ONCEHOOK_SECRET_KEY opens them (it never starts the
embedded database and writes nothing).
`

func runCheck(ctx context.Context, env *environment, args []string) error {
	fs := newFlags(env, "check", checkUsage)
	configPath := fs.String("config", "oncehook.yaml", "config file")
	skipEnv := fs.Bool("skip-env", false, "accept secret variables that are unset here (CI without secrets); list them instead")
	owners := fs.Bool("owners", false, "also list the owners without an account (reaches the database)")
	var df dbFlags
	df.register(fs, env)
	if err := fs.Parse(args); err != nil {
		return err
	}
	getenv := env.getenv
	var unset []string
	if *skipEnv {
		getenv = func(k string) string {
			if v := env.getenv(k); v != "" {
				return v
			}
			unset = append(unset, k)
			return config.PlaceholderSecret
		}
	}
	cfg, err := config.Load(*configPath, getenv)
	if err != nil {
		return err
	}
	w := env.stdout
	if len(unset) > 0 {
		fmt.Fprintf(w, "Not set here (serve will need them): %s\n", strings.Join(unset, ", "))
	}
	fmt.Fprintf(w, "%s is valid.\n\n", cfg.Path)
	config.Describe(w, cfg)
	if warnings := config.Warnings(cfg); len(warnings) > 0 {
		fmt.Fprintln(w, "\nWarnings:")
		for _, x := range warnings {
			fmt.Fprintln(w, "  - "+x)
		}
	}
	if err := describeTokens(ctx, env, cfg); err != nil {
		return err
	}
	if !*owners {
		return nil
	}
	return withDatabase(ctx, env, df, func(d *database) error {
		without, err := accounts.OwnersWithoutAccount(ctx, d.Pool, cfg)
		if err != nil {
			return err
		}
		if len(without) == 0 {
			fmt.Fprintln(w, "\nEvery owner has an account.")
			return nil
		}
		fmt.Fprintf(w, "\nOwners without an account (nobody sees their actions under /mine; add them with `oncehook user add`):\n")
		for _, o := range without {
			fmt.Fprintf(w, "  %s\n", o)
		}
		return nil
	})
}
