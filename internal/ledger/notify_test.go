package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/destination"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/notify"
	"github.com/oncehook/oncehook/internal/provider"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/sender"
	"github.com/oncehook/oncehook/internal/settings"
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

// notifier returns a Notifier of w's config with both channels, every 15 minutes:
// mail to the returned sink, Standard Webhooks posts to the returned digestSink.
func (w *world) notifier() (*notify.Notifier, *sandbox.Mail, *digestSink) {
	w.t.Helper()
	sink := &digestSink{}
	hook := httptest.NewServer(sink)
	w.t.Cleanup(hook.Close)
	ownerMail, err := sandbox.StartMail("127.0.0.1:0")
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(ownerMail.Close)
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
		w.t.Fatal(err)
	}
	return notify.New(notify.Params{Pool: w.pool, Config: cfg, Mail: destination.NewSMTP(cfg.Notify.SMTP.Destination())}), ownerMail, sink
}

func TestNotifyOwners(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	n, ownerMail, sink := w.notifier()

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

// A digest holds only what its reader may see: the CRM's owner, an operator of acme
// alone, is told of acme's held action and never of beta's, whose key, reason and
// count stay out of the mail and the webhook. Without an account, the same owner is
// told of both: the config itself named them the CRM's owner.
func TestDigestsKeepToTheReadersScope(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{yaml: betaClient})
	n, ownerMail, sink := w.notifier()

	w.crm.SetToken("rotated") // the CRM refuses oncehook's token: both clients' actions are held
	w.deliver(checkout{eventID: "evt_scope_acme", enquiry: "enq_scope_acme"})
	body := checkout{eventID: "evt_scope_beta", enquiry: "enq_scope_beta"}.body()
	hdr, err := sender.Headers("stripe", stripeSecret, sender.Delivery{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if status, out := w.request("POST", "/hooks/stripe-beta", hdr, body); status != http.StatusOK {
		t.Fatalf("deliver beta's event: %d %v", status, out)
	}
	w.waitFor("open_opportunity", "enq_scope_acme", "held")
	w.waitFor("beta_checkout", "enq_scope_beta", "held")

	if _, err := accounts.CreateUser(context.Background(), w.pool, "crm-admin@example.com", settings.RoleOperator,
		"correct horse battery staple", "acme"); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := n.NotifyOnce(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	var toCRMAdmin []sandbox.Message
	for _, m := range ownerMail.Messages() {
		if m.To[0] == "crm-admin@example.com" {
			toCRMAdmin = append(toCRMAdmin, m)
		}
	}
	if len(toCRMAdmin) != 1 || !strings.Contains(toCRMAdmin[0].Body, "enq_scope_acme") {
		t.Fatalf("the CRM's owner got %+v; want one digest with acme's held action", toCRMAdmin)
	}
	if strings.Contains(toCRMAdmin[0].Body, "enq_scope_beta") || !strings.Contains(toCRMAdmin[0].Body, "1 action needs you") {
		t.Errorf("the digest of an operator of acme tells of beta's work: %q", toCRMAdmin[0].Body)
	}
	for _, d := range sink.all() {
		if d["owner"] == "crm-admin@example.com" && strings.Contains(fmt.Sprint(d), "enq_scope_beta") {
			t.Errorf("the webhook digest for an operator of acme tells of beta's work: %v", d)
		}
	}

	// Without an account, the owner the config names is told of beta's action too.
	w.exec(`DELETE FROM users WHERE email = 'crm-admin@example.com'`)
	if _, err := n.NotifyOnce(context.Background(), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	last := ownerMail.Messages()[len(ownerMail.Messages())-1]
	if last.To[0] != "crm-admin@example.com" || !strings.Contains(last.Body, "enq_scope_beta") {
		t.Errorf("without an account the CRM's owner got %q; want beta's held action, which the config addressed to them", last.Body)
	}
}

// TestSnoozedActionWaitsOutOfTheDigest: an action a person snoozed, reported
// before or not yet, is in no digest until its snooze ends, and is reported at
// the first run after it; the snooze changes nothing of the action.
func TestSnoozedActionWaitsOutOfTheDigest(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	n, ownerMail, _ := w.notifier()
	ctx := context.Background()
	w.crm.Fail(sandbox.Fault{Status: 422, Message: "bad amount"})
	w.deliver(checkout{eventID: "evt_zz", enquiry: "enq_zz"})
	failed := w.waitFor("open_opportunity", "enq_zz", "failed")
	id, err := strconv.ParseInt(failed.ID, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if sent, err := n.NotifyOnce(ctx, now); err != nil || sent != 1 {
		t.Fatalf("the first digest: sent %d, %v", sent, err)
	}
	clock := now
	rv := review.New(w.pool, w.loadConfig(), nil).WithClock(func() time.Time { return clock })
	op := ledger.Actor{Name: "sales-ops@example.com", Role: settings.RoleAdmin}
	if _, err := rv.Do(ctx, op, review.ActSnooze, id, review.ActParams{Until: now.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Duration{time.Hour, 2*time.Hour - time.Minute} {
		if sent, err := n.NotifyOnce(ctx, now.Add(at)); err != nil || sent != 0 {
			t.Errorf("%s into a two-hour snooze: sent %d digests (%v), want none", at, sent, err)
		}
	}
	if sent, err := n.NotifyOnce(ctx, now.Add(2*time.Hour+time.Minute)); err != nil || sent != 1 {
		t.Fatalf("after the snooze: sent %d, %v; want the action reported again", sent, err)
	}
	msgs := ownerMail.Messages()
	if len(msgs) != 2 || !strings.Contains(msgs[1].Body, "/actions/"+failed.ID) {
		t.Fatalf("%d digests, the last %+v; want the snoozed action in the second", len(msgs), msgs[len(msgs)-1])
	}
	if got := w.actions("open_opportunity"); len(got) != 1 || got[0].State != "failed" || got[0].Attempts != failed.Attempts ||
		got[0].Reason != failed.Reason {
		t.Errorf("the snooze changed the action: %+v, was %+v", got, failed)
	}
}
