package backfill

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
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/settings"
)

// BackfillParams wires a Backfiller.
// Inbox is where a pass stores what the provider sent and the inbox lacks: the
// inbox stage's Backfill, passed in by whoever wires the backfiller.
type Inbox interface {
	Backfill(ctx context.Context, src settings.Source, d ledger.Delivery) (ledger.Receipt, error)
}

type Params struct {
	Pool    *pgxpool.Pool
	Config  *settings.Config
	Inbox   Inbox
	Clients map[string]ledger.BackfillClient // by source name
	Logger  *slog.Logger
	Metrics *metrics.Metrics
	Tick    time.Duration // how often due passes are looked for; default 30s
	Lease   time.Duration // how long a pass may take before another process may start one; default 10m
	Owner   string        // this process, in the lease; default host:pid
}

// Backfiller runs each backfilled source's passes when they are due, one at a time
// across processes (a lease row per source in backfill_state).
type Backfiller struct {
	p Params
}

// New returns a Backfiller for the sources of p.Config that have a backfill
// section and a client.
func New(p Params) *Backfiller {
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
func (b *Backfiller) RunDue(ctx context.Context, force bool) []ledger.BackfillResult {
	var (
		mu  sync.Mutex
		out []ledger.BackfillResult
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
	slices.SortFunc(out, func(a, b ledger.BackfillResult) int { return strings.Compare(a.Source, b.Source) })
	return out
}

// pass claims the source's lease and, when it got it, runs one pass and records it.
func (b *Backfiller) pass(ctx context.Context, src settings.Source, client ledger.BackfillClient, force bool) (ledger.BackfillResult, bool, error) {
	q := db.New(b.p.Pool)
	key := db.BackfillEnsureParams{Client: src.Client, Source: src.Name}
	if err := q.BackfillEnsure(ctx, key); err != nil {
		return ledger.BackfillResult{}, false, fmt.Errorf("ensure backfill state: %w", err)
	}
	_, err := q.BackfillClaim(ctx, db.BackfillClaimParams{LeaseSeconds: b.p.Lease.Seconds(), Owner: b.p.Owner,
		Client: src.Client, Source: src.Name, Force: force})
	if db.IsNotFound(err) {
		return ledger.BackfillResult{}, false, nil // not due, or another process runs it
	}
	if err != nil {
		return ledger.BackfillResult{}, false, fmt.Errorf("claim backfill pass: %w", err)
	}
	passCtx, cancel := context.WithTimeout(ctx, b.p.Lease)
	defer cancel()
	res := b.run(passCtx, src, client)
	next, msg := src.Backfill.Every, ""
	if res.Err != nil {
		msg = ledger.ErrorMessage(res.Err)
		var pe *ledger.ProviderError
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
func (b *Backfiller) run(ctx context.Context, src settings.Source, client ledger.BackfillClient) ledger.BackfillResult {
	res := ledger.BackfillResult{Source: src.Name}
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
		var events []ledger.BackfillItem
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
func (b *Backfiller) redeliver(ctx context.Context, src settings.Source, client ledger.BackfillClient, order []string,
	deliveries map[string]*delivery, res *ledger.BackfillResult) {
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
func (b *Backfiller) known(ctx context.Context, src settings.Source, ids []string) (map[string]bool, error) {
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
func (b *Backfiller) storeMissing(ctx context.Context, src settings.Source, events []ledger.BackfillItem, res *ledger.BackfillResult) error {
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
			rc, err := b.p.Inbox.Backfill(ctx, src, ledger.Delivery{ID: e.ID, Type: e.Type, OccurredAt: e.OccurredAt, Payload: e.Body})
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
