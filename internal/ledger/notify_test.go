package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/destination"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/notify"
	"github.com/oncehook/oncehook/internal/provider"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// digestSink is a chat tool's webhook endpoint: it verifies each digest the way a
// Standard Webhooks receiver would and keeps it.
type digestSink struct {
	mu      sync.Mutex
	digests []map[string]any
	bad     int
}

const notifySecret = "whsec_bm90aWZ5LXNlY3JldA=="

func (d *digestSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	_, err := provider.Verify(provider.VerifyParams{Provider: ledger.ProviderStandardWebhooks,
		Secrets: []string{notifySecret}, Now: time.Now(), // the test moves the notifier's clock ahead
		Header: r.Header, Body: body})
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.bad++
		http.Error(w, err.Error(), 401)
		return
	}
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	d.digests = append(d.digests, m)
}

func (d *digestSink) all() []map[string]any {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]map[string]any(nil), d.digests...)
}

func TestNotifyOwners(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	sink := &digestSink{}
	hook := httptest.NewServer(sink)
	t.Cleanup(hook.Close)
	ownerMail, err := sandbox.StartMail("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ownerMail.Close)
	cfg, err := config.Parse("notify.yaml", []byte(w.yaml+fmt.Sprintf(`
base_url: https://oncehook.example.com
notify:
  every: 15m
  uncertain_after: 30m
  smtp: {addr: %q, from: oncehook@example.com}
  webhook: {url: %q, secret_env: NOTIFY_SECRET}
`, ownerMail.Addr(), hook.URL)), func(k string) string {
		return map[string]string{"STRIPE_SECRET": stripeSecret, "CRM_TOKEN": crmToken, "NOTIFY_SECRET": notifySecret}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	n := notify.New(notify.Params{Pool: w.pool, Config: cfg, Mail: destination.NewSMTP(cfg.Notify.SMTP.Destination())})

	w.crm.Fail(sandbox.Fault{Status: 422, Message: "bad amount"})
	w.deliver(checkout{eventID: "evt_n1", enquiry: "enq_n1"})
	failed := w.waitFor("open_opportunity", "enq_n1", "failed")
	now := time.Now()
	if sent, err := n.NotifyOnce(context.Background(), now); err != nil || sent != 1 {
		t.Fatalf("first run: sent %d, %v; want one digest", sent, err)
	}
	msgs := ownerMail.Messages()
	if len(msgs) != 1 || msgs[0].To[0] != "sales-ops@example.com" ||
		!strings.Contains(msgs[0].Body, "https://oncehook.example.com/actions/"+failed.ID) || !strings.Contains(msgs[0].Body, "bad amount") {
		t.Fatalf("owner mail %+v; want one digest to the rule's owner linking the action", msgs)
	}
	if !strings.Contains(msgs[0].Body, "1 action needs you in oncehook") || msgs[0].Subject != "oncehook: 1 action needs you" {
		t.Errorf("the digest %q says %q; want it to count its one action in words", msgs[0].Subject, msgs[0].Body)
	}
	if d := sink.all(); len(d) != 1 || d[0]["owner"] != "sales-ops@example.com" || sink.bad != 0 {
		t.Fatalf("webhook digests %v (bad signatures %d)", d, sink.bad)
	}

	t.Run("NothingTwiceForSameItemAndState", func(t *testing.T) {
		if sent, _ := n.NotifyOnce(context.Background(), now.Add(time.Hour)); sent != 0 {
			t.Errorf("sent %d digests for an item already reported", sent)
		}
	})
	t.Run("OneDigestPerOwnerPerInterval", func(t *testing.T) {
		w.crm.Fail(sandbox.Fault{Status: 422, Message: "bad amount again"})
		w.deliver(checkout{eventID: "evt_n2", enquiry: "enq_n2"})
		w.waitFor("open_opportunity", "enq_n2", "failed")
		if sent, _ := n.NotifyOnce(context.Background(), now.Add(time.Minute)); sent != 0 {
			t.Errorf("a second digest within 15 minutes of the first")
		}
		if sent, _ := n.NotifyOnce(context.Background(), now.Add(20*time.Minute)); sent != 1 {
			t.Errorf("no digest after the interval passed")
		}
		if n := len(ownerMail.Messages()); n != 2 {
			t.Errorf("%d owner mails, want 2", n)
		}
	})
	t.Run("HeldGoesToConnectionOwner", func(t *testing.T) {
		w.crm.SetToken("rotated")
		w.deliver(checkout{eventID: "evt_n3", enquiry: "enq_n3"})
		w.waitFor("open_opportunity", "enq_n3", "held")
		if sent, _ := n.NotifyOnce(context.Background(), now.Add(2*time.Hour)); sent != 1 {
			t.Fatalf("held action not reported")
		}
		last := ownerMail.Messages()[len(ownerMail.Messages())-1]
		if last.To[0] != "crm-admin@example.com" || !strings.Contains(last.Body, "[held]") {
			t.Errorf("held digest %+v; want it sent to the destination's owner", last)
		}
	})
}
