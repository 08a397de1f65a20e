package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/demo"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/settings"
)

const demoUsage = `Usage: oncehook demo [--config FILE] [--data-dir DIR] [--reset]

The newcomer's tour: the embedded Postgres, the example config, a sandbox CRM
(HTTP, with idempotency-key memory, lookup and a fault schedule) and a mail sink
(SMTP), and demo traffic from all four providers: new events, duplicates, a
changed payload, out-of-order events, a cancellation, CRM timeouts, 429s, a 422
and a credential failure. Within a minute every queue has items.

It creates an admin with a fresh random password and prints the dashboard URL and
the login, then the script's steps, then the URL and login again once the script
has played out. Requests and workers log to demo.log in the data directory, not
to the terminal. Ctrl-C stops everything, Postgres included; the data stays for
next time, and --reset starts clean.
`

const demoAdmin = "admin@example.com"

func runDemo(ctx context.Context, env *environment, args []string) error {
	o, err := parseDemoFlags(env, args)
	if err != nil {
		return err
	}
	if env.getenv("DATABASE_URL") != "" {
		return errors.New("the demo runs on the embedded Postgres; unset DATABASE_URL")
	}
	if o.reset {
		if err := resetDataDir(o.db.dataDir); err != nil {
			return err
		}
	}
	secrets := demoSecrets(env)
	cfg, err := loadDemoConfig(env, o.configPath, secrets)
	if err != nil {
		return err
	}
	term := newLogger(env)

	sb, err := startSandboxes(secrets["CRM_TOKEN"], o.crmAddr, o.mailAddr)
	if err != nil {
		return err
	}
	defer sb.Close()
	if err := pointAtSandbox(cfg, sb.crmAddr(), sb.mail.Addr(), o.listen); err != nil {
		return err
	}

	d, err := openDatabase(ctx, env, o.db, term, 16)
	if err != nil {
		return err
	}
	// The log goes beside Postgres's server.log, where the data is.
	logPath := filepath.Join(d.embedded.Dir(), "demo.log")
	screen, err := openDemoScreen(ctx, env, logPath)
	if err != nil {
		d.Close(context.WithoutCancel(ctx), term)
		return err
	}
	defer screen.Close()
	logger, trafficLogger := screen.loggers(env, term)
	defer d.Close(context.WithoutCancel(ctx), logger)
	password := randomText(12)
	if err := demoAccounts(ctx, d, cfg, password); err != nil {
		return err
	}

	return runServices(ctx, env, cfg, d, logger, services{http: true, onListening: func(addr string) {
		b := demoBanner{addr: addr, password: password, crm: sb.crmAddr(), mail: sb.mail.Addr(),
			data: d.embedded.Dir(), log: logPath, owners: cfg.Owners()}
		screen.show(b.text(false), phaseProgress)
		traffic := &demo.Traffic{BaseURL: "http://" + addr, Config: cfg, Secrets: secrets, CRM: sb.crm, Mail: sb.mail,
			Logger: trafficLogger, Pace: o.pace, Played: func() { screen.show(b.text(true), phaseQuiet) },
			Review: review.New(d.Pool, cfg, nil), Admin: demoAdmin}
		go traffic.Run(ctx)
	}})
}

// demoOptions are the demo's flags.
type demoOptions struct {
	db                dbFlags
	configPath        string
	reset             bool
	listen            string // overrides the config's listen address
	crmAddr, mailAddr string // where the sandboxes listen
	pace              time.Duration
}

func parseDemoFlags(env *environment, args []string) (demoOptions, error) {
	fs := newFlags(env, "demo", demoUsage)
	var o demoOptions
	o.db.register(fs, env)
	fs.StringVar(&o.configPath, "config", "examples/oncehook.example.yaml", "config file")
	fs.BoolVar(&o.reset, "reset", false, "delete the embedded database first and start clean")
	fs.StringVar(&o.listen, "listen", "", "override the config's listen address (port 0: any free port)")
	fs.StringVar(&o.crmAddr, "crm", "127.0.0.1:9090", "where the sandbox CRM listens")
	fs.StringVar(&o.mailAddr, "mail", "127.0.0.1:2525", "where the sandbox mail sink listens")
	fs.DurationVar(&o.pace, "pace", 700*time.Millisecond, "time between the demo's scripted steps")
	err := fs.Parse(args)
	return o, err
}

// loadDemoConfig loads the config at path, with this run's secrets in place of
// the environment's.
func loadDemoConfig(env *environment, path string, secrets map[string]string) (*settings.Config, error) {
	return config.Load(path, func(k string) string {
		if v, ok := secrets[k]; ok {
			return v
		}
		return env.getenv(k)
	})
}

// demoSandboxes are the destinations the demo's config is pointed at: the sandbox
// CRM, served over HTTP, and the mail sink.
type demoSandboxes struct {
	crm    *sandbox.CRM
	crmLn  net.Listener
	crmSrv *http.Server
	mail   *sandbox.Mail
}

// startSandboxes starts the sandbox CRM, accepting crmToken, on crmAddr and the
// mail sink on mailAddr; the errors suggest another address when one is taken.
func startSandboxes(crmToken, crmAddr, mailAddr string) (*demoSandboxes, error) {
	crm := sandbox.NewCRM(sandbox.CRMParams{Token: crmToken, KeyTTL: 24 * time.Hour})
	crmLn, err := net.Listen("tcp", crmAddr)
	if err != nil {
		return nil, fmt.Errorf("start the sandbox CRM on %s (is something else there? try --crm 127.0.0.1:0): %w", crmAddr, err)
	}
	mail, err := sandbox.StartMail(mailAddr)
	if err != nil {
		crmLn.Close()
		return nil, fmt.Errorf("start the sandbox mail sink on %s (try --mail 127.0.0.1:0): %w", mailAddr, err)
	}
	// The mail sink's viewer is served beside the CRM's records, on the same port.
	mux := http.NewServeMux()
	mux.Handle(sandbox.MailInspectPath, mail.Handler())
	mux.Handle("/", crm.Handler())
	crmSrv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go crmSrv.Serve(crmLn) //nolint:errcheck // closed by Close
	return &demoSandboxes{crm: crm, crmLn: crmLn, crmSrv: crmSrv, mail: mail}, nil
}

func (s *demoSandboxes) crmAddr() string { return s.crmLn.Addr().String() }

// Close stops the mail sink, then the CRM.
func (s *demoSandboxes) Close() {
	s.mail.Close()
	s.crmSrv.Close()
}

// demoAccounts gives the demo's admin a fresh password, and the owners the config
// names accounts with the same one, so /mine shows each of them their actions from
// the first minute.
func demoAccounts(ctx context.Context, d *database, cfg *settings.Config, password string) error {
	if err := accounts.EnsureUser(ctx, d.Pool, demoAdmin, settings.RoleAdmin, password); err != nil {
		return fmt.Errorf("create the demo admin: %w", err)
	}
	for _, o := range cfg.Owners() {
		if o != demoAdmin {
			if err := accounts.EnsureUser(ctx, d.Pool, o, settings.RoleOperator, password, cfg.Clients()...); err != nil {
				return fmt.Errorf("create the demo owner %s: %w", o, err)
			}
		}
	}
	return nil
}

// demoBanner is what the demo shows once it listens, and again once its script
// has played out, so the login is the last thing on screen.
type demoBanner struct {
	addr, password, crm, mail, data, log string
	owners                               []string // the config's owners, who sign in with the same password
}

func (b demoBanner) text(played bool) string {
	head := "oncehook demo is running. Its steps follow; then this is shown again."
	if played {
		head = "oncehook demo: the script has played out; the queues show what it left. New\n" +
			"checkouts keep arriving, quietly: requests and workers log to the file below."
	}
	return fmt.Sprintf(`
%[1]s

  Dashboard:  http://%[2]s/
  Login:      %[3]s  /  %[4]s
              (the owners in the config sign in with the same password: %[10]s)

  Sandbox CRM records: http://%[5]s%[6]s
  Mail sink messages:  http://%[5]s%[11]s    (SMTP at %[7]s)
  Postgres data:       %[8]s
  Log:                 %[9]s

Look first at the queues on the overview: Failed (a CRM 422 and an email whose
outcome nobody can know), Uncertain (a CRM timeout waiting for its lookup),
Outstanding (actions held after the CRM token was rotated: once the demo says the
CRM accepts it again, Reconnect it on Destinations). Some of them are assigned to
you: see Mine. Open an action to see its events, attempts and audit trail, and try
Retry, Resolve or Assign. The trouble comes back every few minutes, so there is
always something to practise on.

Ctrl-C stops everything. 'oncehook demo --reset' starts clean.

`, head, b.addr, demoAdmin, b.password, b.crm, sandbox.InspectPath, b.mail, b.data, b.log, strings.Join(b.owners, ", "),
		sandbox.MailInspectPath)
}

// demoSecrets are the signing secrets and CRM token of this run: fresh random values
// that live only in this process (CRM_TOKEN may be given, so a test can read the CRM).
func demoSecrets(env *environment) map[string]string {
	crmToken := env.getenv("CRM_TOKEN")
	if crmToken == "" {
		crmToken = randomText(24)
	}
	return map[string]string{
		"STRIPE_WEBHOOK_SECRET":   "whsec_" + randomText(24),
		"GITHUB_WEBHOOK_SECRET":   randomText(24),
		"SHOPIFY_WEBHOOK_SECRET":  randomText(24),
		"STANDARD_WEBHOOK_SECRET": "whsec_" + base64.StdEncoding.EncodeToString([]byte(randomText(24))),
		"CRM_TOKEN":               crmToken,
	}
}

// pointAtSandbox sends the config's http destinations to the sandbox CRM and its
// smtp destinations to the mail sink, and applies a listen override.
func pointAtSandbox(cfg *settings.Config, crmAddr, mailAddr, listen string) error {
	for i := range cfg.Destinations {
		d := &cfg.Destinations[i]
		switch d.Type {
		case settings.DestinationHTTP:
			d.Create.URL = withHost(d.Create.URL, crmAddr)
			d.Lookup.URL = withHost(d.Lookup.URL, crmAddr)
		case settings.DestinationSMTP:
			d.Addr = mailAddr
		}
	}
	if listen == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", listen, err)
	}
	if port == "0" { // links need the real port: take a free one now
		ln, err := net.Listen("tcp", listen)
		if err != nil {
			return fmt.Errorf("find a free port: %w", err)
		}
		port = strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
	}
	cfg.Listen = net.JoinHostPort(host, port)
	cfg.BaseURL = "http://" + cfg.Listen
	return nil
}

// withHost replaces the host:port of an http URL, leaving the rest (such as a
// "{ref}" placeholder, which URL parsing would escape) untouched.
func withHost(u, hostPort string) string {
	rest, ok := strings.CutPrefix(u, "http://")
	if !ok {
		return u
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return "http://" + hostPort + rest[i:]
	}
	return "http://" + hostPort
}

// resetDataDir deletes the embedded database, wherever it is kept for dataDir,
// refusing while a server runs on it.
func resetDataDir(dataDir string) error {
	dir, err := db.EmbeddedDataDir(dataDir)
	if err != nil {
		return err
	}
	if b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid")); err == nil {
		pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			return fmt.Errorf("Postgres is running on %s (another oncehook?); stop it before --reset", dir)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("reset %s: %w", dir, err)
	}
	return nil
}

func randomText(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)[:n]
}
