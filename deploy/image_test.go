package deploy_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/sender"
)

// runFlags are what podman needs to run a container on these machines: Debian's runc
// (crun refuses hybrid cgroups) and explicit limits.
var runFlags = []string{"run", "--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"}

// TestImage builds the image with deploy/build-image, checks the example config in
// it, then serves from it against the test's Postgres until /readyz answers and a
// signed delivery is stored.
func TestImage(t *testing.T) {
	podman := requirePodman(t)
	tag := "localhost/oncehook-test:" + randomHex(4)
	build := exec.Command("./build-image", tag)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("deploy/build-image: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(podman, "rmi", "--force", tag).Run() })

	user, err := exec.Command(podman, "image", "inspect", "--format", "{{.Config.User}}", tag).Output()
	if err != nil || strings.TrimSpace(string(user)) != "65532:65532" {
		t.Errorf("image user = %q (%v), want the non-root 65532:65532", user, err)
	}
	config, err := filepath.Abs("../examples/oncehook.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mount := config + ":/etc/oncehook/oncehook.yaml:ro"
	args := append(append([]string{}, runFlags...), "--rm", "-v", mount)
	args = append(append(args, envArgs(exampleEnv)...), tag, "check", "--config", "/etc/oncehook/oncehook.yaml")
	out, err := exec.Command(podman, args...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "/etc/oncehook/oncehook.yaml is valid.") {
		t.Fatalf("oncehook check in the image: %v\n%s", err, out)
	}

	pool, dsn := dbtest.NewDSN(t)
	dbURL := tcpProxy(t, dsn)
	port := freePort(t)
	name := "oncehook-test-" + randomHex(4)
	args = append(append([]string{}, runFlags...), "--detach", "--name", name, "--network", "host", "-v", mount,
		"-e", "DATABASE_URL="+dbURL, "-e", "PORT="+port)
	args = append(append(args, envArgs(exampleEnv)...), tag) // the image's own command: serve
	if out, err := exec.Command(podman, args...).CombinedOutput(); err != nil {
		t.Fatalf("podman run serve: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command(podman, "logs", name).CombinedOutput()
			t.Logf("container logs:\n%s", logs)
		}
		_ = exec.Command(podman, "rm", "--force", "--time", "10", name).Run()
	})
	base := "http://127.0.0.1:" + port
	waitReady(t, base+"/readyz", 90*time.Second)

	body := []byte(`{"id":"evt_image_1","type":"checkout.session.completed","created":1700000000,"data":{"object":{"metadata":{"enquiry_id":"enq_1"}}}}`)
	hdr, err := sender.Headers("stripe", exampleEnv["STRIPE_WEBHOOK_SECRET"], sender.Delivery{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/hooks/stripe-live", bytes.NewReader(body))
	req.Header = hdr
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("delivery to the container = %d, want 200", res.StatusCode)
	}
	var stored string
	err = pool.QueryRow(context.Background(),
		"SELECT source FROM events WHERE source_event_id = 'evt_image_1'").Scan(&stored)
	if err != nil || stored != "stripe-live" {
		t.Errorf("stored event: source %q, %v; want stripe-live", stored, err)
	}
}

// requirePodman returns podman's path, failing (never skipping) when it cannot run
// containers here.
func requirePodman(t *testing.T) string {
	t.Helper()
	podman, err := exec.LookPath("podman")
	if err != nil {
		t.Fatal("podman is missing: `make podman` installs Debian's podman and runc (the image tests need them)")
	}
	if _, err := exec.LookPath("runc"); err != nil {
		t.Fatal("runc is missing: `make podman` installs Debian's podman and runc (crun refuses this machine's cgroups)")
	}
	if out, err := exec.Command(podman, "info").CombinedOutput(); err != nil {
		t.Fatalf("podman cannot run here (podman info: %v):\n%s", err, out)
	}
	return podman
}

func envArgs(env map[string]string) []string {
	var args []string
	for k, v := range env {
		args = append(args, "-e", k+"="+v)
	}
	return args
}

// tcpProxy forwards a loopback TCP port to the test Postgres's Unix socket, which
// a container cannot see, and returns a DATABASE_URL for that port.
func tcpProxy(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	socket := cfg.Host
	if strings.HasPrefix(socket, "/") {
		socket = filepath.Join(socket, fmt.Sprintf(".s.PGSQL.%d", cfg.Port))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go pipe(c, socket)
		}
	}()
	return fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", cfg.User, ln.Addr(), cfg.Database)
}

func pipe(c net.Conn, socket string) {
	defer c.Close()
	network := "unix"
	if !strings.HasPrefix(socket, "/") {
		network = "tcp"
	}
	s, err := net.Dial(network, socket)
	if err != nil {
		return
	}
	defer s.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(s, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, s); done <- struct{}{} }()
	<-done
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

// waitReady polls url until it answers 200 or the deadline passes.
func waitReady(t *testing.T, url string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		res, err := client.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer 200 within %s (last: %v)", url, within, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
