package ledger_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/engine"
	"github.com/oncehook/oncehook/internal/inbox"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sender"
	"github.com/oncehook/oncehook/web"
)

const shopSecret = "shopify-when-secret"

// shopConfig records Shopify orders in a CRM that is never called here; %s is
// the rule's cancelled_by.
const shopConfig = `
sources:
  - {name: shopify, client: acme, provider: shopify, environment: live, secret_env: SHOP_SECRET}
destinations:
  - {name: crm, type: http, create: {url: "http://127.0.0.1:1/records"}, owner: crm@example.com}
actions:
  - name: record_order
    source: shopify
    on: [orders/create]
    key: [/id]
    destination: crm
    params: {order_id: /id, total: /total_price}
    resource: /id
    occurred_at: /updated_at
    cancelled_by: %s
`

// TestCancellationNeedsItsWhen: the body of a captured orders/create delivery,
// signed as Shopify signed it, re-sent under a fresh webhook id with the topic
// orders/cancelled (the topic header is not signed) cancels the pending order
// when cancelled_by names the type alone, and does not when the rule requires
// /cancelled_at; a real cancellation, whose body has it, still cancels.
func TestCancellationNeedsItsWhen(t *testing.T) {
	t.Parallel()
	created, err := os.ReadFile("testdata/shopify_orders_create.json")
	if err != nil {
		t.Fatal(err)
	}
	cancelled := []byte(strings.Replace(strings.Replace(string(created), `"cancelled_at":null`,
		`"cancelled_at":"2026-11-30T11:00:00-05:00"`, 1), `"updated_at":"2026-11-30T10:00:00-05:00"`,
		`"updated_at":"2026-11-30T11:00:00-05:00"`, 1))
	for _, c := range []struct {
		name, cancelledBy string
		forged, real      string // the order's state after the forged, then the real cancellation
		forgedWhy         string // what the forged delivery's event says became of it
	}{
		{"TypeAloneCancelsOnTheSendersWord", "[orders/cancelled]", ledger.StateCancelled, ledger.StateCancelled,
			"cancelled 1 action not yet performed"},
		{"WhenRefusesTheForgedTopic", "[{type: orders/cancelled, when: [{pointer: /cancelled_at}]}]",
			ledger.StatePending, ledger.StateCancelled,
			"record_order: the body does not meet the when of its cancellation by orders/cancelled"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newShop(t, c.cancelledBy)
			s.deliver("wh-create", "orders/create", created)
			if got := s.orderState(); got != ledger.StatePending {
				t.Fatalf("after orders/create: %q, want pending", got)
			}
			s.deliver("wh-forged", "orders/cancelled", created) // the same signed body, another topic
			if got := s.orderState(); got != c.forged {
				t.Errorf("after the re-sent orders/create body as orders/cancelled: %q, want %q", got, c.forged)
			}
			if got := s.eventReason("wh-forged"); got != c.forgedWhy {
				t.Errorf("the forged cancellation's event says %q, want %q", got, c.forgedWhy)
			}
			s.deliver("wh-cancel", "orders/cancelled", cancelled)
			if got := s.orderState(); got != c.real {
				t.Errorf("after a real orders/cancelled: %q, want %q", got, c.real)
			}
		})
	}
}

type shop struct {
	t     *testing.T
	url   string
	eng   *engine.Engine
	state func() string // the order's action's state
	pool  *pgxpool.Pool
}

// eventReason is what routing noted of the delivery with this webhook id.
func (s *shop) eventReason(webhookID string) string {
	s.t.Helper()
	var why string
	if err := s.pool.QueryRow(context.Background(), `SELECT reason FROM events WHERE source_event_id = $1`, webhookID).Scan(&why); err != nil {
		s.t.Fatal(err)
	}
	return why
}

func newShop(t *testing.T, cancelledBy string) *shop {
	t.Helper()
	pool := dbtest.New(t)
	cfg, err := config.Parse("shop.yaml", []byte(fmt.Sprintf(shopConfig, cancelledBy)),
		func(k string) string { return map[string]string{"SHOP_SECRET": shopSecret}[k] })
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	srv := httptest.NewServer(web.New(web.Params{Config: cfg, Pool: pool, Inbox: inbox.New(pool, logger, nil),
		Review: review.New(pool, cfg, nil), Logger: logger}))
	t.Cleanup(srv.Close)
	s := &shop{t: t, url: srv.URL, pool: pool, eng: engine.New(engine.Params{Pool: pool, Config: cfg, Logger: logger})}
	s.state = func() string {
		var st string
		if err := pool.QueryRow(context.Background(), `SELECT state FROM actions WHERE name = 'record_order'`).Scan(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	return s
}

// deliver posts body as Shopify would under topic, and routes it.
func (s *shop) deliver(id, topic string, body []byte) {
	s.t.Helper()
	hdr, err := sender.Headers("shopify", shopSecret, sender.Delivery{ID: id, Type: topic, Body: body})
	if err != nil {
		s.t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, s.url+"/hooks/shopify", strings.NewReader(string(body)))
	req.Header = hdr
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		s.t.Fatalf("deliver %s (%s): %d", id, topic, res.StatusCode)
	}
	if _, err := s.eng.RouteBatch(context.Background(), 10); err != nil {
		s.t.Fatal(err)
	}
}

func (s *shop) orderState() string { return s.state() }
