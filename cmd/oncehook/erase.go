package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/review"
)

const eraseUsage = `Usage: oncehook erase --event ID --reason TEXT [--config FILE] [--data-dir DIR]
       oncehook erase --business-key KEY [--client NAME] --reason TEXT [--config FILE] [--data-dir DIR]

Erases on request what oncehook keeps of a person: an event (by its id, as the
dashboard and the API show it) with what its actions were asked for, or every
action with a business key (of one client with --client, else of every client)
with the events that asked for them. Bodies, payloads and headers, params, the
destinations' replies and error texts go; the key's parts are replaced by their
SHA-256. The provider's event id and the operation key stay, so a redelivery is
still a duplicate and never a second effect. Each event and action gets an
audit line saying who erased it, when and why (--reason), not what.

An action that is not final (confirmed, resolved or cancelled) is refused, and
then nothing is erased: resolve or cancel it first. The same is the API's
POST /api/v1/erase, for admins' tokens.
`

func runErase(ctx context.Context, env *environment, args []string) error {
	fs := newFlags(env, "erase", eraseUsage)
	var df dbFlags
	df.register(fs, env)
	configPath := fs.String("config", "oncehook.yaml", "config file")
	event := fs.String("event", "", "the id of the event to erase")
	key := fs.String("business-key", "", "the business key whose actions and events to erase, as the dashboard shows it")
	client := fs.String("client", "", "with --business-key: only this client's actions")
	reason := fs.String("reason", "", "why: the request this answers, kept in the audit trail")
	if err := fs.Parse(args); err != nil {
		return err
	}
	req := review.EraseRequest{BusinessKey: *key, Client: *client, Reason: *reason}
	if *event != "" {
		id, err := strconv.ParseInt(*event, 10, 64)
		if err != nil || id <= 0 {
			return fmt.Errorf("erase: --event takes an event's id, a number as the dashboard shows it, not %q", *event)
		}
		req.EventID = id
	}
	cfg, err := config.Load(*configPath, env.getenv)
	if err != nil {
		return err
	}
	return withDatabase(ctx, env, df, func(d *database) error {
		out, err := review.New(d.Pool, cfg, nil).Erase(ctx, accounts.CommandLine, req)
		if err != nil {
			return fmt.Errorf("erase: %w", err)
		}
		fmt.Fprintf(env.stdout, "erased %d events and %d actions\n", len(out.Events), len(out.Actions))
		for _, e := range out.Events {
			fmt.Fprintf(env.stdout, "event %d (client %s)\n", e.ID, e.Client)
		}
		for _, a := range out.Actions {
			fmt.Fprintf(env.stdout, "action %d (client %s)\n", a.ID, a.Client)
		}
		return nil
	})
}
