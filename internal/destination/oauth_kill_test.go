package destination

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/oauthstore"
	"github.com/oncehook/oncehook/internal/sandbox/authserver"
	"github.com/oncehook/oncehook/internal/settings"
)

// oauthChildEnv carries the child's config, environment and database to it.
const oauthChildEnv = "ONCEHOOK_OAUTH_CHILD"

type oauthChild struct {
	YAML string
	Env  map[string]string
	DSN  string
}

// runOAuthChild is a process that performs one call, whose 401 makes it refresh the
// grant; once the rotated grant is committed it says so on stdout and waits there,
// before using the new access token, until the parent kills it.
func runOAuthChild() {
	var in oauthChild
	if err := json.Unmarshal([]byte(os.Getenv(oauthChildEnv)), &in); err != nil {
		fmt.Fprintln(os.Stderr, "child input:", err)
		os.Exit(2)
	}
	cfg, err := config.Parse("oauth.yaml", []byte(in.YAML), func(k string) string { return in.Env[k] })
	if err != nil {
		fmt.Fprintln(os.Stderr, "child config:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	pool, err := db.Open(ctx, in.DSN, 4)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child database:", err)
		os.Exit(2)
	}
	tokens := stopAfterRefresh{TokenStore: oauthstore.New(pool, cfg.SecretKeys), stop: func() error {
		fmt.Println("stored")
		select {} // killed here
	}}
	h := NewHTTP(cfg.Destinations[0], nil)
	h.oauth = NewOAuth(cfg.Destinations[0], tokens, http.DefaultClient, nil)
	h.Perform(ctx, ledger.Call{OperationKey: "op-1", Params: []byte(`{"amount": 1}`)})
	fmt.Fprintln(os.Stderr, "child: the call returned; it never stopped after a refresh")
	os.Exit(3)
}

// A process killed (SIGKILL) right after committing a refreshed grant whose refresh
// token the provider rotated, before it used the new access token: the next
// process finds the rotated grant, uses it and refreshes with it; the old refresh
// token is worthless by then, so had the grant not been stored first, it was lost.
func TestOAuthRotatedRefreshTokenSurvivesAKill(t *testing.T) {
	e := newOAuthEnv(t, settings.GrantAuthorizationCode, authserver.Params{NoExpiry: true})
	a := e.process(t)
	connectByHand(t, e, a)
	_, before := e.as.Issued()
	e.as.ExpireAccess()
	requests := len(e.crm.Requests())

	payload, err := json.Marshal(oauthChild{YAML: e.yaml, Env: e.env, DSN: e.dsn})
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), oauthChildEnv+"="+string(payload))
	var stderr strings.Builder
	child.Stderr = &stderr
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	stored := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "stored" {
				stored <- true
				return
			}
		}
		stored <- false
	}()
	select {
	case ok := <-stored:
		if !ok {
			_ = child.Wait()
			t.Fatalf("the child ended before storing a refreshed grant: %s", stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = child.Process.Kill()
		t.Fatalf("the child stored no refreshed grant within 30 s: %s", stderr.String())
	}
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	if n := len(e.crm.Requests()) - requests; n != 1 {
		t.Fatalf("%d requests reached the CRM, want only the 401 before the refresh", n)
	}
	oc := NewOAuth(e.dest, a.tokens, http.DefaultClient, nil)
	if _, err := oc.fetch(context.Background(), ledger.OAuthToken{Refresh: before[0]}); err == nil ||
		!strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("the old refresh token still works (%v): rotation is not being tested", err)
	}
	b := e.process(t)
	wantObserved(t, perform(t, b, "op-1"), ledger.ObsSuccess)
	e.as.ExpireAccess()
	wantObserved(t, perform(t, b, "op-2"), ledger.ObsSuccess)
	for _, ref := range []string{"op-1", "op-2"} {
		if n := e.crm.CountByRef(ref); n != 1 {
			t.Errorf("%s: %d records, want 1", ref, n)
		}
	}
	if n := e.as.Grants("refresh_token"); n != 2 {
		t.Errorf("%d refreshes, want 2 (the killed process's and the new one's)", n)
	}
}
