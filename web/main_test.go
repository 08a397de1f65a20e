package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/inbox"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sender"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/web"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// Secrets of the test config; the secret test checks that none of them leaks.
var testEnv = map[string]string{
	"STRIPE_SECRET":   "whsec_test_stripe_secret",
	"GITHUB_SECRET":   "test-github-secret",
	"SHOPIFY_SECRET":  "test-shopify-secret",
	"STANDARD_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	"CRM_TOKEN":       "test-crm-token",
}

const testConfig = `
listen: 127.0.0.1:0
sources:
  - {name: stripe-live, client: acme, provider: stripe, account: acct_1, environment: live, secret_env: STRIPE_SECRET, max_body: 4KiB}
  - {name: gh, client: acme, provider: github, account: org, environment: live, secret_env: GITHUB_SECRET}
  - {name: shop, client: acme, provider: shopify, account: shop1, environment: live, secret_env: SHOPIFY_SECRET}
  - {name: std, client: beta, provider: standard-webhooks, account: a1, environment: test, secret_env: STANDARD_SECRET}
destinations:
  - name: crm
    type: http
    create: {method: POST, url: "http://127.0.0.1:1/opportunities"}
    auth: {bearer_env: CRM_TOKEN}
    owner: crm-admin@example.com
actions: []
`

// harness is a running oncehook HTTP server on a fresh database.
type harness struct {
	t    *testing.T
	url  string
	pool *pgxpool.Pool
	cfg  *settings.Config
	logs *lockedWriter
}

// eventsRead stands for events as the readers see them (a subquery to name), with each event's bytes
// from event_bodies (or from its own row, for one stored before event_bodies).
const eventsRead = `(SELECT e.id, e.client, e.source, e.source_event_id, e.status, e.conflict, e.deliveries,
	coalesce(b.body, e.body) AS body, coalesce(b.headers, e.headers) AS headers
	FROM events e LEFT JOIN event_bodies b ON b.client = e.client AND b.event_id = e.id AND b.day = e.body_day)`

func newHarness(t *testing.T, yaml string, pool *pgxpool.Pool) *harness {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml), func(k string) string { return testEnv[k] })
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if pool == nil {
		pool = dbtest.New(t)
	}
	logs := &lockedWriter{w: &bytes.Buffer{}}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := web.New(web.Params{Config: cfg, Pool: pool, Inbox: inbox.New(pool, logger, nil),
		Review: review.New(pool, cfg, nil), Logger: logger})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &harness{t: t, url: srv.URL, pool: pool, cfg: cfg, logs: logs}
}

// post sends a webhook for source signed as its provider would.
func (h *harness) post(source string, d sender.Delivery) (int, map[string]any) {
	h.t.Helper()
	src, ok := h.cfg.Source(source)
	if !ok {
		h.t.Fatalf("no source %s", source)
	}
	hdr, err := sender.Headers(src.Provider, testEnv[src.SecretEnv], d)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.do(http.MethodPost, "/hooks/"+source, hdr, d.Body)
}

func (h *harness) do(method, path string, hdr http.Header, body []byte) (int, map[string]any) {
	h.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, h.url+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}

func (h *harness) count(sql string, args ...any) int {
	h.t.Helper()
	var n int
	if err := h.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		h.t.Fatalf("%s: %v", sql, err)
	}
	return n
}
