package faults

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.Main(m) // stops the Postgres servers the tests started, even on Ctrl-C
}

// The binary is built once per test run, on first use: a fuzz worker or a run of one
// in-process test never pays for it.
var built struct {
	once sync.Once
	path string
	err  error
}

// binary returns the path of the oncehook binary built from this tree.
func binary(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "oncehook-faults-")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(dir, "oncehook")
		args := []string{"build", "-o", built.path}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "github.com/oncehook/oncehook/cmd/oncehook")...).CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// process is one running oncehook command, its stdout and stderr captured together.
type process struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{} // closed once the process has exited
	err  error         // its exit status, once done
}

// startProcess runs `oncehook args...` with env added to the test's environment.
// It is killed at the end of the test if it is still running.
func startProcess(t testing.TB, name string, env []string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	p := &process{t: t, name: name, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if strings.Contains(p.out.String(), "WARNING: DATA RACE") {
			t.Errorf("the race detector found a race in %s:\n%s", name, excerptAround(p.out.String(), "WARNING: DATA RACE"))
		}
		if t.Failed() {
			t.Logf("output of %s:\n%s", name, tail(p.out.String(), 6000))
		}
	})
	return p
}

// waitOutput waits until the output matches re and returns the first submatch (or
// the whole match when re has no group).
func (p *process) waitOutput(re string) string {
	p.t.Helper()
	rx := regexp.MustCompile(re)
	var m []string
	eventually(p.t, 60*time.Second, p.name+" printing "+re, func() bool {
		m = rx.FindStringSubmatch(p.out.String())
		if m == nil {
			select {
			case <-p.done:
				p.t.Fatalf("%s exited (%v) before printing %q:\n%s", p.name, p.err, re, tail(p.out.String(), 4000))
			default:
			}
		}
		return m != nil
	})
	return m[len(m)-1]
}

// signal sends sig to the process.
func (p *process) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %s: %v", p.name, err)
	}
}

// wait returns once the process has exited, failing the test after limit.
func (p *process) wait(limit time.Duration) {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(limit):
		p.t.Fatalf("%s still running after %s:\n%s", p.name, limit, tail(p.out.String(), 4000))
	}
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// eventually polls cond every 20 ms until it holds, failing the test after limit.
func eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond) // poll interval, not a wait for an event
	}
}

func excerptAround(s, marker string) string {
	i := strings.Index(s, marker)
	return s[i:min(len(s), i+6000)]
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
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

const sigterm = syscall.SIGTERM
