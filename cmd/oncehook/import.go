package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/user"
	"slices"
	"strings"

	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/cutover"
)

const importUsage = `Usage: oncehook import --config FILE --client CLIENT [--dry-run] [--format jsonl|csv] [--by NAME] OPERATIONS
       oncehook import --config FILE --ledger LEDGER [--client CLIENT] [--dry-run]

Records the operations an earlier system already performed for CLIENT as
confirmed actions under their operation identities, so that an event asking
for one of them later (a provider's retry, a replay, a backfill) performs
nothing. OPERATIONS is a file of JSON lines ("-" for the standard input), one
operation a line:

  {"action": "open_opportunity", "key": ["enq_1042"], "external_ref": "opp_881",
   "performed_at": "2026-11-30T10:02:00Z", "params": {...}, "result": {...}}

action is a rule of the config (of one of CLIENT's sources), key its business
key parts in the order of the rule's key, external_ref the destination's
record id or message reference; params and result are optional. A .csv file
(or --format csv) has a header row naming the same columns, with key_1,
key_2, ... for a key of several parts (see docs/cutover.md). A file of any
length is read a few thousand lines at a time. Every line is checked first: one that names an unknown
action, lacks a key part or conflicts with an existing action is reported
with its line number and nothing of the file is loaded. The file is loaded in
one transaction, each action with an audit entry "imported from OPERATIONS by
NAME"; the same file twice changes nothing the second time.

With --ledger, LEDGER is a client's ledger written by oncehook export on
another oncehook: its actions (states, keys, records, params, owners), delivery
identities, links, audit trail (notes and assignments) and snoozes are added
here in one transaction, so that a redelivery or replay here of an event
performed there performs nothing. An action whose operation is here already
in another state or with another record, or whose rule the config lacks, is
a conflict: all of them are listed and nothing is loaded.
`

func runImport(ctx context.Context, env *environment, args []string) error {
	fs := newFlags(env, "import", importUsage)
	var df dbFlags
	df.register(fs, env)
	configPath := fs.String("config", "oncehook.yaml", "config file")
	client := fs.String("client", "", "the client whose operations the file lists (required)")
	dryRun := fs.Bool("dry-run", false, "check the file and say what would be recorded; record nothing")
	format := fs.String("format", "", "jsonl or csv (default: csv for a .csv file, else jsonl)")
	by := fs.String("by", defaultImporter(), "who imports, for the audit")
	ledgerFile := fs.String("ledger", "", "a client's ledger written by oncehook export, to load instead of OPERATIONS")
	// Flags may come before or after the file.
	if err := fs.Parse(args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) > 0 {
		if err := fs.Parse(rest[1:]); err != nil {
			return err
		}
		rest = append(rest[:1], fs.Args()...)
	}
	if *ledgerFile != "" {
		if len(rest) != 0 {
			return errors.New("import takes --ledger or a file of operations, not both")
		}
		return importLedger(ctx, env, df, *configPath, *ledgerFile, *client, *dryRun)
	}
	if len(rest) != 1 {
		fs.Usage()
		return errors.New("import takes one file of operations")
	}
	if *client == "" {
		return errors.New("import needs --client: the client whose operations the file lists")
	}
	cfg, err := config.Load(*configPath, env.getenv)
	if err != nil {
		return err
	}
	name := rest[0]
	in, closeIn, err := openInput(env, name, "the operations")
	if err != nil {
		return err
	}
	defer closeIn()
	return withDatabase(ctx, env, df, func(d *database) error {
		f := *format
		if f == "" {
			f = cutover.FormatOf(name)
		}
		rep, err := cutover.Import(ctx, cutover.Params{Pool: d.Pool, Config: cfg, Client: *client, File: name,
			Format: f, By: *by, DryRun: *dryRun}, in)
		if err != nil {
			return err
		}
		fmt.Fprintln(env.stdout, importSummary(name, rep, *dryRun))
		return nil
	})
}

// importSummary is what an import says it did.
func importSummary(name string, rep cutover.Report, dryRun bool) string {
	verb := "recorded"
	if dryRun {
		verb = "dry run, nothing recorded: would record"
	}
	var by []string
	for _, a := range slices.Sorted(maps.Keys(rep.ByAction)) {
		by = append(by, fmt.Sprintf("%s %d", a, rep.ByAction[a]))
	}
	s := fmt.Sprintf("%s: %d operations; %s %d as confirmed actions", name, rep.Operations, verb, rep.New)
	if len(by) > 0 {
		s += " (" + strings.Join(by, ", ") + ")"
	}
	s += fmt.Sprintf("; %d already recorded the same way", rep.Already)
	if rep.Repeated > 0 {
		s += fmt.Sprintf("; %d lines repeat an earlier line", rep.Repeated)
	}
	return s
}

// defaultImporter names who runs the import: the system's user name.
func defaultImporter() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "oncehook import"
}

// importLedger is oncehook import --ledger.
func importLedger(ctx context.Context, env *environment, df dbFlags, configPath, name, client string, dryRun bool) error {
	cfg, err := config.Load(configPath, env.getenv)
	if err != nil {
		return err
	}
	in, closeIn, err := openInput(env, name, "the ledger")
	if err != nil {
		return err
	}
	defer closeIn()
	return withDatabase(ctx, env, df, func(d *database) error {
		rep, err := cutover.ImportLedger(ctx, cutover.LedgerParams{Pool: d.Pool, Config: cfg, File: name, Client: client,
			DryRun: dryRun}, in)
		if err != nil {
			return err
		}
		verb := "added"
		if dryRun {
			verb = "dry run, nothing added: would add"
		}
		fmt.Fprintf(env.stdout, "%s: the ledger of %s; %s %d actions (%d here already the same way), %d delivery identities (%d here already), %d links, %d audit entries, %d snoozes\n",
			name, rep.Client, verb, rep.Actions, rep.ActionsAlready, rep.Events, rep.EventsAlready, rep.Links, rep.Audit, rep.Snoozes)
		return nil
	})
}

// openInput opens the file name, or the standard input for "-"; what names it
// in an error.
func openInput(env *environment, name, what string) (io.Reader, func(), error) {
	if name == "-" {
		return env.stdin, func() {}, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", what, err)
	}
	return f, func() { _ = f.Close() }, nil
}
