package web_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/destination"
	"github.com/oncehook/oncehook/internal/engine"
	"github.com/oncehook/oncehook/internal/inbox"
	"github.com/oncehook/oncehook/internal/oauthstore"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/web"
)

// echoConfig has one destination for each kind of credential, all posting to
// one echoing API (%[1]s), two of them through OAuth2's client credentials at
// %[2]s: one granted, one refused.
const echoConfig = `
sources:
  - {name: stripe-live, client: acme, provider: stripe, account: acct_1, environment: live, secret_env: STRIPE_SECRET}
destinations:
  - {name: bearer, type: http, create: {url: "%[1]s/echo"}, auth: {bearer_env: T_BEARER}, timeout: 5s, owner: o@example.com}
  - {name: header, type: http, create: {url: "%[1]s/echo"}, auth: {header: {name: X-Api-Key, value_env: T_HEADER}}, timeout: 5s, owner: o@example.com}
  - {name: basic, type: http, create: {url: "%[1]s/echo"}, auth: {basic: {username: api, password_env: T_BASIC}}, timeout: 5s, owner: o@example.com}
  - name: granted
    type: http
    create: {url: "%[1]s/echo"}
    auth: {oauth2: {grant: client_credentials, token_url: "%[2]s/token", client_id_env: T_ID, client_secret_env: T_CLIENT}}
    timeout: 5s
    owner: o@example.com
  - name: refused
    type: http
    create: {url: "%[1]s/echo"}
    auth: {oauth2: {grant: client_credentials, token_url: "%[2]s/refuse", client_id_env: T_ID, client_secret_env: T_REFUSED}}
    timeout: 5s
    owner: o@example.com
actions:
`

// echoRule is one action rule per destination: which secret the API echoes is
// the checkout's note.
const echoRule = `  - {name: to_%[1]s, source: stripe-live, on: [checkout.session.completed], key: [/data/object/metadata/enquiry_id],
     destination: %[1]s, params: {which: /data/object/metadata/note}, retry: {attempts: 1, within: 1h}}
`

// echoSecrets are every secret the process holds in this test; each starts with
// its own 8 characters, which appear nowhere else.
var echoSecrets = map[string]string{
	"STRIPE_SECRET": dashStripeSecret,
	"T_BEARER":      "Bq7bearer-token-3f9a1c77d2",
	"T_HEADER":      "Hx2header-value-8c1e4b09aa",
	"T_BASIC":       "Pw5basic-password-51d0e3f4",
	"T_CLIENT":      "Cs3client-secret-a7f2c9e1b0",
	"T_REFUSED":     "Rf8refused-secret-0d4c2b71",
	"ACCESS":        "Ac4access-token-6e2b8f1d93",
	"REFRESH":       "Rt6refresh-token-c3a9e5f017",
}

// cutAt is where the API puts the secret in its reply: the start of the
// secret is within the 300 bytes kept as the reason, the rest beyond it.
const cutAt = 290

// TestSecretsStayOutOfReasons: an API that refuses every call with a reply
// quoting one secret across the point where the reason is cut, and a token
// endpoint that refuses with the client secret there. Afterwards no secret the
// process holds, not even its first 8 characters, is in the database, on a page
// or in the API.
func TestSecretsStayOutOfReasons(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	secrets := echoSecretValues()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Which string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, strings.Repeat("x", cutAt)+secrets[body.Which])
	}))
	t.Cleanup(api.Close)
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/refuse" {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client",
				"error_description": strings.Repeat("x", cutAt) + echoSecrets["T_REFUSED"]})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": echoSecrets["ACCESS"],
			"refresh_token": echoSecrets["REFRESH"], "token_type": "bearer", "expires_in": 3600})
	}))
	t.Cleanup(tokens.Close)

	yaml := fmt.Sprintf(echoConfig, api.URL, tokens.URL)
	for _, d := range []string{"bearer", "header", "basic", "granted", "refused"} {
		yaml += fmt.Sprintf(echoRule, d)
	}
	env := map[string]string{"T_ID": "client-id", settings.SecretKeyEnv: oauthEnv[settings.SecretKeyEnv]}
	for k, v := range echoSecrets {
		env[k] = v
	}
	cfg, err := config.Parse("echo.yaml", []byte(yaml), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	d := runEchoSite(t, cfg)
	// The tokens are echoed once the process holds them: after the granted
	// destination's first call has obtained them.
	n := 0
	for _, later := range []bool{false, true} {
		for i := range secrets {
			if later == (i == "ACCESS" || i == "REFRESH") {
				d.checkout(fmt.Sprintf("evt_echo_%s", i), "enq-"+i, i)
				n += 5
			}
		}
		d.waitSettled(n)
	}

	admin := d.person()
	admin.login(adminEmail)
	texts := map[string]string{"database": d.dumpTexts(ctx)}
	for _, path := range []string{"/queue/failed", "/queue/outstanding", "/destinations", "/actions?limit=200"} {
		texts["GET "+path] = admin.get(path).body
	}
	token, err := accounts.CreateToken(ctx, d.pool, "echo", settings.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	texts["API actions"] = apiGet(t, d.url+"/api/v1/actions?limit=200", token)
	texts["API destinations"] = apiGet(t, d.url+"/api/v1/destinations", token)
	var ids []int64
	if err := pgxSelect(ctx, d, `SELECT id FROM actions ORDER BY id`, &ids); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		texts[fmt.Sprintf("GET /actions/%d", id)] = admin.get(fmt.Sprintf("/actions/%d", id)).body
		texts[fmt.Sprintf("API action %d", id)] = apiGet(t, fmt.Sprintf("%s/api/v1/actions/%d", d.url, id), token)
	}
	if !strings.Contains(texts["database"], "x[redacted]") && !strings.Contains(texts["database"], "xxxxxxxx") {
		t.Fatalf("the echoed replies are not in the reasons at all:\n%s", tailOf(texts["database"], 2000))
	}
	for where, text := range texts {
		for name, s := range secrets {
			if strings.Contains(text, s[:8]) {
				i := strings.Index(text, s[:8])
				t.Errorf("%s shows %s (%q)", where, name, text[max(0, i-40):min(len(text), i+40)])
			}
		}
	}
}

// echoSecretValues are echoSecrets by name, with the basic-auth pair as the
// Authorization header carries it.
func echoSecretValues() map[string]string {
	out := map[string]string{}
	for k, v := range echoSecrets {
		out[k] = v
	}
	out["BASIC_PAIR"] = base64.StdEncoding.EncodeToString([]byte("api:" + echoSecrets["T_BASIC"]))
	return out
}

// runEchoSite runs the dashboard, the engine and the OAuth grants for cfg.
func runEchoSite(t *testing.T, cfg *settings.Config) *dashboard {
	t.Helper()
	ctx := context.Background()
	pool := dbtest.New(t)
	tokens, err := oauthstore.OpenTokens(ctx, pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedWriter{w: &strings.Builder{}}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	clients := destination.NewClients(cfg)
	destination.UseOAuth(clients, cfg, tokens, nil)
	review := review.New(pool, cfg, clients)
	srv := httptest.NewServer(web.New(web.Params{Config: cfg, Pool: pool, Inbox: inbox.New(pool, logger, nil),
		Review: review, Logger: logger}))
	t.Cleanup(srv.Close)
	eng := engine.New(engine.Params{Pool: pool, Config: cfg, Clients: clients, Logger: logger,
		Poll: 50 * time.Millisecond, LeaseExtra: 5 * time.Second, BackoffBase: 20 * time.Millisecond,
		BackoffMax: 200 * time.Millisecond, Grace: 2 * time.Second})
	engCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(engCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	if _, err := accounts.CreateUser(ctx, pool, adminEmail, settings.RoleAdmin, password); err != nil {
		t.Fatal(err)
	}
	return &dashboard{t: t, url: srv.URL, pool: pool, cfg: cfg, review: review, logs: logs}
}

// waitSettled polls until n actions exist and none is still in motion: the
// echoing API fails them, the refused grant's destination is disconnected.
func (d *dashboard) waitSettled(n int) {
	d.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var total, resting int
		// A disconnected destination's actions wait, held or still pending.
		err := d.pool.QueryRow(context.Background(), `SELECT count(*),
			count(*) FILTER (WHERE state = 'failed' OR (state IN ('held', 'pending') AND EXISTS (
				SELECT 1 FROM destinations d WHERE d.name = a.destination AND d.status = 'disconnected')))
			FROM actions a`).Scan(&total, &resting)
		if err != nil {
			d.t.Fatal(err)
		}
		if total == n && resting == n {
			return
		}
		if time.Now().After(deadline) {
			var states string
			_ = d.pool.QueryRow(context.Background(), `SELECT string_agg(name || ':' || state || ':' || reason, E'\n')
				FROM actions WHERE state NOT IN ('failed', 'held')`).Scan(&states)
			d.t.Fatalf("%d of %d actions at rest after 60s:\n%s", resting, n, states)
		}
		time.Sleep(25 * time.Millisecond) // poll interval
	}
}

// dumpTexts is every row of the tables that keep what destinations said.
func (d *dashboard) dumpTexts(ctx context.Context) string {
	d.t.Helper()
	var b strings.Builder
	for _, table := range []string{"actions", "attempts", "audit", "destinations", "events"} {
		rows, err := d.pool.Query(ctx, `SELECT row_to_json(t)::text FROM `+table+` t`)
		if err != nil {
			d.t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				d.t.Fatal(err)
			}
			b.WriteString(s + "\n")
		}
		rows.Close()
	}
	return b.String()
}

func pgxSelect(ctx context.Context, d *dashboard, sql string, out *[]int64) error {
	rows, err := d.pool.Query(ctx, sql)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return err
		}
		*out = append(*out, id)
	}
	return rows.Err()
}

func apiGet(t *testing.T, url, token string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, raw)
	}
	return string(raw)
}
