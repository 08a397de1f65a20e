package deploy_test

import (
	"bufio"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/config"
)

// composeFile is the part of compose.yaml the test reads.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	EnvFile     []string          `yaml:"env_file"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Healthcheck struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
}

const configInImage = "/etc/oncehook/oncehook.yaml"

func readCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return c
}

// TestComposeWiring checks the order of start, the config mount and the secrets:
// migrations once before the others, every variable the example config names in the
// env file.
func TestComposeWiring(t *testing.T) {
	t.Parallel()
	c := readCompose(t)
	oncehook := []string{"migrate", "serve", "worker"}
	for _, name := range append([]string{"postgres"}, oncehook...) {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("compose.yaml has no %s service", name)
		}
	}
	if got := c.Services["migrate"].DependsOn["postgres"].Condition; got != "service_healthy" {
		t.Errorf("migrate waits for postgres with %q, want service_healthy", got)
	}
	if len(c.Services["postgres"].Healthcheck.Test) == 0 {
		t.Error("postgres has no health check for migrate to wait on")
	}
	names := exampleConfigEnv(t)
	provided := envFileNames(t, ".env.example")
	for _, name := range oncehook {
		s := c.Services[name]
		if name != "migrate" && s.DependsOn["migrate"].Condition != "service_completed_successfully" {
			t.Errorf("%s does not wait for migrate to complete successfully: %+v", name, s.DependsOn)
		}
		if !strings.Contains(s.Environment["DATABASE_URL"], "@postgres:5432/") {
			t.Errorf("%s: DATABASE_URL %q does not reach the postgres service", name, s.Environment["DATABASE_URL"])
		}
		if !slices.Contains(s.EnvFile, ".env") {
			t.Errorf("%s: secrets do not come from the env file .env: env_file %v", name, s.EnvFile)
		}
		if len(s.Volumes) != 1 || !strings.HasSuffix(s.Volumes[0], ":"+configInImage+":ro") {
			t.Errorf("%s: the config is not mounted read-only at %s: %v", name, configInImage, s.Volumes)
		}
		if name != "migrate" && !slices.Contains(s.Command, configInImage) {
			t.Errorf("%s: command %v does not read the mounted config", name, s.Command)
		}
	}
	for _, v := range names {
		if !provided[v] {
			t.Errorf("the example config names %s, which .env.example does not provide", v)
		}
	}
	if !provided["POSTGRES_PASSWORD"] {
		t.Error(".env.example does not provide POSTGRES_PASSWORD, which compose.yaml needs")
	}
}

// TestComposeCommandsRun runs each oncehook service's command with the real binary
// against the test Postgres (ports moved to free ones), and then its health check,
// which must pass: commands and flags exist, and the probes hit real paths.
func TestComposeCommandsRun(t *testing.T) {
	t.Parallel()
	c := readCompose(t)
	bin := buildBinary(t)
	_, dsn := dbtest.NewDSN(t)
	config, err := filepath.Abs("../examples/oncehook.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "DATABASE_URL="+dsn)
	for k, v := range exampleEnv {
		env = append(env, k+"="+v)
	}
	migrate := exec.Command(bin, c.Services["migrate"].Command...)
	migrate.Env = env
	if out, err := migrate.CombinedOutput(); err != nil {
		t.Fatalf("migrate %v: %v\n%s", c.Services["migrate"].Command, err, out)
	}
	for _, name := range []string{"serve", "worker"} {
		s := c.Services[name]
		probe := s.Healthcheck.Test
		if len(probe) != 4 || probe[0] != "CMD" || probe[1] != "/usr/local/bin/oncehook" || probe[2] != "probe" {
			t.Fatalf("%s: health check %v is not [CMD /usr/local/bin/oncehook probe URL]", name, probe)
		}
		u, err := url.Parse(probe[3])
		if err != nil || u.Path != "/readyz" {
			t.Errorf("%s: health check URL %q does not ask /readyz", name, probe[3])
		}
		port := freePort(t)
		args := slices.Clone(s.Command)
		for i, a := range args {
			switch {
			case a == configInImage:
				args[i] = config
			case a == ":"+u.Port():
				args[i] = "127.0.0.1:" + port
			}
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(env, "PORT="+port) // the image sets PORT; serve listens on it
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		u.Host = "127.0.0.1:" + port
		deadline := time.Now().Add(60 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			out, err := exec.CommandContext(ctx, bin, "probe", u.String()).CombinedOutput()
			cancel()
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: health check %s kept failing: %v\n%s", name, u, err, out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// exampleConfigEnv returns the environment variables the example config names.
func exampleConfigEnv(t *testing.T) []string {
	t.Helper()
	var names []string
	_, err := config.Load("../examples/oncehook.example.yaml", func(k string) string {
		names = append(names, k)
		return exampleEnv[k]
	})
	if err != nil {
		t.Fatalf("example config: %v", err)
	}
	if len(names) == 0 {
		t.Fatal("the example config names no variables; the test reads nothing")
	}
	return names
}

// envFileNames returns the names an env file sets.
func envFileNames(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if name, _, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			names[name] = true
		}
	}
	return names
}

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "oncehook")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/oncehook").CombinedOutput(); err != nil {
		t.Fatalf("build oncehook: %v\n%s", err, out)
	}
	return bin
}
