package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemo runs `oncehook demo` for about a minute, as a newcomer would, and checks
// through the JSON API that every queue filled and that the sandbox CRM holds one
// record per operation, and on its output that the login is the last thing on
// screen once the script has played out and more traffic has come.
func TestDemo(t *testing.T) {
	dir, err := os.MkdirTemp("/tmp", "ohdemo-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(dir, "pg")
	const crmToken = "demo-test-crm-token"
	env := []string{"DATABASE_URL=", "CRM_TOKEN=" + crmToken}
	p := start(t, env, "demo", "--config", "../../examples/oncehook.example.yaml", "--data-dir", dataDir,
		"--listen", "127.0.0.1:0", "--crm", "127.0.0.1:0", "--mail", "127.0.0.1:0", "--pace", "300ms")
	base := regexp.MustCompile(`http://\S+`).FindString(p.waitOutput(t, `Dashboard:\s+http://\S+`))
	base = strings.TrimSuffix(base, "/")
	login := p.waitOutput(t, `Login:\s+\S+\s+/\s+\S+`)
	if !regexp.MustCompile(`admin@example.com\s+/\s+\S{12}`).MatchString(login) {
		t.Errorf("login line %q; want the admin's email and a random password", login)
	}
	crmURL := strings.TrimPrefix(p.waitOutput(t, `Sandbox CRM records: http://\S+`), "Sandbox CRM records: ")
	mailURL := strings.TrimPrefix(p.waitOutput(t, `Mail sink messages:\s+http://\S+`), "Mail sink messages:")
	mailURL = strings.TrimSpace(mailURL)

	tok := start(t, env, "token", "create", "--name", "demo-test", "--role", "admin", "--data-dir", dataDir)
	if err := tok.cmd.Wait(); err != nil {
		t.Fatalf("token create beside the demo: %v\n%s", err, tok.out.String())
	}
	token := strings.TrimSpace(regexp.MustCompile(`(?m)^ohk_\S+$`).FindString(tok.out.String()))

	get := func(url, bearer string, into any) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer "+bearer)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("GET %s: %d", url, res.StatusCode)
		}
		if err := json.NewDecoder(res.Body).Decode(into); err != nil {
			t.Fatal(err)
		}
	}
	var summary struct {
		Queues map[string]int `json:"queues"`
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		get(base+"/api/v1/summary", token, &summary)
		q := summary.Queues
		if q["outstanding"] > 0 && q["uncertain"] > 0 && q["failed"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("queues never all filled: %v\n%s", q, tail(p.out.String(), 3000))
		}
		time.Sleep(500 * time.Millisecond) // poll interval
	}

	// The demo's trouble leaves what a person practises on: a CRM 422 failed for
	// someone to correct, and work assigned to the admin who signs in.
	var open struct {
		Actions []struct {
			Name   string `json:"name"`
			Reason string `json:"reason"`
			Owner  string `json:"owner"`
			State  string `json:"state"`
		} `json:"actions"`
	}
	deadline = time.Now().Add(60 * time.Second)
	for {
		get(base+"/api/v1/actions?state=failed,uncertain&limit=500", token, &open)
		rejected, mine := false, 0
		for _, a := range open.Actions {
			rejected = rejected || a.Name == "open_opportunity" && a.State == "failed" && strings.Contains(a.Reason, "HTTP 422")
			if a.Owner == "admin@example.com" {
				mine++
			}
		}
		if rejected && mine > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no CRM 422 failed action (%v) or nothing assigned to the admin (%d): %+v", rejected, mine, open.Actions)
		}
		time.Sleep(500 * time.Millisecond) // poll interval
	}
	// The mail sink has a viewer beside the CRM's records.
	var messages []struct {
		To      []string `json:"to"`
		Subject string   `json:"subject"`
	}
	get(mailURL, "", &messages)
	if len(messages) == 0 {
		t.Errorf("the mail viewer at %s lists no message", mailURL)
	}

	// Every owner the example config names has an account, so /mine works at once;
	// `check --owners` reaches the demo's own database to say so.
	chk := start(t, env, "check", "--config", "../../examples/oncehook.example.yaml", "--skip-env", "--owners", "--data-dir", dataDir)
	if err := chk.cmd.Wait(); err != nil || !strings.Contains(chk.out.String(), "Every owner has an account.") {
		t.Errorf("check --owners beside the demo: %v\n%s", err, tail(chk.out.String(), 1500))
	}

	var records []map[string]any
	get(crmURL, crmToken, &records)
	perRef := map[string]int{}
	for _, r := range records {
		perRef[fmt.Sprint(r["source_ref"])]++
	}
	for ref, n := range perRef {
		if n != 1 {
			t.Errorf("the CRM holds %d records for operation %s, want 1", n, ref)
		}
	}
	var confirmed struct {
		Actions []struct {
			OperationKey string `json:"operation_key"`
			Name         string `json:"name"`
		} `json:"actions"`
	}
	get(base+"/api/v1/actions?state=confirmed&limit=500", token, &confirmed)
	crmConfirmed := 0
	for _, a := range confirmed.Actions {
		if a.Name != "send_welcome_email" && a.Name != "send_receipt" {
			crmConfirmed++
			if perRef[a.OperationKey] != 1 {
				t.Errorf("confirmed %s %s has %d CRM records", a.Name, a.OperationKey, perRef[a.OperationKey])
			}
		}
	}
	if crmConfirmed == 0 || len(records) == 0 {
		t.Errorf("nothing reached the CRM: %d records, %d confirmed", len(records), crmConfirmed)
	}

	// Once the script has played out the banner comes again, and the traffic
	// that keeps coming leaves it the last thing on screen.
	p.waitOutputWithin(t, bannerPlayed, 120*time.Second)
	newest := func() string {
		var page struct {
			Events []struct {
				ID string `json:"id"`
			} `json:"events"`
		}
		get(base+"/api/v1/events?limit=1", token, &page)
		if len(page.Events) == 0 {
			return ""
		}
		return page.Events[0].ID
	}
	before := newest()
	deadline = time.Now().Add(60 * time.Second)
	for newest() == before {
		if time.Now().After(deadline) {
			t.Fatalf("no new event after the last banner (newest %s)", before)
		}
		time.Sleep(200 * time.Millisecond) // poll interval
	}
	checkBannerLast(t, p.out.String())

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
	if _, err := os.Stat(filepath.Join(dataDir, "postmaster.pid")); !os.IsNotExist(err) {
		t.Errorf("Postgres still running after Ctrl-C")
	}
	waitNoPostgres(t, dataDir)
}

// bannerPlayed starts the banner the demo shows once its script has played out.
const bannerPlayed = `oncehook demo: the script has played out`

// checkBannerLast fails unless the demo's output ends with its last banner: the
// URL, the login, and nothing after the closing line.
func checkBannerLast(t *testing.T, out string) {
	t.Helper()
	i := strings.LastIndex(out, bannerPlayed)
	if i < 0 {
		t.Fatalf("no %q in output:\n%s", bannerPlayed, tail(out, 3000))
	}
	last := out[i:]
	for _, re := range []string{`Dashboard:\s+http://\S+`, `Login:\s+admin@example.com\s+/\s+\S{12}`} {
		if !regexp.MustCompile(re).MatchString(last) {
			t.Errorf("the last banner has no %s:\n%s", re, last)
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(last), "'oncehook demo --reset' starts clean.") {
		t.Errorf("output after the last banner; want the banner last:\n%s", tail(out, 3000))
	}
}

func (p *process) waitOutputWithin(t *testing.T, re string, d time.Duration) string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if m := rx.FindString(p.out.String()); m != "" {
			return m
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	t.Fatalf("no %q in output within %s:\n%s", re, d, tail(p.out.String(), 3000))
	return ""
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
