package notify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sender"
	"github.com/oncehook/oncehook/internal/settings"
)

// Notifier tells owners when actions start needing a person: failed, held, or
// uncertain for longer than notify.uncertain_after. Each owner gets at most one
// digest per notify.every, and an (action, state) is reported once.
type Notifier struct {
	pool   *pgxpool.Pool
	cfg    *settings.Config
	logger *slog.Logger
	mail   ledger.DestinationClient
	client *http.Client
}

// Params is the input of New.
type Params struct {
	Pool   *pgxpool.Pool
	Config *settings.Config
	// Mail sends the email digests: a client for Config.Notify.SMTP.Destination().
	// Nil sends none, even when notify.smtp is configured.
	Mail   ledger.DestinationClient
	Logger *slog.Logger
}

// New returns a Notifier, or nil when no channel is configured.
func New(p Params) *Notifier {
	if !p.Config.Notify.Enabled() {
		return nil
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	n := &Notifier{pool: p.Pool, cfg: p.Config, logger: p.Logger, client: &http.Client{Timeout: 10 * time.Second}}
	if p.Config.Notify.SMTP.Addr != "" {
		n.mail = p.Mail
	}
	return n
}

// Run sends digests until ctx ends. A nil Notifier does nothing.
func (n *Notifier) Run(ctx context.Context) {
	if n == nil {
		return
	}
	tick := time.NewTicker(min(time.Minute, n.cfg.Notify.Every/2+time.Millisecond))
	defer tick.Stop()
	for {
		if _, err := n.NotifyOnce(ctx, time.Now()); err != nil && ctx.Err() == nil {
			n.logger.Warn("notify owners", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// DigestItem is one line of a digest.
type DigestItem struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	State       string `json:"state"`
	BusinessKey string `json:"business_key"`
	Reason      string `json:"reason"`
	URL         string `json:"url"`
	client      string
	actionID    int64
}

// NotifyOnce sends what is due now and returns how many digests went out.
func (n *Notifier) NotifyOnce(ctx context.Context, now time.Time) (int, error) {
	q := db.New(n.pool)
	cands, err := q.NotifyCandidates(ctx, db.NotifyCandidatesParams{UncertainBefore: now.Add(-n.cfg.Notify.UncertainAfter), Now: now})
	if err != nil {
		return 0, fmt.Errorf("find actions needing a person: %w", err)
	}
	if len(cands) == 0 {
		return 0, nil
	}
	readers, err := n.readers(ctx)
	if err != nil {
		return 0, err
	}
	byOwner := map[string][]db.Action{}
	for _, a := range cands {
		owner := a.Owner
		if a.State == ledger.StateHeld { // a held destination is its connection owner's to fix
			if d, ok := n.cfg.Destination(a.Destination); ok && d.Owner != "" {
				owner = d.Owner
			}
		}
		if owner != "" && n.mayRead(readers, owner, a) {
			byOwner[owner] = append(byOwner[owner], a)
		}
	}
	owners := make([]string, 0, len(byOwner))
	for o := range byOwner {
		owners = append(owners, o)
	}
	sort.Strings(owners)
	sent := 0
	for _, owner := range owners {
		items, err := n.claim(ctx, owner, byOwner[owner], now)
		if err != nil {
			return sent, err
		}
		if len(items) == 0 {
			continue
		}
		// A digest that reached the owner on one channel counts as sent: resending it
		// everywhere because another channel failed would report the items twice.
		status := "failed"
		delivered, err := n.send(ctx, owner, items, now)
		if delivered {
			status = "sent"
			sent++
		}
		if err != nil {
			n.logger.Warn("digest channel failed", "owner", owner, "delivered_elsewhere", delivered, "err", err)
		}
		for _, it := range items {
			if err := q.NotificationSetStatus(ctx, db.NotificationSetStatusParams{
				Client: it.client, ActionID: it.actionID, State: it.State, Status: status}); err != nil {
				return sent, fmt.Errorf("record notification: %w", err)
			}
		}
	}
	return sent, nil
}

// readers returns every user by lowercased email: whom a digest is for decides what
// of it they may read.
func (n *Notifier) readers(ctx context.Context) (map[string]ledger.User, error) {
	users, err := accounts.ListUsers(ctx, n.pool, false)
	if err != nil {
		return nil, fmt.Errorf("read who the owners are: %w", err)
	}
	out := make(map[string]ledger.User, len(users))
	for _, u := range users {
		out[strings.ToLower(u.Email)] = u
	}
	return out, nil
}

// mayRead reports whether owner may be told of a, through the scope the pages hold
// them to: an owner with an account, what the account sees (a disabled one,
// nothing); an owner without one, what the config itself addressed to them, the
// action's rule for its client or the destination it waits for. An item left out is
// not reported to them, and stays to be told to someone who may read it.
func (n *Notifier) mayRead(readers map[string]ledger.User, owner string, a db.Action) bool {
	if u, ok := readers[strings.ToLower(owner)]; ok {
		return !u.Disabled && u.Actor().Sees(a.Client)
	}
	if d, ok := n.cfg.Destination(a.Destination); ok && strings.EqualFold(d.Owner, owner) {
		return true
	}
	for _, r := range n.cfg.Actions {
		if r.Name != a.Name || !strings.EqualFold(r.Owner, owner) {
			continue
		}
		if src, ok := n.cfg.Source(r.Source); ok && src.Client == a.Client {
			return true
		}
	}
	return false
}

// claim takes the owner's digest slot and the items not claimed elsewhere, in one
// short transaction, before anything is sent.
func (n *Notifier) claim(ctx context.Context, owner string, actions []db.Action, now time.Time) ([]DigestItem, error) {
	var items []DigestItem
	err := db.WithTx(ctx, n.pool, func(q *db.Queries) error {
		items = nil
		_, err := q.OwnerDigestClaim(ctx, db.OwnerDigestClaimParams{Owner: owner, Now: now, NotAfter: now.Add(-n.cfg.Notify.Every)})
		if db.IsNotFound(err) {
			return nil // a digest went out within the interval
		}
		if err != nil {
			return fmt.Errorf("claim digest slot: %w", err)
		}
		for _, a := range actions {
			_, err := q.NotificationClaim(ctx, db.NotificationClaimParams{Client: a.Client, ActionID: a.ID, State: a.State, Owner: owner, Now: now})
			if db.IsNotFound(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("claim notification: %w", err)
			}
			items = append(items, DigestItem{ID: fmt.Sprint(a.ID), Name: a.Name, State: a.State, BusinessKey: a.BusinessKey,
				Reason: a.Reason, URL: fmt.Sprintf("%s/actions/%d?client=%s", n.cfg.BaseURL, a.ID, url.QueryEscape(a.Client)), client: a.Client, actionID: a.ID})
		}
		return nil
	})
	return items, err
}

// needYou says how many actions wait for the digest's reader.
func needYou(n int) string {
	if n == 1 {
		return "1 action needs you"
	}
	return fmt.Sprintf("%d actions need you", n)
}

// send delivers one digest on every configured channel; delivered is true when at
// least one of them took it.
func (n *Notifier) send(ctx context.Context, owner string, items []DigestItem, now time.Time) (delivered bool, err error) {
	var errs []string
	if n.mail != nil {
		var b strings.Builder
		fmt.Fprintf(&b, "%s in oncehook:\n\n", needYou(len(items)))
		for _, it := range items {
			fmt.Fprintf(&b, "- [%s] %s %s: %s\n  %s\n", it.State, it.Name, it.BusinessKey, it.Reason, it.URL)
		}
		params, _ := json.Marshal(map[string]string{"to": owner,
			"subject": "oncehook: " + needYou(len(items)), "text": b.String()})
		out := n.mail.Perform(ctx, ledger.Call{OperationKey: digestKey(owner, now), Params: params})
		if out.Observed == ledger.ObsSuccess {
			delivered = true
		} else {
			errs = append(errs, "email: "+out.Detail)
		}
	}
	if w := n.cfg.Notify.Webhook; w.URL != "" {
		if err := n.post(ctx, w, owner, items, now); err != nil {
			errs = append(errs, "webhook: "+err.Error())
		} else {
			delivered = true
		}
	}
	if len(errs) > 0 {
		return delivered, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return delivered, nil
}

// post sends the digest as a Standard Webhooks message, signed with the configured secret.
func (n *Notifier) post(ctx context.Context, w settings.NotifyWebhook, owner string, items []DigestItem, now time.Time) error {
	body, err := json.Marshal(map[string]any{"type": "oncehook.digest", "owner": owner, "items": items,
		"timestamp": now.UTC().Format(time.RFC3339)})
	if err != nil {
		return fmt.Errorf("encode digest: %w", err)
	}
	hdr, err := sender.Headers(ledger.ProviderStandardWebhooks, w.Secret, sender.Delivery{ID: digestKey(owner, now), Body: body, At: now})
	if err != nil {
		return fmt.Errorf("sign digest: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header = hdr
	res, err := n.client.Do(req)
	if err != nil {
		return fmt.Errorf("post digest: %w", err)
	}
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("the webhook answered HTTP %d", res.StatusCode)
	}
	return nil
}

// digestKey names one digest: its message id and webhook id.
func digestKey(owner string, now time.Time) string {
	sum := sha256.Sum256([]byte(owner))
	return fmt.Sprintf("digest_%s_%d", hex.EncodeToString(sum[:8]), now.Unix())
}
