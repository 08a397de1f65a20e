package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/sender"
)

// These tests build the real binary and run it as a user would.

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "oncehook-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "oncehook")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const cmdConfig = `
listen: 127.0.0.1:%d
sources:
  - {name: gh, client: acme, provider: github, account: org, environment: live, secret_env: GH_SECRET}
destinations:
  - {name: crm, type: http, create: {url: "http://127.0.0.1:9/x"}, owner: a@example.com}
actions: []
`

// process is a running oncehook command with its output captured.
type process struct {
	cmd *exec.Cmd
	out *syncBuffer
}

func start(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &process{cmd: cmd, out: out}
}

func (p *process) waitOutput(t *testing.T, re string) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m := rx.FindString(p.out.String()); m != "" {
			return m
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	t.Fatalf("no %q in output:\n%s", re, p.out.String())
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	// The server needs the port in its config file, so take a free one and hand it
	// over; another process grabbing it in between would fail the test loudly.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestServeOnEmbeddedPostgres(t *testing.T) {
	if _, err := exec.LookPath("initdb"); err != nil {
		if _, err := os.Stat("/usr/lib/postgresql"); err != nil {
			t.Skip("no PostgreSQL binaries on this machine")
		}
	}
	dir, err := os.MkdirTemp("/tmp", "ohcmd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cfg := filepath.Join(dir, "oncehook.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(cmdConfig, port)), 0o644); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(dir, "pg")
	env := []string{"DATABASE_URL=", "GH_SECRET=cmd-test-secret"}
	serve := start(t, env, "serve", "--config", cfg, "--data-dir", dataDir)
	serve.waitOutput(t, `listening on http://`)
	serve.waitOutput(t, `database mode: single Postgres`)

	body := []byte(`{"action":"opened"}`)
	hdr, _ := sender.Headers("github", "cmd-test-secret", sender.Delivery{ID: "d-1", Type: "issues", Body: body})
	req, _ := http.NewRequest("POST", fmt.Sprintf("http://127.0.0.1:%d/hooks/gh", port), bytes.NewReader(body))
	req.Header = hdr
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	reply, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(reply), `"duplicate":false`) {
		t.Fatalf("ingest: %d %s", res.StatusCode, reply)
	}

	t.Run("SecondCommandReusesRunningPostgres", func(t *testing.T) {
		tok := start(t, env, "token", "create", "--name", "ci", "--role", "admin", "--data-dir", dataDir)
		if err := tok.cmd.Wait(); err != nil {
			t.Fatalf("token create: %v\n%s", err, tok.out.String())
		}
		if !regexp.MustCompile(`(?m)^ohk_\S+$`).MatchString(tok.out.String()) {
			t.Errorf("no token printed:\n%s", tok.out.String())
		}
		if strings.Contains(tok.out.String(), "embedded postgres started") {
			t.Errorf("a second Postgres was started:\n%s", tok.out.String())
		}
		// The server still answers after the second command exits.
		res, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("readyz after token create: %v %v", res, err)
		}
		res.Body.Close()
	})

	t.Run("TokenCreateListRevoke", func(t *testing.T) {
		tokenLifecycle(t, env, dataDir, cfg, port)
	})
	t.Run("UserAddWithClients", func(t *testing.T) {
		userAddScoped(t, env, dataDir, cfg)
	})
	t.Run("EraseAnEvent", func(t *testing.T) {
		eventID := regexp.MustCompile(`"event_id":"(\d+)"`).FindStringSubmatch(string(reply))
		if eventID == nil {
			t.Fatalf("no event id in %s", reply)
		}
		eraseEvent(t, env, dataDir, cfg, eventID[1])
	})

	if err := serve.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serve.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not stop on SIGINT:\n%s", serve.out.String())
	}
	if _, err := os.Stat(filepath.Join(dataDir, "postmaster.pid")); !os.IsNotExist(err) {
		t.Errorf("Postgres still running after Ctrl-C (postmaster.pid: %v)\n%s", err, serve.out.String())
	}
	waitNoPostgres(t, dataDir)
}

// waitNoPostgres fails the test unless every postgres process of dataDir is gone
// soon: the server removes its pid file a moment before its last process exits.
func waitNoPostgres(t *testing.T, dataDir string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, _ := exec.Command("ps", "-eo", "stat=,args=").Output()
		var left []string
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "postgres -D "+dataDir) && !strings.HasPrefix(strings.TrimSpace(line), "Z") {
				left = append(left, line)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("postgres processes left: %s", strings.Join(left, "; "))
			return
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
}

func TestHelpListsEveryCommand(t *testing.T) {
	out, err := exec.Command(binary, "help").CombinedOutput()
	if err != nil {
		t.Fatalf("help: %v\n%s", err, out)
	}
	for name := range commands() {
		if !strings.Contains(string(out), "  "+name+" ") {
			t.Errorf("help does not list %s:\n%s", name, out)
		}
		usage, err := exec.Command(binary, "help", name).CombinedOutput()
		if err != nil || !strings.Contains(string(usage), "Usage: oncehook "+name) {
			t.Errorf("help %s: %v\n%s", name, err, usage)
		}
	}
}

// TestHelpOfAnUnknownCommand: help for a command that does not exist says so
// and fails, as running it does.
func TestHelpOfAnUnknownCommand(t *testing.T) {
	out, err := exec.Command(binary, "help", "nonsense").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), `unknown command "nonsense"`) {
		t.Errorf("help nonsense: %v\n%s", err, out)
	}
}

func TestInvalidConfigNamesFileAndLine(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "bad.yaml")
	os.WriteFile(cfg, []byte("sources:\n  - name: s\n    provider: strype\n"), 0o644)
	out, err := exec.Command(binary, "serve", "--config", cfg).CombinedOutput()
	if err == nil {
		t.Fatalf("serve accepted a bad config:\n%s", out)
	}
	if !strings.Contains(string(out), "bad.yaml:3") || !strings.Contains(string(out), "strype") {
		t.Errorf("error does not name file, line and reason:\n%s", out)
	}
}

// TestCheckWarnsAboutUnsignedCancellations: `oncehook check` accepts a Shopify
// rule cancelled by a topic alone but warns that the topic is not signed; with a
// when on the body it does not.
func TestCheckWarnsAboutUnsignedCancellations(t *testing.T) {
	const conf = `
sources: [{name: shop, client: c, provider: shopify, environment: live, secret_env: SHOP_SECRET}]
destinations: [{name: crm, type: http, create: {url: 'http://127.0.0.1:1/x'}}]
actions:
  - {name: order, source: shop, on: [orders/create], key: [/id], destination: crm, resource: /id, cancelled_by: %s}
`
	for cancelledBy, warn := range map[string]bool{
		"[orders/cancelled]": true,
		"[{type: orders/cancelled, when: [{pointer: /cancelled_at}]}]": false,
	} {
		cfg := filepath.Join(t.TempDir(), "shop.yaml")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf(conf, cancelledBy)), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(binary, "check", "--config", cfg, "--skip-env").CombinedOutput()
		if err != nil {
			t.Fatalf("check refused a valid config: %v\n%s", err, out)
		}
		got := strings.Contains(string(out), "Warnings:") && strings.Contains(string(out), "X-Shopify-Topic")
		if got != warn {
			t.Errorf("cancelled_by %s: warned %v, want %v\n%s", cancelledBy, got, warn, out)
		}
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tokenLifecycle creates an operator's token of client acme that expires in 90
// days (one of a client the config does not have is refused), uses it, lists it
// as active with its clients, expiry and last use, revokes it, and sees it
// refused with 401 and listed as revoked.
func tokenLifecycle(t *testing.T, env []string, dataDir, cfg string, port int) {
	run := func(args ...string) string {
		t.Helper()
		p := start(t, env, append(append([]string{"token"}, args...), "--data-dir", dataDir)...)
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("token %v: %v\n%s", args, err, p.out.String())
		}
		return p.out.String()
	}
	bad := start(t, env, "token", "create", "--name", "ci-bad", "--role", "viewer", "--clients", "acme,globex",
		"--config", cfg, "--data-dir", dataDir)
	if err := bad.cmd.Wait(); err == nil || !strings.Contains(bad.out.String(), `client "globex"`) {
		t.Errorf("a token of an unknown client: %v\n%s", err, bad.out.String())
	}
	token := regexp.MustCompile(`(?m)^ohk_\S+$`).FindString(run("create", "--name", "ci-90", "--role", "operator",
		"--clients", "acme", "--config", cfg, "--expires", "90d"))
	if token == "" {
		t.Fatal("no token printed")
	}
	summary := func() int {
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/api/v1/summary", port), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if st := summary(); st != 200 {
		t.Fatalf("new token: %d, want 200", st)
	}
	line := regexp.MustCompile(`(?m)^(\d+)\s+ci-90\s+operator\s+acme\s+active\s+\S+\s+(\S+)\s+(\S+)$`).FindStringSubmatch(run("list"))
	if line == nil {
		t.Fatalf("token list does not show ci-90 active:\n%s", run("list"))
	}
	if exp, err := time.Parse(time.RFC3339, line[2]); err != nil || time.Until(exp) < 89*24*time.Hour || time.Until(exp) > 91*24*time.Hour {
		t.Errorf("expires %q, want 90 days from now", line[2])
	}
	if line[3] == "never" {
		t.Errorf("last used: never, after a request with it")
	}
	if out := run("revoke", "--id", line[1]); !strings.Contains(out, "revoked token "+line[1]) {
		t.Errorf("revoke printed %q", out)
	}
	if st := summary(); st != 401 {
		t.Errorf("revoked token: %d, want 401", st)
	}
	if out := run("list"); !regexp.MustCompile(`(?m)^` + line[1] + `\s+ci-90\s+operator\s+acme\s+revoked`).MatchString(out) {
		t.Errorf("token list after revoke:\n%s", out)
	}
}

// eraseEvent erases the event the server stored (once its router has routed
// it), refuses an erasure without a reason, and a second one.
func eraseEvent(t *testing.T, env []string, dataDir, cfg, id string) {
	erase := func(args ...string) (string, error) {
		t.Helper()
		p := start(t, env, append(append([]string{"erase"}, args...), "--config", cfg, "--data-dir", dataDir)...)
		err := p.cmd.Wait()
		return p.out.String(), err
	}
	if out, err := erase("--event", id); err == nil || !strings.Contains(out, "Say why") {
		t.Errorf("an erasure without a reason: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := erase("--event", id, "--reason", "request 9")
		if err == nil {
			if !strings.Contains(out, "erased 1 events and 0 actions") || !strings.Contains(out, "event "+id+" (client acme)") {
				t.Errorf("erase printed:\n%s", out)
			}
			break
		}
		if !strings.Contains(out, "waits for the router") || time.Now().After(deadline) {
			t.Fatalf("erase: %v\n%s", err, out)
		}
		time.Sleep(50 * time.Millisecond) // the server's router has yet to route it
	}
	if out, err := erase("--event", id, "--reason", "request 9"); err == nil || !strings.Contains(out, "was erased already") {
		t.Errorf("a second erasure: %v\n%s", err, out)
	}
}

// userAddScoped adds a viewer of client acme, and is refused a viewer without
// clients and an operator of a client no source of the config has.
func userAddScoped(t *testing.T, env []string, dataDir, cfg string) {
	add := func(args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(binary, append(append([]string{"user", "add"}, args...), "--config", cfg, "--data-dir", dataDir)...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdin = strings.NewReader("a long enough password\n")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := add("--email", "bo@example.com", "--role", "viewer", "--clients", "acme"); err != nil ||
		!strings.Contains(out, "added bo@example.com (viewer of acme)") {
		t.Errorf("user add a viewer of acme: %v\n%s", err, out)
	}
	if out, err := add("--email", "cy@example.com", "--role", "viewer"); err == nil || !strings.Contains(out, "needs --clients") {
		t.Errorf("user add a viewer without clients: %v\n%s", err, out)
	}
	if out, err := add("--email", "di@example.com", "--role", "operator", "--clients", "acme,globex"); err == nil ||
		!strings.Contains(out, `client "globex"`) {
		t.Errorf("user add an operator of an unknown client: %v\n%s", err, out)
	}
}
