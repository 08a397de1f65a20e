package web_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/backfill"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/inbox"
	"github.com/oncehook/oncehook/internal/provider"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/web"
)

// TestSourcesPageShowsBackfillPasses: after a pass, /sources says what it found, and
// after a failing one, why.
func TestSourcesPageShowsBackfillPasses(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	api := &sandbox.StripeAPI{Key: "rk_test_page"}
	apiSrv := httptest.NewServer(api.Handler())
	t.Cleanup(apiSrv.Close)
	now := time.Now().Unix()
	for i := range 3 {
		api.Add(sandbox.StripeEvent{ID: fmt.Sprintf("evt_page_%d", i), Type: "checkout.session.completed", Created: now - int64(i),
			Object: map[string]any{"metadata": map[string]any{"enquiry_id": fmt.Sprint(i)}}})
	}
	yaml := fmt.Sprintf(`
sources:
  - name: stripe-bf
    client: acme
    provider: stripe
    environment: live
    secret_env: S
    backfill: {api_key_env: K, api_url: "%s"}
destinations:
  - {name: crm, type: http, create: {url: "http://127.0.0.1:1/x"}}
actions:
  - {name: a, source: stripe-bf, on: [checkout.session.completed], key: [/data/object/metadata/enquiry_id], destination: crm}
`, apiSrv.URL)
	env := map[string]string{"S": "whsec_page", "K": "rk_test_page"}
	cfg, err := config.Parse("page.yaml", []byte(yaml), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &strings.Builder{}}, nil))
	inbox := inbox.New(pool, logger, nil)
	t.Cleanup(inbox.Close)
	srv := httptest.NewServer(web.New(web.Params{Config: cfg, Pool: pool, Inbox: inbox,
		Review: review.New(pool, cfg, nil), Logger: logger}))
	t.Cleanup(srv.Close)
	if _, err := accounts.CreateUser(context.Background(), pool, opsEmail, settings.RoleOperator, password, cfg.Clients()...); err != nil {
		t.Fatal(err)
	}
	p := (&dashboard{t: t, url: srv.URL}).person()
	p.login(opsEmail)
	if body := p.get("/sources").body; !strings.Contains(body, "not yet") {
		t.Errorf("/sources before the first pass lacks 'not yet'")
	}

	bf := backfill.New(backfill.Params{Pool: pool, Config: cfg, Inbox: inbox,
		Clients: provider.NewBackfillClients(cfg), Logger: logger, Owner: "page"})
	bf.RunDue(context.Background(), true)
	body := p.get("/sources").body
	if !strings.Contains(body, "3 listed, 3 missing, 3 stored") {
		t.Errorf("/sources does not say what the pass found:\n%s", tailOf(body, 2000))
	}
	if !strings.Contains(body, `href="/events?source=stripe-bf&amp;via=backfill"`) {
		t.Errorf("/sources does not link the backfilled events")
	}
	if list := p.get("/events?source=stripe-bf&via=backfill").body; strings.Count(list, `class="via">backfill<`) != 3 {
		t.Errorf("the events list does not show the 3 backfilled events")
	}

	api.Fail(sandbox.StripeFault{Status: 401, Times: 2})
	bf.RunDue(context.Background(), true)
	bf.RunDue(context.Background(), true)
	if body := p.get("/sources").body; !strings.Contains(body, "Stripe refused the credentials (401)") ||
		!strings.Contains(body, "2 passes failed in a row") {
		t.Errorf("/sources does not show the failing pass:\n%s", tailOf(body, 2000))
	}
}
