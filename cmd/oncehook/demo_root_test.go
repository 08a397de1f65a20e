package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db"
)

// TestDemoAsRootInClosedHome is `git clone ... ~/oncehook && cd ~/oncehook && make
// run` as root, whose home is 0700: the postgres user cannot enter it, so the
// cluster is kept under /var/lib/oncehook, the demo comes up and says where, a
// second command finds the same cluster, and the home keeps its mode.
func TestDemoAsRootInClosedHome(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not running as root: only root runs the embedded Postgres as the postgres user, which this test is about")
	}
	home, err := os.MkdirTemp("/tmp", "ohhome-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	checkout := filepath.Join(home, "oncehook")
	example, err := os.ReadFile("../../examples/oncehook.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(checkout, "examples"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(checkout, "examples", "oncehook.example.yaml"), example, 0o644); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(checkout, ".oncehook", "pg") // the default, from the checkout
	place, err := db.EmbeddedDataDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(place, "/var/lib/oncehook/") {
		t.Fatalf("EmbeddedDataDir(%s) = %s, want a directory under /var/lib/oncehook", dataDir, place)
	}
	t.Cleanup(func() { stopPostmaster(t, place); os.RemoveAll(filepath.Dir(place)) })

	env := []string{"DATABASE_URL=", "ONCEHOOK_DATA_DIR=", "CRM_TOKEN=root-test-crm-token"}
	p := startIn(t, checkout, env, "demo", "--listen", "127.0.0.1:0", "--crm", "127.0.0.1:0",
		"--mail", "127.0.0.1:0", "--pace", "300ms")
	base := strings.TrimSuffix(regexp.MustCompile(`http://\S+`).FindString(p.waitOutput(t, `Dashboard:\s+http://\S+`)), "/")
	if got := p.waitOutput(t, `Postgres data:\s+\S+`); !strings.HasSuffix(got, " "+place) {
		t.Errorf("banner says %q, want the data in %s", got, place)
	}
	if out := p.out.String(); !strings.Contains(out, "because user postgres cannot enter "+home) {
		t.Errorf("the demo does not say why the data is kept elsewhere:\n%s", tail(out, 3000))
	}

	tok := startIn(t, checkout, env, "token", "create", "--name", "root-test", "--role", "admin")
	if err := tok.cmd.Wait(); err != nil {
		t.Fatalf("token create beside the demo: %v\n%s", err, tok.out.String())
	}
	if out := tok.out.String(); !strings.Contains(out, "already running; using it") || !strings.Contains(out, place) {
		t.Errorf("token create did not reuse the demo's Postgres in %s:\n%s", place, out)
	}
	token := strings.TrimSpace(regexp.MustCompile(`(?m)^ohk_\S+$`).FindString(tok.out.String()))
	req, _ := http.NewRequest("GET", base+"/api/v1/summary", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("GET /api/v1/summary with the new token: %d", res.StatusCode)
	}

	checkMode := func(when string) {
		t.Helper()
		fi, err := os.Stat(home)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %s has mode %04o, want 0700 as it was", when, home, fi.Mode().Perm())
		}
	}
	checkMode("while the demo runs")
	if _, err := os.Stat(filepath.Join(checkout, ".oncehook")); !os.IsNotExist(err) {
		t.Errorf("something was created in the checkout: stat .oncehook: %v", err)
	}

	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("demo did not stop on Ctrl-C:\n%s", tail(p.out.String(), 3000))
	}
	if _, err := os.Stat(filepath.Join(place, "postmaster.pid")); !os.IsNotExist(err) {
		t.Errorf("Postgres still running after Ctrl-C")
	}
	waitNoPostgres(t, place)
	checkMode("after the demo")
}

// startIn is start, run from dir.
func startIn(t *testing.T, dir string, env []string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &process{cmd: cmd, out: out}
}

// stopPostmaster stops a server a failed test left running on dataDir (an
// immediate shutdown: the data is thrown away next), so none outlives the test.
func stopPostmaster(t *testing.T, dataDir string) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil || pid <= 0 || syscall.Kill(pid, syscall.SIGQUIT) != nil {
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}
