package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
)

// A BackfillClient asks one source's provider what it sent (DESIGN.md section 4b).
// provider/ has one for Stripe, whose events list carries each event, and one for
// GitHub, whose hook deliveries are sent again on request.
type BackfillClient interface {
	// List returns one page of what the provider sent at or after since, newest
	// first, and the cursor of the next page, "" after the last. Errors are
	// *ProviderError.
	List(ctx context.Context, since time.Time, cursor string) (BackfillPage, error)
	// Redeliver asks the provider to send the attempt again through the webhook
	// (GitHub); it is only asked for items without a Body.
	Redeliver(ctx context.Context, attemptID string) error
}

// BackfillPage is one page of a provider's list.
type BackfillPage struct {
	Items []BackfillItem
	Next  string
}

// BackfillItem is one event (Stripe) or delivery attempt (GitHub) the provider lists.
type BackfillItem struct {
	ID         string // the delivery identity: Stripe's event id, GitHub's delivery guid
	Type       string
	OccurredAt time.Time
	Body       []byte // Stripe: the event as the API returns it, stored as is; nil for GitHub
	Failed     bool   // GitHub: this attempt was not answered with a 2xx
	Status     int    // GitHub: the attempt's reply status; 0 when none came (refused, timed out)
	AttemptID  string // GitHub: the attempt to redeliver
	Redelivery bool   // GitHub: this attempt was itself a redelivery someone asked for
}

// ProviderError is a provider API's refusal, or its silence, during a pass.
type ProviderError struct {
	Status     int           // 0: no reply (timeout, connection refused)
	RetryAfter time.Duration // from a 429 (or GitHub's rate limit reset); 0 when not given
	Message    string        // plain words, never the key
}

func (e *ProviderError) Error() string { return e.Message }

// BackfillParams wires a Backfiller.
type BackfillParams struct {
	Pool    *pgxpool.Pool
	Config  *Config
	Inbox   *Inbox
	Clients map[string]BackfillClient // by source name
	Logger  *slog.Logger
	Metrics *Metrics
	Tick    time.Duration // how often due passes are looked for; default 30s
	Lease   time.Duration // how long a pass may take before another process may start one; default 10m
	Owner   string        // this process, in the lease; default host:pid
}

// Backfiller runs each backfilled source's passes when they are due, one at a time
// across processes (a lease row per source in backfill_state).
type Backfiller struct {
	p BackfillParams
}

// NewBackfiller returns a Backfiller for the sources of p.Config that have a backfill
// section and a client.
func NewBackfiller(p BackfillParams) *Backfiller {
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	if p.Tick <= 0 {
		p.Tick = 30 * time.Second
	}
	if p.Lease <= 0 {
		p.Lease = 10 * time.Minute
	}
	if p.Owner == "" {
		host, _ := os.Hostname()
		p.Owner = host + ":" + strconv.Itoa(os.Getpid())
	}
	return &Backfiller{p: p}
}

// Run runs due passes until ctx ends. A failing provider API is recorded and never
// stops the loop, nor touches ingest.
func (b *Backfiller) Run(ctx context.Context) error {
	t := time.NewTicker(b.p.Tick)
	defer t.Stop()
	for {
		b.RunDue(ctx, false)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// RunDue runs the pass of every backfilled source that is due, or of all of them
// when force is set (their lease still applies), each source concurrently. It
// returns the results of the passes this process ran.
func (b *Backfiller) RunDue(ctx context.Context, force bool) []BackfillResult {
	var (
		mu  sync.Mutex
		out []BackfillResult
		wg  sync.WaitGroup
	)
	for _, src := range b.p.Config.Sources {
		client, ok := b.p.Clients[src.Name]
		if !src.Backfill.On() || !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, ran, err := b.pass(ctx, src, client, force)
			if err != nil {
				b.p.Logger.Warn("backfill pass not recorded", "source", src.Name, "err", err)
			}
			if ran {
				mu.Lock()
				out = append(out, res)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b BackfillResult) int { return strings.Compare(a.Source, b.Source) })
	return out
}

// BackfillResult is what one pass found.
type BackfillResult struct {
	Source      string
	Listed      int      // what the provider listed in the window
	Missing     int      // of those, not in the inbox
	Stored      int      // stored as backfilled events
	Redelivered int      // redeliveries asked for
	Refused     []string // GitHub: deliveries oncehook itself refused (4xx), not asked for again
	Err         error
}

// pass claims the source's lease and, when it got it, runs one pass and records it.
func (b *Backfiller) pass(ctx context.Context, src Source, client BackfillClient, force bool) (BackfillResult, bool, error) {
	q := db.New(b.p.Pool)
	key := db.BackfillEnsureParams{Client: src.Client, Source: src.Name}
	if err := q.BackfillEnsure(ctx, key); err != nil {
		return BackfillResult{}, false, fmt.Errorf("ensure backfill state: %w", err)
	}
	_, err := q.BackfillClaim(ctx, db.BackfillClaimParams{LeaseSeconds: b.p.Lease.Seconds(), Owner: b.p.Owner,
		Client: src.Client, Source: src.Name, Force: force})
	if db.IsNotFound(err) {
		return BackfillResult{}, false, nil // not due, or another process runs it
	}
	if err != nil {
		return BackfillResult{}, false, fmt.Errorf("claim backfill pass: %w", err)
	}
	passCtx, cancel := context.WithTimeout(ctx, b.p.Lease)
	defer cancel()
	res := b.run(passCtx, src, client)
	next, msg := src.Backfill.Every, ""
	if res.Err != nil {
		msg = ErrorMessage(res.Err)
		var pe *ProviderError
		if errors.As(res.Err, &pe) {
			msg = pe.Message
			if pe.RetryAfter > 0 {
				next = pe.RetryAfter
			}
		}
		b.p.Logger.Warn("backfill pass failed", "source", src.Name, "err", res.Err)
	}
	b.p.Metrics.BackfillPass(res)
	err = q.BackfillFinish(context.WithoutCancel(ctx), db.BackfillFinishParams{
		Client: src.Client, Source: src.Name, Owner: b.p.Owner, Listed: int32(res.Listed), Missing: int32(res.Missing),
		Stored: int32(res.Stored), Redelivered: int32(res.Redelivered), Error: msg, AfterSeconds: next.Seconds(),
		Refused: int32(len(res.Refused)), RefusedIds: firstRefused(res.Refused)})
	if err != nil {
		return res, true, fmt.Errorf("record backfill pass: %w", err)
	}
	return res, true, nil
}

// run lists the window page by page. Listed events the inbox lacks are stored as
// they come; deliveries to redeliver are gathered first, because a delivery's
// attempts (the failed one and a later success) may be on different pages.
func (b *Backfiller) run(ctx context.Context, src Source, client BackfillClient) BackfillResult {
	res := BackfillResult{Source: src.Name}
	since := time.Now().Add(-src.Backfill.Window)
	deliveries := map[string]*delivery{}
	var order []string
	cursor := ""
	for {
		page, err := client.List(ctx, since, cursor)
		if err != nil {
			res.Err = err
			return res
		}
		res.Listed += len(page.Items)
		var events []BackfillItem
		for _, it := range page.Items {
			if it.Body != nil {
				events = append(events, it)
				continue
			}
			d, ok := deliveries[it.ID]
			if !ok {
				d = &delivery{lastStatus: it.Status} // the newest attempt comes first
				deliveries[it.ID] = d
				order = append(order, it.ID)
			}
			if !it.Failed {
				d.delivered = true
			} else if d.failedAttempt == "" {
				d.failedAttempt = it.AttemptID
			}
		}
		if err := b.storeMissing(ctx, src, events, &res); err != nil {
			res.Err = err
			return res
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if len(order) > 0 {
		res.Listed = len(order) // deliveries, not attempts
	}
	b.redeliver(ctx, src, client, order, deliveries, &res)
	return res
}

// delivery is what a pass learns of one GitHub delivery from its attempts.
type delivery struct {
	failedAttempt string // the newest failed attempt
	delivered     bool   // some attempt got a 2xx
	lastStatus    int    // the newest attempt's reply status; 0: none came
}

// refusedByOncehook reports whether a delivery's newest attempt reached oncehook
// and was refused (a signature it does not accept, a body over the limit): asking
// again would be refused again. No reply, a timeout and a 5xx (a proxy's while
// oncehook was down, or oncehook's own storage failing) never reached the inbox,
// and neither a 408 or 429 refused it for good.
func refusedByOncehook(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests
}

// redeliver asks, once per pass, for each delivery in order that never got a 2xx
// and that the inbox lacks, unless oncehook itself refused its newest attempt: those
// are listed in res.Refused for the sources page. GitHub keeps deliveries for a few
// days, so a delivery is asked for on every pass until one arrives or GitHub
// forgets it.
func (b *Backfiller) redeliver(ctx context.Context, src Source, client BackfillClient, order []string,
	deliveries map[string]*delivery, res *BackfillResult) {
	var failed []string
	for _, id := range order {
		if d := deliveries[id]; !d.delivered && d.failedAttempt != "" {
			failed = append(failed, id)
		}
	}
	known, err := b.known(ctx, src, failed)
	if err != nil {
		res.Err = err
		return
	}
	for _, id := range failed {
		switch {
		case known[id]:
		case refusedByOncehook(deliveries[id].lastStatus):
			res.Refused = append(res.Refused, id)
		default:
			res.Missing++
			if err := client.Redeliver(ctx, deliveries[id].failedAttempt); err != nil {
				res.Err = err
				return
			}
			res.Redelivered++
		}
	}
}

// maxRefusedShown bounds the refused deliveries a pass keeps by name.
const maxRefusedShown = 10

func firstRefused(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids[:min(len(ids), maxRefusedShown)]
}

// known returns which of ids the inbox holds for src.
func (b *Backfiller) known(ctx context.Context, src Source, ids []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := db.New(b.p.Pool).EventKnownIDs(ctx, db.EventKnownIDsParams{Client: src.Client, Source: src.Name, Ids: ids})
	if err != nil {
		return nil, fmt.Errorf("look up listed events: %w", err)
	}
	for _, id := range rows {
		out[id] = true
	}
	return out, nil
}

// storeMissing stores the events the inbox lacks, all at once so the inbox writes
// them as one batch, like webhooks arriving together.
func (b *Backfiller) storeMissing(ctx context.Context, src Source, events []BackfillItem, res *BackfillResult) error {
	ids := make([]string, len(events))
	for i, e := range events {
		ids[i] = e.ID
	}
	known, err := b.known(ctx, src, ids)
	if err != nil {
		return err
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, e := range events {
		if known[e.ID] {
			continue
		}
		known[e.ID] = true // listed twice on one page: stored once
		res.Missing++
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc, err := b.p.Inbox.Backfill(ctx, src, Delivery{ID: e.ID, Type: e.Type, OccurredAt: e.OccurredAt, Payload: e.Body})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil && first == nil:
				first = fmt.Errorf("store backfilled event %s: %w", e.ID, err)
			case err == nil && !rc.Duplicate:
				res.Stored++
			}
		}()
	}
	wg.Wait()
	return first
}
