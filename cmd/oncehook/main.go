// Command oncehook receives webhooks, performs each business action once and serves
// the review dashboard. Run `oncehook help` for the commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// command is one subcommand: its one-line summary, usage text and entry point.
type command struct {
	summary string
	usage   string
	run     func(ctx context.Context, env *environment, args []string) error
}

// environment is the process's outside world, passed explicitly so tests can run
// commands in-process.
type environment struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

func commands() map[string]command {
	return map[string]command{
		"serve":   {summary: "HTTP server and workers", usage: serveUsage, run: runServe},
		"demo":    {summary: "the tour: sandbox destinations, demo traffic, a login", usage: demoUsage, run: runDemo},
		"worker":  {summary: "workers only, for scaling out", usage: workerUsage, run: runWorker},
		"migrate": {summary: "apply database migrations and exit", usage: migrateUsage, run: runMigrate},
		"citus":   {summary: "citus distribute: shard an existing database by client", usage: citusUsage, run: runCitus},
		"prune":   {summary: "apply the retention windows now", usage: pruneUsage, run: runPrune},
		"erase":   {summary: "erase an event's or a business key's data on request", usage: eraseUsage, run: runErase},
		"export":  {summary: "export a client's ledger, to import it into another oncehook", usage: exportUsage, run: runExport},
		"import":  {summary: "import what an earlier system performed, so it is not done again", usage: importUsage, run: runImport},
		"check":   {summary: "validate a config and print its routing", usage: checkUsage, run: runCheck},
		"token":   {summary: "token create, list, revoke: API tokens", usage: tokenUsage, run: runToken},
		"user":    {summary: "user add: add a dashboard user (password from stdin)", usage: userUsage, run: runUser},
		"probe":   {summary: "health check: GET a URL, exit non-zero unless it answers 2xx", usage: probeUsage, run: runProbe},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := &environment{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	if err := run(ctx, env, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) { // --help printed the usage: not a failure
			return
		}
		fmt.Fprintln(os.Stderr, "oncehook:", err)
		os.Exit(2)
	}
}

func run(ctx context.Context, env *environment, args []string) error {
	cmds := commands()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			c, ok := cmds[args[1]]
			if !ok {
				printHelp(env.stderr, cmds)
				return fmt.Errorf("unknown command %q", args[1])
			}
			fmt.Fprint(env.stdout, c.usage)
			return nil
		}
		printHelp(env.stdout, cmds)
		return nil
	}
	c, ok := cmds[args[0]]
	if !ok {
		printHelp(env.stderr, cmds)
		return fmt.Errorf("unknown command %q", args[0])
	}
	return c.run(ctx, env, args[1:])
}

func printHelp(w io.Writer, cmds map[string]command) {
	fmt.Fprint(w, "oncehook turns repeated webhook deliveries into one business action.\n\nUsage:\n  oncehook <command> [flags]\n\nCommands:\n")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, cmds[n].summary)
	}
	fmt.Fprint(w, "  help       this list; `oncehook help <command>` or `oncehook <command> --help` for one\n\n"+
		"Every command accepts --config FILE and --data-dir DIR. DATABASE_URL selects Postgres;\n"+
		"without it an embedded Postgres runs from the machine's PostgreSQL binaries under\n"+
		".oncehook/pg (or --data-dir), shared by every command while it runs.\n")
}

// newFlags returns a FlagSet that prints usage on -h and returns flag.ErrHelp.
func newFlags(env *environment, name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprint(env.stderr, usage+"\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs
}
