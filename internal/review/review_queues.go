package review

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/internal/store"
)

// QueueSummary is one review queue on the overview: how many actions wait in it and
// since when the one waiting longest has been in its state.
type QueueSummary struct {
	Name  string
	Count int64
	// About: Count is an estimate; More: Count is a lower bound (a group of it
	// holds more than store.CausesCounted actions).
	About, More bool
	Oldest      time.Time // zero when the queue is empty
}

// queueSummaries counts the open actions of every queue from their groups.
func queueSummaries(rows []store.CauseCount) []QueueSummary {
	byQueue := map[string]*QueueSummary{}
	out := make([]QueueSummary, len(ledger.Queues))
	for i, q := range ledger.Queues {
		out[i].Name = q
		byQueue[q] = &out[i]
	}
	for _, row := range rows {
		s := byQueue[ledger.QueueOf(row.State)]
		if s == nil {
			continue
		}
		s.Count += row.N
		s.About, s.More = s.About || row.About, s.More || row.More
		if s.Oldest.IsZero() || row.StateOldest.Before(s.Oldest) {
			s.Oldest = row.StateOldest
		}
	}
	return out
}

// SourceSummary is a configured source with what it has delivered.
type SourceSummary struct {
	settings.Source
	Events        int64      // distinct deliveries stored
	Deliveries    int64      // every delivery, repeats included
	Conflicts     int64      // repeats whose body differed (among the newest store.SourceCounted when About)
	LastDelivery  *time.Time // nil before the first one
	DuplicateRate float64    // share of deliveries that were repeats, 0..1
	// About: the source holds more than store.SourceCounted events; Events is
	// the planner's count, Deliveries scaled from the newest SourceCounted, whose
	// figures give DuplicateRate, Conflicts and LastDelivery.
	About bool
}

// Sources lists every configured source with its delivery counts, in config order.
func (r *Review) Sources(ctx context.Context) ([]SourceSummary, error) {
	var seen []settings.Source
	for _, src := range r.cfg.Sources {
		if r.scope.Sees(src.Client) {
			seen = append(seen, src)
		}
	}
	rows, err := r.store.SourceStats(ctx, r.pool, seen, r.estimates)
	if err != nil {
		return nil, fmt.Errorf("count deliveries: %w", err)
	}
	byName := map[string]store.SourceCount{}
	for _, row := range rows {
		byName[row.Source] = row
	}
	out := make([]SourceSummary, 0, len(r.cfg.Sources))
	for _, src := range r.cfg.Sources {
		if !r.scope.Sees(src.Client) {
			continue
		}
		s := SourceSummary{Source: src}
		if row, ok := byName[src.Name]; ok {
			s.Events, s.Deliveries, s.Conflicts = row.Events, row.Deliveries, row.Conflicts
			last := row.LastReceivedAt
			s.LastDelivery = &last
			if row.Deliveries > 0 {
				s.DuplicateRate = float64(row.Deliveries-row.Events) / float64(row.Deliveries)
			}
			if row.Events > store.SourceCounted {
				s.About = true
				s.Events = max(row.Estimated, row.Events)
				s.Deliveries = int64(float64(row.Deliveries) * float64(s.Events) / float64(row.Events))
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// RetryNeedsCheck returns why a retry of a would need the person to confirm they
// checked the destination, or "" when the guard lets it through as it is. The
// confirmation step shows it before the person presses Retry.
func (r *Review) RetryNeedsCheck(a ledger.Action) string {
	if retry, _ := LookupAct(ActRetry); !slices.Contains(retry.States, a.State) {
		return ""
	}
	if _, err := r.retryPath(a.Destination, a.FirstAttemptAt, ActParams{}); err != nil {
		return ledger.ErrorMessage(err)
	}
	return ""
}

// BulkResult is what became of one action of a bulk act.
type BulkResult struct {
	ID          int64
	Client      string // "" when it does not exist for the actor
	Name        string
	BusinessKey string
	Done        bool
	Message     string // why it was refused, in plain words
}

// MaxBulk bounds one bulk act, so that "all that match" stays one request's work.
const MaxBulk = 500

// Bulk applies one manual act (retry, reconcile or assign) to each action in turn,
// each with its own guard, transaction and audit line, and reports each outcome.
// One refusal does not stop the rest. It returns an error only for an unknown act
// or too many ids.
func (r *Review) Bulk(ctx context.Context, actor ledger.Actor, act string, ids []int64, p ActParams) ([]BulkResult, error) {
	if x, ok := LookupAct(act); !ok || !x.Bulk {
		return nil, ledger.Errorf(ledger.EINVALID, "Several actions at once can be retried, reconciled or assigned, not %q.", act)
	}
	if len(ids) == 0 {
		return nil, ledger.Errorf(ledger.EINVALID, "Select at least one action.")
	}
	if len(ids) > MaxBulk {
		return nil, ledger.Errorf(ledger.EINVALID, "At most %d actions at once; narrow the filter.", MaxBulk)
	}
	out := make([]BulkResult, 0, len(ids))
	for _, id := range ids {
		a, err := r.Do(ctx, actor, act, id, p)
		res := BulkResult{ID: id, Client: a.Client, Name: a.Name, BusinessKey: a.BusinessKey, Done: err == nil}
		if err != nil {
			if ledger.ErrorCode(err) == ledger.EINTERNAL || ledger.ErrorCode(err) == ledger.EUNAVAILABLE {
				return out, err // storage trouble: stop rather than report every row refused
			}
			res.Message = ledger.ErrorMessage(err)
			// A refusal returns no action: name it for the report all the same.
			// (Another client's is not named: it does not exist for actor.)
			row, err := r.actionRow(ctx, db.New(r.pool), actor.Scope(), id)
			switch {
			case err == nil && actor.Sees(row.Client):
				res.Client, res.Name, res.BusinessKey = row.Client, row.Name, row.BusinessKey
			case err != nil && !db.IsNotFound(err):
				return out, fmt.Errorf("read refused action: %w", err)
			}
		}
		out = append(out, res)
	}
	return out, nil
}

// ReconcilePlan says in plain words what Reconcile would do for a, and whether it
// can find anything out at all: a destination with neither a lookup nor a key
// memory (SMTP) cannot be asked, so Reconcile would only mark the outcome unknown.
func (r *Review) ReconcilePlan(a ledger.Action) (plan string, useful bool) {
	dest, ok := r.clients[a.Destination]
	if !ok {
		return "", false
	}
	caps := dest.Capabilities()
	switch {
	case caps.Lookup:
		return fmt.Sprintf("Look the operation up at %s now; what it finds decides the next state.", a.Destination), true
	case caps.KeyMemory > 0 && (a.FirstAttemptAt == nil || caps.KeyRemembered(*a.FirstAttemptAt, r.now())):
		return fmt.Sprintf("%s has no lookup, but it still remembers the operation key, so Reconcile sends it again "+
			"with the same key and %s does not act twice.", a.Destination, a.Destination), true
	case caps.KeyMemory > 0:
		return fmt.Sprintf("%s has no lookup and its memory of the key (%s) has passed: nobody can tell from here "+
			"whether it acted. Check %s by hand, then Resolve, or Retry confirming you checked.",
			a.Destination, caps.KeyMemory, a.Destination), false
	}
	return fmt.Sprintf("%s offers no lookup and remembers no keys: nobody can tell from here whether it acted. "+
		"Check %s by hand, then Resolve, or Retry confirming you checked.", a.Destination, a.Destination), false
}

// Destination returns one configured destination with its connection state.
// ENOTFOUND when no destination has that name.
func (r *Review) Destination(ctx context.Context, name string) (DestinationStatus, error) {
	ds, err := r.Destinations(ctx)
	if err != nil {
		return DestinationStatus{}, err
	}
	for _, d := range ds {
		if d.Name == name {
			return d, nil
		}
	}
	return DestinationStatus{}, ledger.Errorf(ledger.ENOTFOUND, "There is no destination named %q.", name)
}

// Evidence is what a person can check at a's destination by hand, for an action
// whose outcome needs a person (failed or uncertain); nil where the destination
// says nothing more than the page already shows.
func (r *Review) Evidence(a ledger.Action) []ledger.Evidence {
	if a.State != ledger.StateFailed && a.State != ledger.StateUncertain {
		return nil
	}
	if g, ok := r.clients[a.Destination].(ledger.EvidenceGiver); ok {
		return g.Evidence(a)
	}
	return nil
}

// AccountHolders returns the emails of the enabled users, lowercased, to flag
// owners (configured or assigned) that cannot sign in.
func (r *Review) AccountHolders(ctx context.Context) (map[string]bool, error) {
	return accounts.AccountHolders(ctx, r.pool)
}
