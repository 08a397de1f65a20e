package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const importConfig = `
sources:
  - {name: gh, client: acme, provider: github, account: org, environment: live, secret_env: GH_SECRET}
destinations:
  - {name: crm, type: http, create: {url: "http://127.0.0.1:9/x"}, owner: a@example.com}
actions:
  - {name: open_task, source: gh, on: [issues], key: [/issue/id], destination: crm}
`

// TestImportCommand: oncehook import, a real process on an embedded Postgres: a
// dry run records nothing, the import records the file, the same file again
// records nothing more, and a bad file fails with its lines and loads nothing.
func TestImportCommand(t *testing.T) {
	if _, err := exec.LookPath("initdb"); err != nil {
		if _, err := os.Stat("/usr/lib/postgresql"); err != nil {
			t.Skip("no PostgreSQL binaries on this machine")
		}
	}
	dir, err := os.MkdirTemp("/tmp", "ohimp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "oncehook.yaml")
	ops := filepath.Join(dir, "ops.jsonl")
	bad := filepath.Join(dir, "bad.jsonl")
	third := filepath.Join(dir, "third.jsonl")
	good := `{"action":"open_task","key":["1"],"external_ref":"task_1","performed_at":"2026-11-30T10:00:00Z"}
{"action":"open_task","key":["2"],"external_ref":"task_2","performed_at":"2026-11-30T10:00:00Z"}
`
	line3 := `{"action":"open_task","key":["3"],"external_ref":"task_3","performed_at":"2026-11-30T10:00:00Z"}` + "\n"
	for name, text := range map[string]string{cfg: importConfig, ops: good, third: line3,
		bad: line3 + `{"action":"open_task","key":["4"],"performed_at":"2026-11-30T10:00:00Z"}` + "\n"} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	importing := func(args ...string) (string, error) {
		cmd := exec.Command(binary, append([]string{"import", "--config", cfg, "--data-dir", filepath.Join(dir, "pg"),
			"--client", "acme", "--by", "ada"}, args...)...)
		cmd.Env = append(os.Environ(), "DATABASE_URL=", "GH_SECRET=s")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{ops, "--dry-run"}, ops + ": 2 operations; dry run, nothing recorded: would record 2 as confirmed actions (open_task 2); 0 already recorded the same way"},
		{[]string{ops}, ops + ": 2 operations; recorded 2 as confirmed actions (open_task 2); 0 already recorded the same way"},
		{[]string{ops}, ops + ": 2 operations; recorded 0 as confirmed actions; 2 already recorded the same way"},
	} {
		out, err := importing(step.args...)
		if err != nil || !strings.Contains(out, step.want) {
			t.Fatalf("import %v: %v\n%s\nwant %q", step.args, err, out, step.want)
		}
	}
	out, err := importing(bad)
	if err == nil || !strings.Contains(out, bad+":2: no \"external_ref\"") || !strings.Contains(out, "nothing was loaded") {
		t.Errorf("import of a bad file: %v\n%s", err, out)
	}
	// The bad file's good line was not loaded.
	if out, err := importing(third); err != nil || !strings.Contains(out, "recorded 1 as confirmed actions") {
		t.Errorf("after the bad file: %v\n%s", err, out)
	}
	// A .csv file is read as CSV.
	sheet := filepath.Join(dir, "sheet.csv")
	if err := os.WriteFile(sheet, []byte("action,key,external_ref,performed_at\nopen_task,9,task_9,2026-11-30T10:00:00Z\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := importing(sheet); err != nil || !strings.Contains(out, "recorded 1 as confirmed actions (open_task 1)") {
		t.Errorf("a csv file: %v\n%s", err, out)
	}
	// The client's ledger, exported and imported into the same instance: all of
	// it is here already.
	ledgerFile := filepath.Join(dir, "acme.ledger")
	export := exec.Command(binary, "export", "--config", cfg, "--data-dir", filepath.Join(dir, "pg"), "--client", "acme",
		"--out", ledgerFile)
	export.Env = append(os.Environ(), "DATABASE_URL=", "GH_SECRET=s")
	if out, err := export.CombinedOutput(); err != nil || !strings.Contains(string(out), "exported the ledger of acme: 4 actions") {
		t.Fatalf("export: %v\n%s", err, out)
	}
	out, err = importing("--ledger", ledgerFile)
	if err != nil || !strings.Contains(out, "added 0 actions (4 here already the same way)") {
		t.Errorf("import --ledger: %v\n%s", err, out)
	}
}
