package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/oncehook/oncehook/db"
	configs "github.com/oncehook/oncehook/internal/config"
	destinations "github.com/oncehook/oncehook/internal/destination"
	"github.com/oncehook/oncehook/internal/engine"
	"github.com/oncehook/oncehook/internal/inbox"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/web"
)

// benchConfig is the server's config: the sandbox CRM at crmURL and, for each
// client (acme when none is named), a Stripe source and one action per checkout.
// The single client's source is stripe-live; each of several is stripe-CLIENT.
func benchConfig(addr, crmURL string, clients ...string) string {
	var sources, actions strings.Builder
	for _, c := range clientsOrAcme(clients) {
		src, account, action := clientNames(c, len(clients) > 0)
		fmt.Fprintf(&sources, `  - {name: %s, client: %s, provider: stripe, account: %s, environment: live,
     secret_env: BENCH_STRIPE_SECRET, max_body: 256KiB}
`, src, c, account)
		fmt.Fprintf(&actions, `  - name: %s
    source: %s
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    destination: crm
    params:
      enquiry_id: /data/object/metadata/enquiry_id
      amount: /data/object/amount_total
      email: /data/object/customer_details/email
    retry: {attempts: 8, within: 72h}
    owner: sales-ops@example.com
`, action, src)
	}
	return fmt.Sprintf(`listen: %s
connections_per_address: 0   # every sender posts from this one address
sources:
%sdestinations:
  - name: crm
    type: http
    create: {method: POST, url: "%[3]s/opportunities"}
    auth: {bearer_env: BENCH_CRM_TOKEN}
    idempotency: {header: Idempotency-Key, ttl: 24h}
    reference_field: source_ref
    lookup: {url: "%[3]s/opportunities?source_ref={ref}", consistency: strong}
    result_id: /id
    timeout: 5s
    owner: crm-admin@example.com
actions:
%[4]s`, addr, sources.String(), crmURL, actions.String())
}

func clientsOrAcme(clients []string) []string {
	if len(clients) == 0 {
		return []string{"acme"}
	}
	return clients
}

// clientNames are benchConfig's names of client c's source, Stripe account and
// action: stripe-live, acct_bench and open_opportunity for the single client, and
// each suffixed by the client's name when several are named.
func clientNames(c string, several bool) (source, account, action string) {
	if !several {
		return "stripe-live", "acct_bench", "open_opportunity"
	}
	return "stripe-" + c, "acct_" + c, "open_opportunity_" + c
}

// hookPaths are the webhook paths of benchConfig's sources for clients.
func hookPaths(clients []string) []string {
	if len(clients) == 0 {
		return []string{"/hooks/stripe-live"}
	}
	var out []string
	for _, c := range clients {
		out = append(out, "/hooks/stripe-"+c)
	}
	return out
}

var benchEnv = map[string]string{"BENCH_STRIPE_SECRET": stripeSecret, "BENCH_CRM_TOKEN": crmToken}

// destination is the sandbox CRM behind an optional fixed delay.
type destination struct {
	crm      *sandbox.CRM
	delay    atomic.Int64 // nanoseconds before each reply
	inFlight atomic.Int64 // requests being answered now
	// down makes it answer 503 (no Retry-After) to every request, counted in
	// downCalls: the outage phase's dead destination.
	down      atomic.Bool
	downCalls atomic.Int64
	url       string
	srv       *http.Server
}

func startDestination() (*destination, error) {
	d := &destination{crm: sandbox.NewCRM(sandbox.CRMParams{Token: crmToken})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := d.crm.Handler()
	d.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.inFlight.Add(1)
		defer d.inFlight.Add(-1)
		if wait := time.Duration(d.delay.Load()); wait > 0 {
			time.Sleep(wait)
		}
		if d.down.Load() {
			d.downCalls.Add(1)
			http.Error(w, "service unavailable", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go d.srv.Serve(ln) //nolint:errcheck // ends at Close
	d.url = "http://" + ln.Addr().String()
	return d, nil
}

// creates is how many create calls the CRM answered, repeats included.
func (d *destination) creates() int {
	n := 0
	for _, r := range d.crm.Requests() {
		if r.Method == http.MethodPost {
			n++
		}
	}
	return n
}

func (d *destination) close() { _ = d.srv.Close() }

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// writeConfig writes benchConfig for clients to name under the bench's directory.
func (b *bench) writeConfig(dest *destination, name string, clients ...string) (path, addr string, err error) {
	if addr, err = freeAddr(); err != nil {
		return "", "", err
	}
	path = filepath.Join(b.dir, name)
	return path, addr, os.WriteFile(path, []byte(benchConfig(addr, dest.url, clients...)), 0o644)
}

// buildServer builds the real binary from ./cmd/oncehook.
func (b *bench) buildServer(ctx context.Context) error {
	b.bin = filepath.Join(b.dir, "oncehook")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", b.bin, "./cmd/oncehook")
	cmd.Dir = b.o.repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build ./cmd/oncehook: %w\n%s", err, out)
	}
	return nil
}

// cli runs a command of the real binary against the bench database.
func (b *bench) cli(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, b.bin, args...)
	cmd.Env = b.serverEnv()
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("oncehook %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return strings.TrimSpace(out.String()), nil
}

func (b *bench) serverEnv() []string {
	env := append(os.Environ(), "DATABASE_URL="+b.pg.dsn)
	for k, v := range benchEnv {
		env = append(env, k+"="+v)
	}
	return env
}

// child is the real server running as its own process.
type child struct {
	cmd  *exec.Cmd
	url  string
	done chan error
	// what started it, for a restart
	config, addr, logName string
}

// startChild starts the server with config, listening on addr, its output in
// the bench's directory under logName.
func (b *bench) startChild(ctx context.Context, config, addr, logName string) (*child, error) {
	logf, err := os.OpenFile(filepath.Join(b.dir, logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(b.bin, "serve", "--config", config)
	cmd.Env = b.serverEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches the bench, which stops it
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start server: %w", err)
	}
	c := &child{cmd: cmd, url: "http://" + addr, done: make(chan error, 1), config: config, addr: addr, logName: logName}
	go func() { c.done <- cmd.Wait(); logf.Close() }()
	if err := waitReady(ctx, c.url, c.done); err != nil {
		c.stop()
		tail, _ := os.ReadFile(logf.Name())
		return nil, fmt.Errorf("%w; server log:\n%s", err, lastLines(string(tail), 20))
	}
	return c, nil
}

func (c *child) pid() int {
	if c == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// whileStopped stops the server, runs f, and starts the server again as it was
// started; the stopped process's peak RSS is kept for the memory row.
func (b *bench) whileStopped(ctx context.Context, f func() error) error {
	c := b.srv
	if mib, err := peakRSS(c.pid()); err == nil {
		b.earlierRSS = max(b.earlierRSS, mib)
	}
	if err := c.stop(); err != nil {
		b.t.note("the server's shutdown before a fill: %v", err)
	}
	b.srv = nil
	ferr := f()
	srv, err := b.startChild(ctx, c.config, c.addr, c.logName)
	if err != nil {
		return errors.Join(ferr, err)
	}
	b.srv = srv
	return ferr
}

// stop asks the server to shut down as an operator would and waits for it.
func (c *child) stop() error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.done:
		return err
	case <-time.After(60 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
		return errors.New("the server did not stop within 60s of SIGTERM")
	}
}

func waitReady(ctx context.Context, url string, exited <-chan error) error {
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("the server exited before it was ready: %v", err)
		default:
		}
		res, err := http.Get(url + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond): // poll interval while it starts
		}
	}
	return errors.New("the server was not ready within 90s")
}

// inProcess is oncehook wired as serve wires it, inside the bench process, with an
// engine whose Concurrency the binary cannot set.
type inProcess struct {
	url  string
	stop func()
}

func (b *bench) startInProcess(ctx context.Context, config string, concurrency int) (*inProcess, error) {
	cfg, err := configs.Load(config, func(k string) string { return benchEnv[k] })
	if err != nil {
		return nil, err
	}
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(200) // as oncehook serve sets it (cmd/oncehook/gc.go)
	}
	pool, err := db.Open(ctx, b.pg.dsn, 16)
	if err != nil {
		return nil, err
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if b.o.verbose {
		logger = slog.Default()
	}
	clients := destinations.NewClients(cfg)
	inbox := inbox.New(pool, logger, nil)
	eng := engine.New(engine.Params{Pool: pool, Config: cfg, Clients: clients,
		Logger: logger, Concurrency: concurrency})
	engCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = eng.Run(engCtx) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		stopEngine()
		wg.Wait()
		pool.Close()
		return nil, err
	}
	srv := &http.Server{Handler: web.New(web.Params{Config: cfg, Pool: pool, Inbox: inbox,
		Review: review.New(pool, cfg, clients), Logger: logger}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends at Shutdown
	stop := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			log.Printf("in-process server shutdown: %v", err)
		}
		inbox.Close()
		stopEngine()
		wg.Wait()
		pool.Close()
	}
	return &inProcess{url: "http://" + ln.Addr().String(), stop: stop}, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
