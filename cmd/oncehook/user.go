package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/oncehook/oncehook/internal/ledger"
)

const userUsage = `Usage: oncehook user add --email EMAIL --role admin|operator [--config FILE] [--data-dir DIR]

Adds a person who signs in to the dashboard. The password is read from the first
line of standard input (at least 12 characters), so it stays out of the shell
history and the process list:

  echo "$PASSWORD" | oncehook user add --email ada@example.com --role admin
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
	fs.String("config", "", "config file (not needed to add a user)")
	email := fs.String("email", "", "the person's email, which they sign in with")
	role := fs.String("role", ledger.RoleOperator, "admin or operator")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	password, err := readPassword(env)
	if err != nil {
		return err
	}
	return withDatabase(ctx, env, df, func(d *database) error {
		u, err := ledger.CreateUser(ctx, d.Pool, *email, *role, password)
		if err != nil {
			return err
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
