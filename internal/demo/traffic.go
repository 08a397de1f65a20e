// Package demo drives oncehook's newcomer demo: a sender that posts correctly signed
// webhooks for all four providers, with the duplicates, conflicts, reordering,
// cancellations and destination faults that real traffic brings.
package demo

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/sender"
	"github.com/oncehook/oncehook/internal/settings"
)

// Traffic posts the demo's webhooks to a running oncehook and schedules faults at
// the sandbox destinations.
type Traffic struct {
	BaseURL string // where oncehook listens, e.g. http://127.0.0.1:8080
	Config  *settings.Config
	Secrets map[string]string // by environment variable name, as the config names them
	CRM     *sandbox.CRM
	Mail    *sandbox.Mail
	Logger  *slog.Logger
	Pace    time.Duration // between scripted steps; default 700ms
	// Played, if set, is called once the script has played out, its delayed steps
	// included (the CRM taking its token back, 40s after the last step); what
	// follows is a steady stream that logs only its failures.
	Played func()
	// Trouble is how often, once the script has played, one of its destination
	// faults comes back (in turn), so the queues never run dry; default 3 minutes.
	Trouble time.Duration
	// Review and Admin, if set: a few of the actions that wait for a person are
	// assigned to Admin, so that person finds work under Mine from the start.
	Review *review.Review
	Admin  string

	client *http.Client
	seq    int
	later  sync.WaitGroup // the script's delayed steps
}

// step is one moment of the script.
type step struct {
	say string
	do  func(ctx context.Context)
}

// Run plays the script once (about a minute at the default pace: by its end every
// queue has items), then keeps a gentle stream of new events and repeats until ctx ends.
func (t *Traffic) Run(ctx context.Context) {
	if t.Pace <= 0 {
		t.Pace = 700 * time.Millisecond
	}
	if t.Logger == nil {
		t.Logger = slog.Default()
	}
	t.client = &http.Client{Timeout: 15 * time.Second}
	for _, s := range t.script() {
		if ctx.Err() != nil {
			return
		}
		t.Logger.Info("demo: " + s.say)
		s.do(ctx)
		t.assignSome(ctx)
		if !sleep(ctx, t.Pace) {
			return
		}
	}
	t.Logger.Info("demo: script done; a new checkout every few seconds from now on")
	go func() {
		t.later.Wait()
		if ctx.Err() == nil && t.Played != nil {
			t.Played()
		}
	}()
	if t.Trouble <= 0 {
		t.Trouble = 3 * time.Minute
	}
	lastTrouble, turn := time.Now(), 0
	for i := 0; ; i++ {
		if !sleep(ctx, 4*t.Pace) {
			return
		}
		n, created := t.next(), time.Now()
		t.checkout(ctx, n, "completed", created, 1000+n%5000)
		if i%3 == 0 { // providers repeat themselves: so does the demo
			t.checkout(ctx, n, "completed", created, 1000+n%5000)
		}
		if time.Since(lastTrouble) >= t.Trouble {
			faults := t.faultSteps(time.Now())
			f := faults[turn%len(faults)]
			t.Logger.Info("demo: the trouble comes back: " + f.say)
			f.do(ctx)
			lastTrouble, turn = time.Now(), turn+1
		}
		if i%5 == 0 {
			t.assignSome(ctx)
		}
	}
}

// adminShare is how many open actions that wait for a person the demo keeps
// assigned to its admin.
const adminShare = 2

// assignSome assigns failed or uncertain actions to t.Admin until that person
// has adminShare of them; a failure is logged, the demo goes on.
func (t *Traffic) assignSome(ctx context.Context) {
	if t.Review == nil || t.Admin == "" {
		return
	}
	mine, err := t.Review.ListActions(ctx, review.ActionFilter{States: ledger.PersonStates, Owner: t.Admin, Limit: adminShare})
	if err != nil || len(mine.Actions) >= adminShare {
		return
	}
	open, err := t.Review.ListActions(ctx, review.ActionFilter{States: []string{ledger.StateFailed, ledger.StateUncertain}, Limit: 20})
	if err != nil {
		t.Logger.Warn("demo: list actions to assign", "err", err)
		return
	}
	need := adminShare - len(mine.Actions)
	for _, a := range open.Actions {
		if need == 0 {
			return
		}
		if a.Owner == t.Admin {
			continue
		}
		_, err := t.Review.Do(ctx, ledger.Actor{Name: "demo", Role: settings.RoleAdmin}, review.ActAssign, a.ID,
			review.ActParams{Owner: t.Admin, Note: "assigned by the demo, to practise on"})
		if err != nil {
			t.Logger.Warn("demo: assign", "action", a.ID, "err", err)
			continue
		}
		need--
	}
}

// script is the demo's steps in order: first what senders do, then what
// destinations do wrong. Every step dates its events from the same moment.
func (t *Traffic) script() []step {
	now := time.Now()
	return append(t.senderSteps(now), t.faultSteps(now)...)
}

// senderSteps are new events from every provider, and what providers do besides
// sending them once and in order: repeats, a changed payload, a stale event, a
// cancellation.
func (t *Traffic) senderSteps(now time.Time) []step {
	return []step{
		{"new Stripe checkouts become one CRM opportunity and one welcome email each", func(ctx context.Context) {
			for range 3 {
				n := t.next()
				t.checkout(ctx, n, "completed", now, 4900+n)
			}
		}},
		{"a sequential duplicate: Stripe sends the same event twice", func(ctx context.Context) {
			n := t.next()
			t.checkout(ctx, n, "completed", now, 2500)
			t.checkout(ctx, n, "completed", now, 2500)
		}},
		{"a concurrent duplicate: five copies of one event at the same moment", func(ctx context.Context) {
			n := t.next()
			var wg sync.WaitGroup
			for range 5 {
				wg.Add(1)
				go func() { defer wg.Done(); t.checkout(ctx, n, "completed", now, 7700) }()
			}
			wg.Wait()
		}},
		{"a changed payload under a known event id: flagged as a conflict, never acted on", func(ctx context.Context) {
			n := t.next()
			t.checkout(ctx, n, "completed", now, 1200)
			t.checkout(ctx, n, "completed", now, 9999)
		}},
		{"out of order: an older event for a session after a newer one is stale", func(ctx context.Context) {
			n := t.next()
			t.checkoutEvent(ctx, fmt.Sprintf("evt_demo_%d_new", n), n, "completed", now, 3100)
			t.checkoutEvent(ctx, fmt.Sprintf("evt_demo_%d_old", n), n, "completed", now.Add(-time.Hour), 3000)
		}},
		{"a cancellation: the checkout expires before its opportunity was opened", func(ctx context.Context) {
			n := t.next()
			t.CRM.Fail(sandbox.Fault{Delay: 3 * time.Second}) // keep the CRM busy so the cancel lands first
			t.checkout(ctx, t.next(), "completed", now, 100)
			t.checkout(ctx, n, "completed", now, 4200)
			t.checkoutEvent(ctx, fmt.Sprintf("evt_demo_%d_exp", n), n, "expired", now.Add(time.Minute), 4200)
		}},
		{"Shopify orders, a GitHub issue and a Standard Webhooks invoice", func(ctx context.Context) {
			t.shopifyOrder(ctx, 820982911946154508+int64(t.next()), now)
			t.githubIssue(ctx, t.next())
			t.invoice(ctx, t.next())
		}},
	}
}

// faultSteps are the destinations failing: a timeout after the CRM committed, a
// 429, a 422, a mail server gone silent, and a rotated CRM token, restored later.
func (t *Traffic) faultSteps(now time.Time) []step {
	return []step{
		{"the CRM times out after committing: uncertain, then reconciled by lookup (searches are down for a while)", func(ctx context.Context) {
			t.CRM.LookupOutage(90 * time.Second)
			t.CRM.Fail(sandbox.Fault{AfterCommit: true, Delay: 8 * time.Second})
			t.checkout(ctx, t.next(), "completed", now, 6100)
		}},
		{"the CRM answers 429 with Retry-After: retried with the same key when allowed", func(ctx context.Context) {
			t.CRM.Fail(sandbox.Fault{Status: 429, RetryAfter: "45"})
			t.checkout(ctx, t.next(), "completed", now, 5300)
		}},
		{"the CRM refuses a record with 422: failed, for a person to correct and retry", func(ctx context.Context) {
			t.CRM.Fail(sandbox.Fault{Status: 422, Message: "amount_total must be at least 50 cents"})
			t.checkout(ctx, t.next(), "completed", now, 10)
		}},
		{"the mail server goes silent after the message was sent: SMTP has no lookup, so a person decides", func(ctx context.Context) {
			hang := make(chan struct{})
			t.Mail.HangNext(hang) // the message is kept, but only after oncehook gave up waiting
			time.AfterFunc(30*time.Second, func() { close(hang) })
			t.invoice(ctx, t.next())
		}},
		{"the CRM token is rotated: 401, the destination is disconnected and its actions held (press Reconnect on /destinations once it is back)", func(ctx context.Context) {
			t.CRM.SetToken("rotated-" + t.Secrets["CRM_TOKEN"])
			for range 3 {
				t.checkout(ctx, t.next(), "completed", now, 8800)
			}
			t.later.Go(func() {
				if sleep(ctx, 40*time.Second) {
					t.CRM.SetToken(t.Secrets["CRM_TOKEN"])
					t.Logger.Info("demo: the CRM accepts the original token again: an admin can Reconnect it on /destinations")
				}
			})
		}},
	}
}

func (t *Traffic) next() int { t.seq++; return int(time.Now().Unix()%100000)*100 + t.seq }

func (t *Traffic) checkout(ctx context.Context, n int, what string, created time.Time, amount int) {
	t.checkoutEvent(ctx, fmt.Sprintf("evt_demo_%d", n), n, what, created, amount)
}

func (t *Traffic) checkoutEvent(ctx context.Context, eventID string, n int, what string, created time.Time, amount int) {
	body := fmt.Sprintf(`{"id":%q,"object":"event","type":"checkout.session.%s","created":%d,`+
		`"data":{"object":{"id":"cs_demo_%d","object":"checkout.session","amount_total":%d,"currency":"eur",`+
		`"customer_details":{"email":"customer%d@example.com"},"metadata":{"enquiry_id":"enq_%d"}}}}`,
		eventID, what, created.Unix(), n, amount, n, n)
	t.post(ctx, "stripe", sender.Delivery{Body: []byte(body)})
}

func (t *Traffic) shopifyOrder(ctx context.Context, id int64, at time.Time) {
	body := fmt.Sprintf(`{"id":%d,"email":"buyer@example.com","total_price":"59.00","currency":"EUR","updated_at":%q}`,
		id, at.UTC().Format(time.RFC3339))
	d := sender.Delivery{ID: fmt.Sprintf("b54557e4-%d", id), Type: "orders/create", Body: []byte(body)}
	t.post(ctx, "shopify", d)
	t.post(ctx, "shopify", d) // Shopify retries: the same webhook id again
}

func (t *Traffic) githubIssue(ctx context.Context, n int) {
	body := fmt.Sprintf(`{"action":"opened","issue":{"number":%d,"title":"Checkout button does nothing"},`+
		`"repository":{"full_name":"acme/shop"}}`, n)
	t.post(ctx, "github", sender.Delivery{ID: fmt.Sprintf("72d3162e-cc78-11e3-81ab-%012d", n), Type: "issues", Body: []byte(body)})
}

func (t *Traffic) invoice(ctx context.Context, n int) {
	body := fmt.Sprintf(`{"type":"invoice.paid","timestamp":%q,"data":{"invoice_id":"in_demo_%d","email":"billing%d@example.com","amount":1900}}`,
		time.Now().UTC().Format(time.RFC3339), n, n)
	t.post(ctx, "standard-webhooks", sender.Delivery{ID: fmt.Sprintf("msg_demo_%d", n), Body: []byte(body)})
}

// post signs d for the first source of provider and sends it, retrying a 503 as a
// provider would.
func (t *Traffic) post(ctx context.Context, provider string, d sender.Delivery) {
	var src settings.Source
	for _, s := range t.Config.Sources {
		if s.Provider == provider {
			src = s
			break
		}
	}
	if src.Name == "" {
		return
	}
	for try := 0; try < 5; try++ {
		hdr, err := sender.Headers(provider, t.Secrets[src.SecretEnv], d)
		if err != nil {
			t.Logger.Warn("demo: sign", "err", err)
			return
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.BaseURL+"/hooks/"+src.Name, bytes.NewReader(d.Body))
		if err != nil {
			return
		}
		req.Header = hdr
		res, err := t.client.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				t.Logger.Warn("demo: post", "source", src.Name, "err", err)
			}
			return
		}
		res.Body.Close()
		if res.StatusCode != http.StatusServiceUnavailable {
			return
		}
		if !sleep(ctx, time.Second) {
			return
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
