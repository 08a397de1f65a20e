package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

const userUsage = `Usage: oncehook user add --email EMAIL --role admin|operator|viewer [--clients A,B] [--config FILE] [--data-dir DIR]

Adds a person who signs in to the dashboard. An admin sees and does everything;
an operator (acts) or a viewer (only reads) sees only the clients listed in
--clients, which must be clients of the config's sources (--config, default
oncehook.yaml). The password is read from the first line of standard input (at
least 12 characters), so it stays out of the shell history and the process list:

  echo "$PASSWORD" | oncehook user add --email ada@example.com --role admin
  echo "$PASSWORD" | oncehook user add --email bo@example.com --role viewer --clients acme,globex
`

func runUser(ctx context.Context, env *environment, args []string) error {
	if len(args) == 0 || args[0] != "add" {
		fmt.Fprint(env.stderr, userUsage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return fmt.Errorf("user: expected 'add'")
	}
	fs := newFlags(env, "user add", userUsage)
	var df dbFlags
	df.register(fs, env)
	configPath := fs.String("config", "", "config file, whose sources name the clients (default oncehook.yaml)")
	email := fs.String("email", "", "the person's email, which they sign in with")
	role := fs.String("role", settings.RoleOperator, "admin, operator or viewer")
	clientList := fs.String("clients", "", "an operator's or viewer's clients, comma-separated")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	clients, err := scopeFlags(env, *configPath, *role, *clientList)
	if err != nil {
		return fmt.Errorf("user add: %w", err)
	}
	password, err := readPassword(env)
	if err != nil {
		return err
	}
	return withDatabase(ctx, env, df, func(d *database) error {
		u, err := accounts.CreateUser(ctx, d.Pool, *email, *role, password, clients...)
		if err != nil {
			return err
		}
		if len(u.Clients) > 0 {
			fmt.Fprintf(env.stdout, "added %s (%s of %s)\n", u.Email, u.Role, strings.Join(u.Clients, ", "))
			return nil
		}
		fmt.Fprintf(env.stdout, "added %s (%s)\n", u.Email, u.Role)
		return nil
	})
}

// readPassword reads the first line of standard input, without its line ending.
func readPassword(env *environment) (string, error) {
	if env.stdin == nil {
		return "", fmt.Errorf("user add: the password is read from standard input")
	}
	line, err := bufio.NewReader(env.stdin).ReadString('\n')
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		if err != nil {
			return "", fmt.Errorf("user add: no password on standard input: %w", err)
		}
		return "", fmt.Errorf("user add: the password on standard input is empty")
	}
	return line, nil
}

// scopeFlags checks --role and --clients against the clients of the config's
// sources: an admin has none, an operator or a viewer at least one, each known.
// The config is read only for an operator or a viewer; secrets need not be set.
func scopeFlags(env *environment, configPath, role, list string) ([]string, error) {
	if role == settings.RoleAdmin && list == "" {
		return nil, nil
	}
	var clients []string
	for _, c := range strings.Split(list, ",") {
		if c = strings.TrimSpace(c); c != "" {
			clients = append(clients, c)
		}
	}
	if role != settings.RoleAdmin && len(clients) == 0 {
		return nil, fmt.Errorf("an %s needs --clients, the clients they see (comma-separated)", role)
	}
	if configPath == "" {
		configPath = "oncehook.yaml"
	}
	cfg, err := config.Load(configPath, func(k string) string {
		if v := env.getenv(k); v != "" {
			return v
		}
		return config.PlaceholderSecret
	})
	if err != nil {
		return nil, fmt.Errorf("read the config for its clients: %w", err)
	}
	out, err := ledger.CheckScope(role, clients, cfg.Clients())
	if err != nil {
		return nil, errors.New(ledger.ErrorMessage(err))
	}
	return out, nil
}
