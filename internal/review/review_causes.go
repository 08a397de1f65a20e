package review

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/store"
)

// Cause is a group of open actions held by the same thing, with what fixes it:
// "crm disconnected: 52 held -> Reconnect".
type Cause struct {
	Queue       string
	State       string
	Destination string
	Label       string // what holds them, in words
	Fix         string // what a person does about it, in a few words
	Count       int64
	// About: Count is an estimate; More: Count is a lower bound (store.CauseCount).
	About, More bool
	Oldest      time.Time // when the one waiting longest entered its state
	Reason      string    // the start of their reasons, to filter the queue by; "" for none
	Blocked     bool      // pending behind a predecessor that is not confirmed
	// Unconfigured is the client, no longer in the config, whose actions these
	// are (waitsForUnconfigured): a cause of its own, whatever their reasons; "".
	Unconfigured string
	// Breaker is set on the one cause of a destination whose breaker parks its
	// actions: every action of it that would run or be reconciled waits for it.
	Breaker *ledger.Breaker
}

// reasonStartBytes is how much of a reason decides its cause: every cause
// prefix fits in it (TestCausePrefixesFitReasonStart), and migration 00030 keeps
// that much of each waiting action's reason in reason_start.
const reasonStartBytes = 80

// Waiting is what the open actions wait for, read once: the queues with their
// counts, and the causes that hold them.
type Waiting struct {
	Queues []QueueSummary // every queue, empty ones included, in Queues' order
	Causes []Cause        // the queues' order first, the largest group first within a queue
}

// Waiting groups every open action by state, destination and the cause its
// reason names, and counts the queues from the same groups.
func (r *Review) Waiting(ctx context.Context) (Waiting, error) {
	sc, err := r.readScope(ctx)
	if err != nil {
		return Waiting{}, err
	}
	q := db.New(r.pool)
	configured := r.cfg.Clients()
	stored, err := r.storedClients(ctx)
	if err != nil {
		return Waiting{}, err
	}
	split := slices.ContainsFunc(stored, func(c string) bool { return !slices.Contains(configured, c) && sc.Sees(c) })
	rows, err := r.store.Causes(ctx, r.pool, db.DashboardCausesParams{ReasonBytes: reasonStartBytes,
		AllClients: sc.All, ScopeClients: sc.Clients, Split: split, Configured: configured})
	if err != nil {
		return Waiting{}, fmt.Errorf("group actions by cause: %w", err)
	}
	// The actions of clients no longer configured are named client by client,
	// read only when there are some: a config that names every client with
	// actions (the usual case) costs no second read.
	var gone []db.DashboardCausesUnconfiguredRow
	if slices.ContainsFunc(rows, func(row store.CauseCount) bool {
		return row.Unconfigured > 0 && waitsForUnconfigured(row.State)
	}) {
		if gone, err = q.DashboardCausesUnconfigured(ctx, db.DashboardCausesUnconfiguredParams{Configured: configured,
			AllClients: sc.All, ScopeClients: sc.Clients}); err != nil {
			return Waiting{}, fmt.Errorf("group the actions of clients no longer configured: %w", err)
		}
	}
	breakers, err := ledger.Breakers(ctx, q)
	if err != nil {
		return Waiting{}, err
	}
	return Waiting{Queues: queueSummaries(rows), Causes: r.causes(rows, gone, breakers)}, nil
}

// causes merges the rows that share a cause, then names each group and its fix.
// gone are the actions of clients no longer configured, which rows count
// (their Unconfigured) and which are causes of their own. The actions a
// breaker parks are one cause, in the outstanding queue, whatever their states.
func (r *Review) causes(rows []store.CauseCount, gone []db.DashboardCausesUnconfiguredRow, breakers map[string]ledger.Breaker) []Cause {
	var all []Cause
	for _, row := range rows {
		c := Cause{State: row.State, Destination: row.Destination, Count: row.N, About: row.About, More: row.More,
			Oldest: row.Oldest, Reason: causeOf(ledger.Deref(row.ReasonStart)), Blocked: row.Blocked}
		// (With the probe's action, and whatever was in flight when it opened.)
		if b, ok := breakers[row.Destination]; ok && b.Parks() &&
			(slices.Contains(ledger.DueStates, row.State) || row.State == ledger.StateProcessing) {
			c.State, c.Reason, c.Blocked, c.Breaker = ledger.StatePending, "", false, &b
		}
		// Held is one cause whatever the reason says: the destination is disconnected.
		if c.State == ledger.StateHeld {
			c.Reason = ""
		}
		if waitsForUnconfigured(c.State) && row.Unconfigured > 0 {
			c.Count -= row.Unconfigured // counted under their client, from gone
			if c.Count == 0 {
				continue
			}
			c.Oldest = row.OldestConfigured
		}
		all = append(all, c)
	}
	for _, g := range gone {
		all = append(all, Cause{State: g.State, Destination: g.Destination, Count: g.N, Oldest: g.Oldest, Unconfigured: g.Client})
	}
	var out []Cause
	for _, q := range ledger.Queues {
		var group []Cause
		for _, c := range all {
			if ledger.QueueOf(c.State) != q {
				continue
			}
			c.Queue = q
			if i := slices.IndexFunc(group, c.same); i >= 0 {
				group[i].add(c)
			} else {
				group = append(group, c)
			}
		}
		slices.SortStableFunc(group, func(a, b Cause) int {
			if a.State != b.State {
				return strings.Compare(a.State, b.State)
			}
			return cmp.Compare(b.Count, a.Count)
		})
		for i := range group {
			group[i].Label, group[i].Fix = r.causeWords(group[i])
		}
		out = append(out, group...)
	}
	return out
}

// same reports whether o is the same cause as c: one row of the page.
func (c Cause) same(o Cause) bool {
	return o.State == c.State && o.Destination == c.Destination && o.Reason == c.Reason &&
		o.Blocked == c.Blocked && o.Unconfigured == c.Unconfigured && (o.Breaker == nil) == (c.Breaker == nil)
}

// add counts o, the same cause, into c.
func (c *Cause) add(o Cause) {
	c.Count += o.Count
	c.About, c.More = c.About || o.About, c.More || o.More
	if o.Oldest.Before(c.Oldest) {
		c.Oldest = o.Oldest
	}
}

// causeWords names c and its fix as a person at the queue says them.
func (r *Review) causeWords(c Cause) (label, fix string) {
	d := c.Destination
	if b := c.Breaker; b != nil {
		return breakerWords(*b), "Nothing: a probe releases them, oldest first, once " + d + " answers; see Destinations"
	}
	if c.Unconfigured != "" {
		return d + ": its client " + c.Unconfigured + " is no longer configured", "Cancel, or Resolve if done another way"
	}
	switch c.State {
	case ledger.StateHeld:
		return d + " disconnected", "Reconnect " + d
	case ledger.StateUncertain:
		if c.Reason == string(ledger.ObsLookupFailed) {
			return d + ": its lookup failed, looked up again later", "Wait, or Reconcile"
		}
		if dest, ok := r.clients[d]; ok && !dest.Capabilities().Lookup {
			return d + ": outcome unknown", "Check " + d + " by hand, then Resolve"
		}
		return d + ": outcome unknown", "Reconcile"
	case ledger.StateFailed:
		return failedCauseWords(d, c.Reason)
	case ledger.StatePending:
		if c.Blocked {
			return d + ": waiting for an earlier action", "Deal with the earlier action first"
		}
		return d + ": waiting for a worker", "Nothing: the workers have it"
	case ledger.StateRetrying:
		return d + ": tried again later", "Nothing: retried with the same key"
	}
	return d + ": being performed", "Nothing: a worker has it"
}

func failedCauseWords(d, cause string) (label, fix string) {
	switch cause {
	case string(ledger.ObsRejected):
		return d + " refused the request", "Correct it, then Retry"
	case causeGaveUp:
		return d + ": gave up after retries", "Check " + d + ", then Retry"
	case causeOutcomeUnknown, string(ledger.ObsUnknowable):
		return d + ": outcome unknown", "Check " + d + " by hand, then Resolve or Retry"
	case string(ledger.ObsConflict):
		return "changed payload for the same operation", "Compare the events, then Resolve or Cancel"
	case string(ledger.ObsUnfillable):
		return d + ": a value the event cannot fill", "Correct the request"
	case string(ledger.ObsExistsNoLookup):
		return d + " says it already exists", "Check " + d + ", then Resolve"
	}
	return d + ": failed", "Read the reason, then Retry, Resolve or Cancel"
}

// breakerWords says what a breaker that parks its destination's work is doing:
// "crm down since 14:02 UTC, next probe 14:07 UTC".
func breakerWords(b ledger.Breaker) string {
	since := b.Since
	if b.OutageAt != nil {
		since = *b.OutageAt
	}
	words := b.Destination + " down since " + since.UTC().Format("15:04 UTC")
	switch {
	case b.State == ledger.BreakerHalfOpen:
		return words + ", probing now"
	case b.ProbeAt != nil:
		return words + ", next probe " + b.ProbeAt.UTC().Format("15:04 UTC")
	}
	return words
}
